"""Targets: a model endpoint plus its knobs, and the targets file of a nightly run.

A :class:`Target` names the endpoint, the model, the sampling, the template kwargs and the
client limits; :func:`load_run_config` reads a targets file (README, "Targets file").  The
API key is never here: only the *name* of the environment variable that holds it
(``api_key_env``), read by the client when it is created.  A key written literally in a
file is refused.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, TypeAdapter, ValidationError

from agent_eval.errors import ConfigError
from agent_eval.policy.allowlist import read_yaml_mapping

ToolChoice = Literal["auto", "none", "required"]
# ``tool_choice`` on a target: one of the modes, or the name of the one function the model
# must call (sent as ``{"type": "function", "function": {"name": ...}}``).
TOOL_CHOICE_MODES: tuple[str, ...] = ("auto", "none", "required")
_FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")


def _check_tool_choice(value: str) -> str:
    if value in TOOL_CHOICE_MODES or _FUNCTION_NAME.fullmatch(value):
        return value
    raise ValueError(f"{value!r} is not a tool choice; give auto, none, required or the "
                     "name of a tool the scenarios offer (e.g. bash)")


ToolChoiceSetting = Annotated[str, AfterValidator(_check_tool_choice)]

DEFAULT_DEADLINE_S = 600.0
"""Longest one request may take in all, streamed or not (README, "Hostile output")."""
DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024
"""Most bytes one reply may have on the wire, SSE framing included (16 MiB)."""

# Keys that would put a secret into a config file.  Refused anywhere in the file.
_LITERAL_KEYS = frozenset({"api_key", "apikey", "api-key", "openai_api_key", "authorization"})


# Field constraints apply when a targets file is validated (``load_run_config``); direct
# construction in code stays a plain dataclass call.
_FORBID = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class StackNotes:
    """What the operator knows of the serving stack and no server reports: the run's
    fingerprint keeps them and ``compare`` says when two runs' differ.  Free text each,
    e.g. ``server: vLLM 0.11.2``, ``parser: qwen3_coder``, ``reasoning_parser: qwen3``,
    ``template: Qwen3.5 tokenizer_config (2026-10)``, ``quantization: AWQ 4-bit``."""

    __pydantic_config__ = _FORBID

    server: Annotated[str | None, Field(max_length=200)] = None
    parser: Annotated[str | None, Field(max_length=200)] = None
    reasoning_parser: Annotated[str | None, Field(max_length=200)] = None
    template: Annotated[str | None, Field(max_length=200)] = None
    quantization: Annotated[str | None, Field(max_length=200)] = None


@dataclass(frozen=True)
class Sampling:
    """Sampling knobs.  ``None`` means "not sent": the server's default applies."""

    __pydantic_config__ = _FORBID

    temperature: Annotated[float | None, Field(ge=0)] = None
    top_p: Annotated[float | None, Field(gt=0, le=1)] = None
    top_k: int | None = None
    min_p: Annotated[float | None, Field(ge=0, le=1)] = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: Annotated[float | None, Field(gt=0)] = None
    seed: int | None = None

    def to_request(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Split into (standard OpenAI kwargs, ``extra_body`` fields as vLLM accepts them)."""
        standard: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for name, value in asdict(self).items():
            if value is not None:
                (extra if name in _VLLM_SAMPLING else standard)[name] = value
        return standard, extra


_VLLM_SAMPLING = frozenset({"top_k", "min_p", "repetition_penalty"})


@dataclass(frozen=True)
class Target:
    """A model endpoint and its knobs.  ``api_key_env`` names the variable, never the key.

    ``tool_choice`` is ``auto`` (the default), ``none``, ``required`` or a function name;
    ``None`` sends no ``tool_choice`` at all (docs/servers.md says which server needs
    which).  ``send_reasoning`` sends the model's reasoning back in later turns (as
    ``reasoning_content``); off by default because most templates drop it.

    ``timeout_s`` is the longest the client waits for the server to answer (or to send the
    next streamed chunk); ``concurrency`` sizes the connection pool, so it also caps how
    many requests this target serves at once.  ``deadline_s`` caps one request in all
    (an endless stream never idles long enough for ``timeout_s``) and ``max_reply_bytes``
    the bytes of one reply; past either the request is a server fault.

    ``server_limit`` caps the requests in flight to the target's server from this process,
    counted across every target with the same ``base_url`` (``manners.py``); ``adaptive``
    lets that limit fall when the server queues (time to first token climbs, vLLM's
    ``num_requests_waiting``) and rise again slowly.  ``stack`` holds the operator's
    notes on the serving stack (:class:`StackNotes`: parser, template, quantization),
    kept in the run's stack fingerprint (``live/stackprint.py``).

    ``stream_parity`` plays every turn twice from the same context, whole and then
    streamed (``client.ModelClient.complete``): a streamed reply that differs is the
    stack's fault (AE510, ``policy.stack.check_parity``), and the session goes on with
    the whole reply (``stream`` is then ignored).  It needs decoding that repeats itself
    (``temperature: 0`` or a ``seed``), and costs a second request per turn.
    """

    __pydantic_config__ = _FORBID

    name: Annotated[str, Field(min_length=1)]
    base_url: Annotated[str, Field(pattern=r"^https?://")]
    model: Annotated[str, Field(min_length=1)]
    api_key_env: Annotated[str | None, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = None
    sampling: Sampling = Sampling()
    chat_template_kwargs: dict[str, Any] | None = None
    max_tokens: Annotated[int | None, Field(gt=0)] = None
    tool_choice: ToolChoiceSetting | None = "auto"
    send_reasoning: bool = False
    stream: bool = False
    stream_parity: bool = False
    timeout_s: Annotated[float, Field(gt=0)] = 120.0
    retries: Annotated[int, Field(ge=0, le=20)] = 3
    concurrency: Annotated[int, Field(ge=1, le=1024)] = 4
    deadline_s: Annotated[float, Field(gt=0)] = DEFAULT_DEADLINE_S
    max_reply_bytes: Annotated[int, Field(ge=1024)] = DEFAULT_MAX_REPLY_BYTES
    extra_body: dict[str, Any] | None = None
    server_limit: Annotated[int | None, Field(ge=1, le=4096)] = None
    adaptive: bool = True
    stack: StackNotes | None = None

    def settings(self) -> dict[str, Any]:
        """A JSON-able description for the run fingerprint.  Holds no secret."""
        out = asdict(self)
        out["sampling"] = {k: v for k, v in out["sampling"].items() if v is not None}
        if out["stack"] is not None:
            out["stack"] = {k: v for k, v in out["stack"].items() if v is not None}
        return out


@dataclass(frozen=True)
class RunConfig:
    """A nightly run as written in a targets file: targets × ``suite`` × ``repeats``.

    ``suite`` is kept as written (a path relative to the working directory, or ``None``
    when the command line gives it).
    """

    __pydantic_config__ = _FORBID

    targets: Annotated[list[Target], Field(min_length=1)]
    suite: str | None = None
    repeats: Annotated[int, Field(ge=1)] = 1
    label: str | None = None


def load_run_config(path: str | Path) -> RunConfig:
    """Read a targets file (see README, "Targets file").  Every problem is a
    ``ConfigError`` naming the file and the field, including an ``api_key_env`` that is
    not set in this environment: better to stop now than after an hour of other targets."""
    where = str(path)
    raw = read_yaml_mapping(path, what="targets YAML with a `targets:` list")
    _refuse_literal_keys(raw, where, "")
    try:
        config = TypeAdapter(RunConfig).validate_python(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"]
        if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            msg = "unknown field; see the README section 'Targets file' for the fields"
        elif err["type"] == "missing":
            msg = "required field is missing; add it"
        raise ConfigError(msg, path=where, field=loc) from None
    names: set[str] = set()
    for i, t in enumerate(config.targets):
        if t.name in names:
            raise ConfigError(
                f"duplicate target name {t.name!r}; give each target its own name",
                path=where, field=f"targets.{i}.name",
            )
        names.add(t.name)
        if t.api_key_env and t.api_key_env not in os.environ:
            raise ConfigError(
                f"environment variable {t.api_key_env} is not set; export it before the run",
                path=where, field=f"targets.{i}.api_key_env",
            )
    targets = [replace(t, base_url=t.base_url.rstrip("/")) for t in config.targets]
    return replace(config, targets=targets)


def target_from_settings(settings: dict[str, Any]) -> Target:
    """Rebuild a target from :meth:`Target.settings` (a stored run, for ``--resume``).
    A settings dict that does not describe a target raises ``ValueError``."""
    return TypeAdapter(Target).validate_python(settings)


def tool_choice_field(setting: str) -> str | dict[str, Any]:
    """The request's ``tool_choice`` for a target's setting: a mode as is, a function name
    as the named form every OpenAI-compatible server takes."""
    if setting in TOOL_CHOICE_MODES:
        return setting
    return {"type": "function", "function": {"name": setting}}


def load_targets(path: str | Path) -> list[Target]:
    """The targets of a targets file; see :func:`load_run_config`."""
    return load_run_config(path).targets


def _refuse_literal_keys(raw: Any, where: str, loc: str) -> None:
    if isinstance(raw, dict):
        for key, value in raw.items():
            here = f"{loc}.{key}" if loc else str(key)
            if str(key).lower() in _LITERAL_KEYS:
                raise ConfigError(
                    "API keys are never written in a config file; put the key in an "
                    "environment variable and name it with `api_key_env: VAR`",
                    path=where, field=here,
                )
            _refuse_literal_keys(value, where, here)
    elif isinstance(raw, list):
        for i, item in enumerate(raw):
            _refuse_literal_keys(item, where, f"{loc}.{i}")
