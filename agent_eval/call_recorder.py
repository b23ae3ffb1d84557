"""The call recorder: one tool call, judged by the policy engine, into the record stored.

Every path that stores tool calls builds each :class:`CallRecord` here: a live run and
``replay`` (``live/``), the proxy (``proxy/sessions.py``), imports and ``rescore``
(``importers/``).  So the same call (its tool name, its arguments and the tools offered
with it) gets the same verdict, findings, script, stored command and denial text whatever
path brought it in; ``tests/test_call_recorder.py`` plays the same calls through all five.

What is allowed is decided by ``policy.check_call`` alone (which tools exist, which
arguments a tool takes, what a command may be); the recorder applies its verdict.  It
only chooses what the engine is shown.  A live run's calls (and a replay of them) come
from the harness itself, whose tools are the allow-list's: they go to the engine exactly
as emitted, so a model calling ``Bash`` where the scenario offers ``bash`` is AE101 and
``read {"file": ...}`` where ``path`` is declared is AE103.  Calls relayed by the proxy or
imported come from another harness (``foreign``), an agent CLI whose tools are named and
spelt its own way, so they are read the way the CLI meant them:

- a tool the allow-list lists is judged as that tool, with its raw arguments when they
  carry the tool's argument, else with the command or path found under the CLI's key
  (``command``/``cmd``, ``path``/``file_path``/``filePath``...) renamed to the tool's,
  only onto a free name, every other key kept: OpenCode's ``read {filePath}`` is a read
  of that path;
- a tool it does not list whose name is a known shell or read tool of an agent CLI or
  harness (:data:`BASH_TOOLS`, :data:`READ_TOOLS`: ``Bash``, ``run_shell_command``,
  ``Read``, ``read_file`` ...) and that was offered with the call (or nothing says what
  was offered: an import), is judged the same way as the allow-list's own tool of that
  kind, so a night of Claude Code traffic is judged like a night of OpenCode's;
- anything else goes to the engine as it is: a tool nobody offered is AE101 there.

JSON arguments are always read as the engine reads their raw text (``policy.calls.
decode_arguments``: the length cap before any parsing, a key given twice refused even
through a ``\\u`` escape), so nothing is judged on a value the engine would not see, and
an importer's own reading of a call (``kind``, ``text``) counts only for a call its
format does not write as a JSON object (a trajectory step's command text): the same
call gets the same verdict from the proxy, every importer, ``rescore`` and ``replay``
(``tests/test_call_paths_differential.py``).

Under an agent CLI's own rules (``policy``: a ``ResolvedPolicy`` with an agent, from
``policy.sources``) every call is judged twice, by that CLI's matcher emulated and by the
strict reading of the same rules; the stored verdict is the CLI's (what the model was
actually refused) and ``leak`` names the strict class of a call the CLI let through that
the strict reading refuses (docs/policies.md).  A tool nobody offered with the call is
still judged by the engine (AE101) and never a leak.

The stored ``command`` is the command or path the engine judged (None for other tools).
A denied call's ``output`` is the allow-list's denial text unless the source recorded
what the tool answered (imports).  Only the recorder makes calls with a verdict: a call
that was never judged (a reply cut off before it completed) is not stored as a call.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from agent_eval.policy import AllowList, Verdict, check_call, command_text, render_denial
from agent_eval.policy.allowlist import ToolSpec
from agent_eval.policy.calls import decode_arguments, tool_for_call, with_schema
from agent_eval.policy.profiles import ARGV_SHELL_TOOLS, BASH_TOOLS, BUILTIN_TOOLS, READ_TOOLS
from agent_eval.policy.schemas import broken_schema, canonical, offered_schemas
from agent_eval.policy.sources import (
    AgentPolicy,
    ResolvedPolicy,
    Setting,
    choose_agent,
    judge_call,
    judge_command,
    judge_read,
    recorded_verdict,
)
from agent_eval.policy.sources.choose import Choice
from agent_eval.policy.stack import check_tools
from agent_eval.transcript import CallRecord, Decision, FindingRecord, StackFaultRecord

ToolKind = Literal["bash", "read", "other"]

COMMAND_KEYS = ("command", "cmd")
PATH_KEYS = ("path", "file_path", "filePath", "file")

TEXT_CALL_TOOL = "(reply text)"  # tool name recorded for tool-call markup left in the text
TEXT_CALL_MESSAGE = (
    "tool call written as text that no tool-call parser extracted: counted against the "
    "model/server setup (start the server with its tool-call parser, e.g. vLLM "
    "--enable-auto-tool-choice --tool-call-parser, llama-server --jinja; docs/servers.md)")

VERDICT_CACHE = 50_000
"""Verdicts kept for reuse per recorder; emptied when full, so memory stays flat."""


def kind_of_tool(tool: str) -> ToolKind:
    """Whether a tool name runs a shell command, reads a file, or is something else."""
    if tool in BASH_TOOLS and tool not in ARGV_SHELL_TOOLS:
        return "bash"
    return "read" if tool in READ_TOOLS else "other"


def classify_call(tool: str, arguments: Any) -> tuple[ToolKind, str | None]:
    """The kind of a tool call and its command or path, when the arguments carry one.

    ``arguments`` is the parsed argument object (or anything else when it did not parse).
    A bash or read call whose arguments lack the command/path gets ``text=None``.
    """
    kind = kind_of_tool(tool)
    if kind == "other":
        return "other", None
    return kind, _first_str(arguments, COMMAND_KEYS if kind == "bash" else PATH_KEYS)


def _first_str(arguments: Any, keys: tuple[str, ...]) -> str | None:
    if not isinstance(arguments, dict):
        return None
    for key in keys:
        value = arguments.get(key)
        if isinstance(value, str):
            return value
    return None


def _argument(spec: Any) -> str:
    return spec.judged_key or ("command" if spec.kind == "bash" else "path")


_NOT_JSON = object()
"""What :func:`_decoded` returns for arguments that are no JSON object text at all (a
trajectory's command text): an importer's reading of them is used."""


def _decoded(arguments: str | dict[str, Any], allowlist: AllowList) -> Any:
    """The arguments as the engine reads them: their object, None when the engine refuses
    the text (the length cap applies before any parsing; a key given twice, too deep
    ...), or :data:`_NOT_JSON` for text that is not even meant as an object (no
    exception raised per imported trajectory step)."""
    if isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str) or not arguments.lstrip().startswith("{"):
        return _NOT_JSON
    return decode_arguments(arguments, allowlist)


@dataclass(frozen=True, slots=True)
class Judged:
    """A call as the engine saw it (``tool``, ``arguments``) and its verdict; ``command``
    is the command or path judged, None for other tools; ``leak`` the strict class of a
    call an agent CLI's rules let through that their strict reading refuses."""

    tool: str
    arguments: str | dict[str, Any]
    verdict: Verdict
    command: str | None
    leak: str | None = None


class CallRecorder:
    """Judges calls under one allow-list and builds their records; see the module
    docstring.  ``foreign``: the calls come from another harness (the proxy, imports),
    whose tools may be named and spelt otherwise than the allow-list's; without it (a
    live run, a replay of one) every call goes to the engine exactly as emitted.
    ``check_call`` is pure, so the verdict of a call seen before is reused: a night of
    traffic or a big import repeats the same calls."""

    def __init__(self, allowlist: AllowList, *, foreign: bool = False,
                 policy: ResolvedPolicy | None = None) -> None:
        self.allowlist = allowlist
        self.foreign = foreign
        self.policy = policy if policy is not None and policy.agent is not None else None
        self._by_kind = {kind: next((t for t in allowlist.tools if t.kind == kind), None)
                         for kind in ("bash", "read")}
        self._cache: dict[tuple[Any, ...], Judged] = {}

    def judge(self, tool: str, arguments: str | dict[str, Any], *,
              offered: Sequence[str] | None = None, kind: ToolKind | None = None,
              text: str | None = None, schema: str | None = None) -> Judged:
        """The call judged.  ``offered``: the tool names offered with it (None: unknown,
        the allow-list's).  ``kind`` and ``text``: an importer's reading of a call its
        format does not write as JSON arguments (the command of a trajectory step).
        ``schema``: the JSON text of the argument schema the client offered for this
        tool; the call's own arguments, as emitted, are checked against it too
        (``policy.calls.with_schema``), whatever the allow-list says of the tool."""
        frozen = arguments if isinstance(arguments, str) else tuple(arguments.items())
        key = (tool, frozen, None if offered is None else tuple(offered), kind, text, schema)
        judged = self._cache.get(key)
        if judged is None:
            judged = self._judge(tool, arguments, offered, kind, text)
            if schema is not None:
                judged = replace(judged, verdict=with_schema(
                    judged.verdict, arguments, schema, self.allowlist))
            if len(self._cache) >= VERDICT_CACHE:
                self._cache.clear()
            self._cache[key] = judged
        return judged

    def _judge(self, tool: str, arguments: str | dict[str, Any], offered: Sequence[str] | None,
               kind: ToolKind | None, text: str | None) -> Judged:
        decoded = _decoded(arguments, self.allowlist)
        if decoded is not _NOT_JSON:
            # JSON arguments are judged as the engine reads their raw text, whatever an
            # importer made of them: its reading of the command is for a trajectory's text
            kind, text = None, None
        parsed = decoded if isinstance(decoded, dict) else None
        policy = self.policy  # set only with an agent's rules (``__init__``)
        if policy is not None and policy.agent is not None and (offered is None
                                                                  or tool in offered):
            return self._dual(policy.agent, policy.setting, tool, arguments, parsed, kind, text)
        if not self.foreign or (offered is not None and tool not in offered):
            spec = None  # the harness's own call, or a tool the session never had: as emitted
        elif tool in self.allowlist.profile_tools and text is None:
            # an agent CLI's own tool, declared key by key by its profile
            verdict = check_call(tool, arguments, self.allowlist, offered=offered, profiles=True)
            spec = tool_for_call(self.allowlist, tool, parsed, profiles=True)
            return Judged(tool, arguments, verdict,
                          command_text(spec, parsed) if spec is not None else None)
        elif tool in BUILTIN_TOOLS:  # its profile switched off: AE101
            spec = None  # a CLI's tool whose profile this allow-list switched off: AE101
        else:
            listed = self.allowlist.tool(tool)
            spec = listed if listed is not None and listed.kind != "other" else None
            if listed is None:
                if kind is None:
                    kind = kind_of_tool(tool)
                spec = self._by_kind.get(kind) if kind != "other" else None
            if spec is not None and decoded is not _NOT_JSON:
                return self._renamed(tool, arguments, decoded, spec, offered)
            if spec is not None and offered is not None:
                offered = [*offered, spec.name]
        if spec is None:
            verdict = check_call(tool, arguments, self.allowlist, offered=offered)
            return Judged(tool, arguments, verdict, self._command(tool, arguments))
        # a trajectory's step: its command text, as the importer read it
        argument = _argument(spec)
        shown: str | dict[str, Any] = arguments if text is None else {argument: text}
        verdict = check_call(spec.name, shown, self.allowlist, offered=offered)
        return Judged(spec.name, shown, verdict, text)

    def _dual(self, agent: AgentPolicy, setting: Setting, tool: str,
              arguments: str | dict[str, Any], parsed: Any, kind: ToolKind | None,
              text: str | None) -> Judged:
        """A call judged under an agent CLI's rules: the harness's verdict stored, the
        strict one's class kept as the leak.  A shell or read tool of any harness is
        judged as a command or path; the agent's own tool list still applies."""
        if kind is None:
            kind, text = classify_call(tool, parsed)
        restricted = agent.tools is not None and tool not in agent.tools
        if kind == "bash" and isinstance(text, str) and not restricted:
            dual = judge_command(agent, text, setting)
        elif kind == "read" and isinstance(text, str) and not restricted:
            dual = judge_read(agent, text, setting)
        else:
            dual = judge_call(agent, tool, arguments, setting)
        command = text if kind in ("bash", "read") and isinstance(text, str) else None
        profiled = self.allowlist.profile_tools.get(tool) or BUILTIN_TOOLS.get(tool)
        if command is None and profiled is not None and profiled.kind != "other":
            command = command_text(profiled, parsed)  # ``exec_command {cmd}``'s command
        if command is None and dual.kind in ("bash", "read"):
            command = dual.text  # what the CLI's own rules judged
        return Judged(tool, arguments, recorded_verdict(dual), command, dual.leak_class)

    def _renamed(self, tool: str, arguments: str | dict[str, Any], decoded: Any,
                 spec: ToolSpec, offered: Sequence[str] | None) -> Judged:
        """A shell or read tool judged as the allow-list's tool ``spec`` of its kind (a
        tool of another harness that no profile declares, ``Shell``, ``view`` ...; or the
        allow-list's own tool spelt with another harness's key).  Arguments the engine
        refuses as text (a key given twice, even through a ``\\u`` escape; over the length
        cap; nested too deep) are judged as that text.  Else the command or path key is
        renamed to ``spec``'s, only when that name is free, and every other key is kept,
        so an undeclared one is denied (AE105) rather than dropped: nothing the harness
        may act on is left unjudged."""
        offered = None if offered is None else [*offered, spec.name]
        argument = _argument(spec)
        if not isinstance(decoded, dict) or isinstance(decoded.get(argument), str):
            verdict = check_call(spec.name, arguments, self.allowlist, offered=offered)
            carried = decoded.get(argument) if isinstance(decoded, dict) else None
            return Judged(spec.name, arguments, verdict,
                          carried if isinstance(carried, str) else None)
        keys = COMMAND_KEYS if spec.kind == "bash" else PATH_KEYS
        found = next((k for k in keys if isinstance(decoded.get(k), str)), None)
        shown = decoded
        if found is not None and argument not in decoded:
            shown = {argument if k == found else k: v for k, v in decoded.items()}
        verdict = check_call(spec.name, shown, self.allowlist, offered=offered)
        carried = shown.get(argument)
        return Judged(spec.name, shown, verdict, carried if isinstance(carried, str) else None)

    def _command(self, tool: str, arguments: str | dict[str, Any]) -> str | None:
        """The command (bash) or path (read) a listed tool's arguments carry."""
        spec = self.allowlist.tool(tool)
        if spec is None or spec.kind == "other":
            return None
        parsed = _decoded(arguments, self.allowlist)
        value = parsed.get(_argument(spec)) if isinstance(parsed, dict) else None
        return value if isinstance(value, str) else None

    def record(self, index: int, turn_index: int, tool: str, arguments: str, *,
               offered: Sequence[str] | None = None, call_id: str | None = None,
               output: str | None = None, kind: ToolKind | None = None,
               text: str | None = None, source_decision: Decision | None = None,
               source_reason: str | None = None, schema: str | None = None
               ) -> tuple[CallRecord, Verdict]:
        """One call judged into its record (which keeps the tool name and the raw
        arguments as emitted).  ``output`` is what the tool answered when the source
        recorded it; without it a denied call's output is the allow-list's denial text.
        ``schema``: the offered schema's JSON text (:meth:`judge`)."""
        judged = self.judge(tool, arguments, offered=offered, kind=kind, text=text,
                            schema=schema)
        verdict = judged.verdict
        if output is None:
            output = "" if verdict.allowed else render_denial(verdict, self.allowlist)
        invocation = verdict.invocation
        return CallRecord(
            index=index, turn_index=turn_index, tool=tool, arguments=arguments,
            decision=verdict.decision, primary=verdict.primary, call_id=call_id,
            findings=[FindingRecord(f.code, f.message, f.start, f.end) for f in verdict.findings],
            command=judged.command, output=output,
            script=invocation.script if invocation is not None else None,
            source_decision=source_decision, source_reason=source_reason, leak=judged.leak,
        ), verdict


@dataclass(frozen=True, slots=True)
class SessionJudge:
    """The recorder that judges one session's calls, and whose rules those are: the
    agent's name and how it was chosen (``policy.sources.Via``), None under an
    agent-eval allow-list.  ``stamp`` writes them on the session's record."""

    calls: CallRecorder
    agent: str | None = None
    via: str | None = None
    emulation: str | None = None  # the CLI release and mode emulated (policy.sources)

    def stamp(self, record: Any) -> None:
        record.policy_agent, record.policy_agent_via = self.agent, self.via
        record.policy_emulation = self.emulation


class SessionJudges:
    """One :class:`CallRecorder` per agent of a policy, picked per session.

    Under an agent-eval allow-list every session gets the same recorder.  Under an agent
    CLI's configuration a session is judged by the agent named for it (a client's header,
    a scenario's ``agent:``), else the agent whose own prompt its system prompt holds,
    else the configuration's default agent (``policy.sources.choose_agent``); an agent
    fixed by the operator (``--agent``) or by a scenario judges every session."""

    def __init__(self, policy: ResolvedPolicy | AllowList, *, foreign: bool = False) -> None:
        if isinstance(policy, AllowList):
            policy = ResolvedPolicy("", policy)
        self.policy = policy
        self.foreign = foreign
        self._by_agent: dict[tuple[str | None, Setting], CallRecorder] = {}

    @property
    def allowlist(self) -> AllowList:
        return self.policy.allowlist

    def _recorder(self, policy: ResolvedPolicy) -> CallRecorder:
        key = (policy.agent_name, policy.setting)
        if key not in self._by_agent:
            self._by_agent[key] = CallRecorder(policy.allowlist, foreign=self.foreign,
                                               policy=policy)
        return self._by_agent[key]

    def for_session(self, *, named: str | None = None, system_prompt: str | None = None,
                    named_via: str = "header", workdir: str | None = None,
                    client: tuple[str, str] | None = None, mode: str | None = None
                    ) -> SessionJudge:
        """The judge of one session; ``named``: the agent its client or scenario names
        (``named_via`` says which); ``workdir``: the folder the CLI ran in, when its file
        says, against which its own rules read paths (default: the policy's setting);
        ``client``: the ``(harness, version)`` its client or file names and ``mode`` the
        mode its file says, emulated unless the operator fixed them (``--cli-version``,
        ``--mode``)."""
        policy = self.policy
        if policy.source is None:
            return SessionJudge(self._recorder(policy))
        if policy.via in ("option", "scenario"):  # fixed by the operator or the scenario
            choice = Choice(policy.agent, policy.via) if policy.agent is not None else None
        else:
            choice = choose_agent(policy.source, named=named, system_prompt=system_prompt)
        if choice is None:
            return SessionJudge(self._recorder(policy), policy.agent_name, policy.via)
        if workdir and workdir != policy.setting.workdir:
            policy = replace(policy, setting=replace(policy.setting, workdir=workdir))
        setting = policy.setting
        if client is not None and client[0] == choice.agent.harness and setting.version is None:
            setting = replace(setting, version=client[1])
        if mode is not None and setting.mode is None and choice.agent.harness != "opencode":
            setting = replace(setting, mode=mode)
        policy = replace(policy, setting=setting)
        key = (choice.agent.name, policy.setting)
        recorder = self._by_agent.get(key) or self._recorder(policy.for_agent(choice))
        via = named_via if choice.via == "header" else choice.via
        return SessionJudge(recorder, choice.agent.name, via,
                            policy.setting.emulation(choice.agent).describe())


def text_call(index: int, turn_index: int, content: str, span: tuple[int, int],
              output: str = "") -> CallRecord:
    """Tool-call markup the server did not parse (AE104): counted as one erroneous call,
    the reply's text its command and the markup's span its finding."""
    start, end = span
    return CallRecord(
        index=index, turn_index=turn_index, tool=TEXT_CALL_TOOL, arguments="",
        decision="deny", primary="AE104", command=content,
        findings=[FindingRecord("AE104", TEXT_CALL_MESSAGE, start, end)], output=output,
    )


def offered_tool_schemas(tools: Any) -> dict[str, str | None]:
    """Each offered tool's argument schema as canonical JSON text (None: offered without
    one, or with one that cannot be an argument schema, the client's fault reported as
    AE512 apart), keyed by name: what :meth:`CallRecorder.record` checks a call against."""
    out: dict[str, str | None] = {}
    for name, schema in offered_schemas(tools).items():
        good = schema is not None and broken_schema(schema) is None
        # interned: the recorder's verdict cache keys on it, and every turn of a session
        # offers the same schemas again; one copy each, however many calls are cached
        out[name] = sys.intern(canonical(schema)) if good else None
    return out


@dataclass(slots=True)
class OfferedTools:
    """The tools one session's client offered, gathered turn by turn (proxy, imports,
    ``collect``): ``tools`` maps each name to the schema last offered for it, stored with
    the session (``SessionRecord.offered_tools``); ``faults`` holds one
    ``broken-tool-schema`` stack fault (AE512) per broken schema, the client's fault."""

    tools: dict[str, Any] = field(default_factory=dict)
    faults: list[StackFaultRecord] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def add(self, tools: Any, turn_index: int) -> dict[str, str | None]:
        """Note one turn's offered ``tools``; the schemas its calls are judged against
        (:func:`offered_tool_schemas`)."""
        schemas = offered_schemas(tools)
        if not schemas:
            return {}
        self.tools.update(schemas)
        for fault in check_tools(tools):
            if fault.message not in self._seen:  # once per tool and reason a session
                self._seen.add(fault.message)
                self.faults.append(StackFaultRecord(turn_index, fault.code, fault.message,
                                                    fault.raw, fault.ends))
        return offered_tool_schemas(tools)

    def stamp(self, record: Any) -> None:
        """Write the offered list and the broken-schema faults on a session's record."""
        if self.tools:
            record.offered_tools = dict(self.tools)
        record.stack_faults = [*record.stack_faults, *self.faults]


def offered_tools(request: dict[str, Any] | None) -> list[str] | None:
    """The tool names a chat request offered; None when it sent no tools (or no request
    is known), which the engine reads as the allow-list's tools."""
    tools = request.get("tools") if isinstance(request, dict) else None
    if not isinstance(tools, list) or not tools:
        return None
    names = []
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.append(fn["name"])
    return names
