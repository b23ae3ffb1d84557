"""Judge a whole tool call: its tool name, the JSON of its arguments, every key in it.

How a call is judged (each step fails closed; the first step that denies decides):

1. **Tool** (``unknown-tool``): the allow-list must list the tool, and the session must
   offer it.  A tool that the client's request offers but the allow-list does not list
   is never allowed: nothing says which key of it runs what.  A call from an agent CLI
   (``profiles=True``: relayed by the proxy, imported) is first looked up in the
   allow-list's active tool profiles (``policy/profiles.py``), which declare the CLI's
   own tools (``Bash``, ``exec_command``, ``read_file`` ...).
2. **JSON** (``invalid-bytes``, ``malformed-arguments``): argument text longer than
   :func:`arguments_cap` characters is refused before it is parsed.  The text must be one
   JSON object; it may not give a key twice, nor two keys that another JSON parser
   would read as one (the same name in another case, as Go's ``encoding/json`` matches
   field names; a name cut at a NUL, as C parsers such as cJSON read it), nor nest
   deeper than :data:`MAX_DEPTH` levels, nor use ``NaN``/``Infinity`` (not JSON), a
   number too large for a double, or an integer other parsers round (beyond ±(2^53 - 1),
   RFC 7493).  Bytes must be UTF-8.
3. **Characters** (``invalid-bytes``): every key and every string at any depth is
   checked by ``characters.find_hidden`` (keys allow no control at all, strings TAB and
   LF).
4. **Keys** (``undeclared-argument``, ``missing-argument``): every key must be declared
   by the tool spec; a required one must be there; a ``value`` must have its declared
   type and choice; an ``absent`` switch may only be missing, null, false or one of its
   harmless choices, else it is denied as its ``denial`` class (``sandbox-escalation``,
   ``background-run``).
5. **Command and paths**: the ``command`` key is judged by ``check_command`` (an
   ``argv`` list as the script of ``bash -c SCRIPT``, else as its words, see
   :func:`command_text`), each ``path`` key by ``check_read``, each ``workdir`` key by
   ``reads.judge_workdir`` (the project root, or a directory the allow-list's
   ``workdirs`` lists for the tool; a readable folder is not enough).  Findings about keys other than the command or the
   read path carry the span ``0, 0``.

Nothing here raises: an unexpected exception is a ``malformed-arguments`` denial.
"""

from __future__ import annotations

import json
import math
import shlex
from typing import Any, TypeGuard

from agent_eval.policy.allowlist import AllowList, ArgumentSpec, ToolSpec, accepts_type
from agent_eval.policy.arguments import Problem
from agent_eval.policy.characters import COMMAND_WHITESPACE, describe, find_hidden
from agent_eval.policy.engine import check_command, check_read, check_text, verdict_of
from agent_eval.policy.reads import judge_workdir
from agent_eval.policy.rules import code_for
from agent_eval.policy.schemas import schema_problems
from agent_eval.policy.verdict import Finding, Verdict

MAX_DEPTH = 16
"""Deepest nesting of objects and arrays in the arguments (the top object is level 1).
No declared key holds a nested value, so deeper text can only be an attack on a parser."""

MAX_SAFE_INT = 2**53 - 1
"""Integers beyond this (I-JSON, RFC 7493) are read as a rounded double by many parsers."""

MAX_LISTED_KEYS = 20
"""At most this many undeclared keys are reported one by one (the call is denied anyway)."""


def arguments_cap(allowlist: AllowList) -> int:
    """Longest argument text judged: room for a command of ``strict.max_length``
    characters with every one written as a JSON ``\\uXXXX`` escape, plus 4,096 for the
    other keys.  Longer text is refused before it is parsed."""
    return 6 * allowlist.strict.max_length + 4096


class _Refused(ValueError):
    """The JSON text parses, but not to one reading every parser shares."""


def _alias(key: str) -> str:
    """The name another JSON parser may read for ``key``: cut at a NUL (C strings), in
    any case (Go's ``encoding/json`` matches field names case-insensitively, with Unicode
    folding: the Kelvin sign is a ``k`` to it)."""
    return key.split("\x00", 1)[0].casefold()


class DuplicateKey(ValueError):
    """A JSON object names one key twice; ``args[0]`` is the key.  Parsers disagree on
    which value wins, so every JSON input agent-eval judges or reads refuses it."""


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for ``json.loads`` that raises ``DuplicateKey``."""
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise DuplicateKey(key)
        obj[key] = value
    return obj


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    try:
        return unique_object(pairs)
    except DuplicateKey as dup:
        raise _Refused(f"duplicate key {dup.args[0]!r} in the arguments; which one would "
                       "run is ambiguous") from None


def _not_json(name: str) -> Any:
    raise _Refused(f"{name} is not JSON")


def _decode(arguments: Any, allowlist: AllowList) -> dict[str, Any] | Problem:
    """The argument object, or the problem with its text."""
    if isinstance(arguments, (bytes, bytearray)):
        try:
            arguments = bytes(arguments).decode("utf-8")
        except UnicodeDecodeError:
            return Problem("invalid-bytes", "the arguments are not UTF-8", 0, 0)
    if isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str):
        return Problem("malformed-arguments", "the arguments are not a JSON object", 0, 0)
    cap = arguments_cap(allowlist)
    if len(arguments) > cap:
        return Problem("invalid-bytes", f"arguments longer than the cap of {cap} characters "
                       f"({len(arguments)})", 0, 0)
    try:
        args = json.loads(arguments, object_pairs_hook=_object, parse_constant=_not_json)
    except _Refused as why:
        return Problem("malformed-arguments", str(why), 0, 0)
    except RecursionError:
        return Problem("malformed-arguments", f"the arguments nest deeper than {MAX_DEPTH} "
                       "levels", 0, 0)
    except ValueError:
        args = None
    if not isinstance(args, dict):
        return Problem("malformed-arguments", "the arguments are not a JSON object", 0, 0)
    return args


def decode_arguments(arguments: str | bytes | dict[str, Any],
                     allowlist: AllowList) -> dict[str, Any] | None:
    """The argument object exactly as :func:`check_call` reads it (the length cap before
    any parsing, one JSON object, no key given twice even through a ``\\u`` escape), or
    None when it refuses the text.  For a caller that must look inside a call before the
    engine judges it (the call recorder): it sees what the engine sees, never a value
    another reading of the text would pick.  Never raises."""
    try:
        args = _decode(arguments, allowlist)
    except Exception:  # refused, as check_call refuses it
        return None
    return args if isinstance(args, dict) else None


def _walk(args: dict[str, Any], skip: set[str]) -> Problem | None:
    """The first nesting, key or string problem anywhere in ``args`` (one pass, no
    recursion); the top-level values named in ``skip`` are judged elsewhere."""
    stack: list[tuple[Any, int, str]] = [(args, 1, "")]
    while stack:
        node, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            return Problem("malformed-arguments", f"the arguments nest deeper than "
                           f"{MAX_DEPTH} levels", 0, 0)
        if isinstance(node, dict):
            aliases: dict[str, str] = {}
            for key, value in node.items():
                if not isinstance(key, str):
                    return Problem("malformed-arguments", f"key {key!r} is not a string", 0, 0)
                alias = _alias(key)
                if alias in aliases:
                    return Problem("malformed-arguments", f"keys {aliases[alias]!r} and {key!r} "
                                   "are one key to some JSON parsers (case, or a NUL in the "
                                   "name); which one would run is ambiguous", 0, 0)
                aliases[alias] = key
                hidden = find_hidden(key)
                if hidden is not None:
                    return Problem("invalid-bytes", f"{hidden[1]} {describe(key, hidden[0])} "
                                   f"in the key {key!r}", 0, 0)
                if depth == 1 and key in skip:
                    continue
                stack.append((value, depth + 1, f"{where}{key}."))
        elif isinstance(node, list):
            stack.extend((value, depth + 1, where) for value in node)
        elif isinstance(node, str):
            hidden = find_hidden(node, COMMAND_WHITESPACE)
            if hidden is not None:
                return Problem("invalid-bytes", f"{hidden[1]} {describe(node, hidden[0])} in "
                               f"the value of {where.rstrip('.') or 'a list'!r}", 0, 0)
        elif isinstance(node, float) and not math.isfinite(node):
            return Problem("malformed-arguments", f"{node} is not a JSON number (a number too "
                           "large for a double reads as infinity)", 0, 0)
        elif isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_SAFE_INT:
            return Problem("malformed-arguments", f"integer {node} is outside ±(2^53 - 1): "
                           "other JSON parsers read it as another number", 0, 0)
    return None


def _declared_keys(args: dict[str, Any], spec: ToolSpec) -> list[Problem]:
    """Undeclared keys, missing required ones, and values the spec does not accept."""
    problems: list[Problem] = []
    undeclared = [key for key in args if key not in spec.arguments]
    for key in undeclared[:MAX_LISTED_KEYS]:
        problems.append(Problem("undeclared-argument", f"{spec.name} declares no argument "
                                f"{key!r} (declared: {', '.join(spec.arguments) or 'none'})",
                                0, 0))
    if len(undeclared) > MAX_LISTED_KEYS:
        problems.append(Problem("undeclared-argument", f"and {len(undeclared) - MAX_LISTED_KEYS}"
                                " more undeclared arguments", 0, 0))
    for key, arg in spec.arguments.items():
        problem = _judge_value(key, arg, args)
        if problem is not None:
            problems.append(problem)
    return problems


def _judge_value(key: str, arg: ArgumentSpec, args: dict[str, Any]) -> Problem | None:
    if key not in args or (args[key] is None and not arg.required):
        if arg.required:
            return Problem("missing-argument", f"required argument {key!r} is missing", 0, 0)
        return None
    value = args[key]
    if arg.holds == "absent":
        if value is False or _is_choice(value, arg.choices):
            return None
        harmless = "".join(f" or {json.dumps(c)}" for c in arg.choices or ())
        return Problem(arg.denial, f"argument {key!r} must be absent or false{harmless}, "
                       f"got {json.dumps(value)[:40]}", 0, 0)
    if arg.holds == "argv":
        if not _is_argv(value):
            return Problem("missing-argument", f"argument {key!r} is not a list of words", 0, 0)
        return None
    want = arg.type if arg.holds == "value" else "string"
    if not accepts_type(value, want):
        return Problem("missing-argument", f"argument {key!r} is not a {want}", 0, 0)
    if arg.choices is not None and not _is_choice(value, arg.choices):
        return Problem("missing-argument", f"argument {key!r} is not one of "
                       f"{', '.join(json.dumps(c) for c in arg.choices)}", 0, 0)
    return None


def _is_choice(value: Any, choices: list[Any] | None) -> bool:
    return any(value == c and type(value) is type(c) for c in choices or ())


def _is_argv(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and bool(value) and all(isinstance(w, str) for w in value)


SCRIPT_SHELLS = frozenset({"bash", "/bin/bash", "/usr/bin/bash", "sh", "/bin/sh", "/usr/bin/sh"})
"""``argv[0]`` of an argv command whose script is judged as bash (``sh`` runs a subset)."""
SCRIPT_FLAGS = frozenset({"-c", "-lc", "-cl"})


def command_text(spec: ToolSpec, args: Any) -> str | None:
    """The command (bash tool) or path (read tool) a call's arguments carry, as judged and
    stored: an ``argv`` list ``[bash, -lc, SCRIPT]`` is SCRIPT, any other list is its
    words quoted for bash (``shlex.join``); None when the key is missing or malformed."""
    key = spec.judged_key
    if key is None or not isinstance(args, dict):
        return None
    value = args.get(key)
    if spec.arguments[key].holds == "argv":
        if not _is_argv(value):
            return None
        if len(value) == 3 and value[0] in SCRIPT_SHELLS and value[1] in SCRIPT_FLAGS:
            return str(value[2])
        return shlex.join(value)
    return value if isinstance(value, str) else None


def _judge_paths(args: dict[str, Any], spec: ToolSpec, allowlist: AllowList,
                 judged: str | None) -> tuple[list[Finding], Verdict | None]:
    """Problems of the ``path`` keys other than the tool's own read path (spans 0, 0),
    and the verdict of that read path."""
    findings: list[Finding] = []
    own: Verdict | None = None
    for key, arg in spec.arguments.items():
        value = args.get(key)
        if arg.holds == "workdir" and isinstance(value, str):
            problem = check_text(value, allowlist.strict.max_length, "") or judge_workdir(
                value, allowlist.workdirs.get(spec.name, []), allowlist.project_root)
            if problem is not None:
                findings.append(Finding(code_for(problem.rule), f"{key}: {problem.message}"))
            continue
        if arg.holds != "path" or not isinstance(value, str):
            continue
        verdict = check_read(value, allowlist)
        if key == judged:
            own = verdict
            continue
        findings += [Finding(f.code, f"{key}: {f.message}") for f in verdict.findings]
    return findings, own


def tool_for_call(allowlist: AllowList, tool_name: str, arguments: Any, *,
                  profiles: bool = False) -> ToolSpec | None:
    """The spec a call is judged by.  Without ``profiles``: the allow-list's tool of that
    name.  With it (a call from an agent CLI), where both the allow-list and a profile
    have a tool of that name (OpenCode's ``read {filePath}`` beside the harness's ``read
    {path}``), the one that declares every key the call carries, the allow-list's first;
    when neither does, the allow-list's (whose denial names the stray keys)."""
    own = allowlist.tool(tool_name)
    profiled = allowlist.profile_tools.get(tool_name) if profiles else None
    if own is None or profiled is None:
        return own or profiled
    return _fitting(own, profiled, _decode(arguments, allowlist))


def _fitting(own: ToolSpec, profiled: ToolSpec, args: dict[str, Any] | Problem) -> ToolSpec:
    """Of two specs of one name, the one that declares every key of ``args``, the
    allow-list's first; the allow-list's when neither does or the text is no object."""
    keys = set(args) if isinstance(args, dict) else set()
    for spec in (own, profiled):
        if keys <= set(spec.arguments):
            return spec
    return own


def check_call(tool_name: str, arguments: str | bytes | dict[str, Any], allowlist: AllowList,
               offered: Any = None, *, profiles: bool = False, schema: Any = None) -> Verdict:
    """Judge one tool call (see the module docstring for the steps).

    ``arguments`` is the raw JSON text exactly as emitted (or an already-decoded dict).
    ``offered`` are the tool names offered in this session (default: every tool of the
    allow-list); only a tool that is both listed and offered can be allowed.
    ``profiles``: the call comes from an agent CLI, whose tools are looked up in the
    allow-list's active profiles first.  ``schema``: the JSON schema the client offered
    for this tool; the arguments are checked against it too (:func:`with_schema`).
    """
    verdict = _check_call(tool_name, arguments, allowlist, offered, profiles=profiles)
    return with_schema(verdict, arguments, schema, allowlist)


def with_schema(verdict: Verdict, arguments: str | bytes | dict[str, Any], schema: Any,
                allowlist: AllowList) -> Verdict:
    """``verdict`` with a ``schema-mismatch`` finding for each way the arguments break the
    schema the client offered (``policy/schemas.py``), whatever else decided it: a tool the
    allow-list does not list (AE101) still gets its schema's findings, for per-tool and
    per-server reports.  Arguments the engine cannot read, and a broken schema, add none."""
    if schema is None:
        return verdict
    try:
        if isinstance(schema, str):  # the canonical text a recorder keys its cache by
            schema = json.loads(schema)
        args = _decode(arguments, allowlist)
        if isinstance(args, Problem):
            return verdict
        breaks = schema_problems(schema, args)
    except Exception:  # a bug in the schema walk must not cost the verdict
        return verdict
    if not breaks:
        return verdict
    return verdict_of([Problem("schema-mismatch", b, 0, 0) for b in breaks], verdict)


def _check_call(tool_name: str, arguments: str | bytes | dict[str, Any], allowlist: AllowList,
                offered: Any = None, *, profiles: bool = False) -> Verdict:
    try:
        own = allowlist.tool(tool_name) if isinstance(tool_name, str) else None
        profiled = (allowlist.profile_tools.get(tool_name)
                    if profiles and isinstance(tool_name, str) else None)
        args: dict[str, Any] | Problem | None = None
        if own is not None and profiled is not None:  # decoded once, for both steps
            args = _decode(arguments, allowlist)
            spec: ToolSpec | None = _fitting(own, profiled, args)
        else:
            spec = own or profiled
        if spec is None or (offered is not None and tool_name not in set(offered)):
            known = [*allowlist.tools, *(allowlist.profile_tools.values() if profiles else ())]
            listed = sorted({t.name for t in known if offered is None or t.name in set(offered)})
            why = "is not on the allow-list" if spec is None else "is not offered here"
            return verdict_of([Problem("unknown-tool", f"tool {tool_name!r} {why} (allowed "
                                       f"tools: {', '.join(listed) or 'none'})", 0, 0)])
        if args is None:
            args = _decode(arguments, allowlist)
        if isinstance(args, Problem):
            return verdict_of([args])
        judged = spec.judged_key
        problems: list[Problem] = []
        # a command or path is checked for hidden characters where it is judged, with
        # spans; an argv list is not judged as text as it came, so it is walked here
        as_text = judged is not None and spec.arguments[judged].holds != "argv"
        hidden = _walk(args, {judged} if as_text and judged else set())
        if hidden is not None:
            problems.append(hidden)
        problems += _declared_keys(args, spec)
        other_paths, own_path = _judge_paths(args, spec, allowlist, judged)
        inner: Verdict | None = None
        if spec.kind == "bash":
            command = command_text(spec, args)
            if command is not None:
                inner = check_command(command, allowlist)
        elif spec.kind == "read":
            inner = own_path
        if not problems and not other_paths:
            return inner if inner is not None else Verdict("allow")
        return verdict_of(problems, inner, more=other_paths)
    except Exception as exc:  # a bug must never allow, nor crash the run
        return verdict_of([Problem("malformed-arguments",
                                   f"internal error while judging ({type(exc).__name__})",
                                   0, 0)])
