"""The allow-list: the harness policy a model is judged against, as a validated record.

An allow-list file (``allowlists/*.yaml``) says which shell form is allowed (a runner
prefix such as ``uv run`` followed by a listed script and its declared arguments), which
plain programs are allowed (usually none), what the read tool may open, which tools are
offered, the text returned to the model on a denial, and strictness switches for looser
harnesses.  ``agent-eval schema allowlist`` prints its JSON Schema.

Loading is the only I/O here; everything else in ``policy/`` is pure.
"""

from __future__ import annotations

import hashlib
import json
import math
from functools import cached_property
from pathlib import Path
from typing import Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from agent_eval.errors import ConfigError
from agent_eval.policy.wordpatterns import pattern_problem

ValueType = Literal["str", "int", "float", "path", "json"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FlagSpec(_Model):
    """One flag of a script, e.g. ``--agent NAME`` or ``--no-attach``."""

    value: bool = Field(False, description="The flag takes a value (`--agent NAME`).")
    type: ValueType = Field("str", description="Type the value must parse as.")
    choices: list[str] | None = Field(None, description="The only values accepted.")
    required: bool = Field(False, description="The script fails without this flag.")
    repeatable: bool = Field(False, description="The flag may be given more than once.")
    aliases: list[str] = Field(default_factory=list, description="Other spellings, e.g. `-n`.")
    help: str = ""

    @model_validator(mode="after")
    def _choices_fit_the_type(self) -> FlagSpec:
        _check_choices(self.choices, self.type)
        if self.choices and not self.value:
            raise ValueError("`choices` needs `value: true` (a bare flag takes no value)")
        return self


class PositionalSpec(_Model):
    """One positional argument of a script or subcommand."""

    name: str
    required: bool = True
    type: ValueType = "str"
    choices: list[str] | None = None
    variadic: bool = Field(False, description="Takes every remaining positional.")

    @model_validator(mode="after")
    def _choices_fit_the_type(self) -> PositionalSpec:
        _check_choices(self.choices, self.type)
        return self


def _check_choices(choices: list[str] | None, value_type: str) -> None:
    """A choice the type would refuse could never be given: a contradiction in the file."""
    parse = {"int": int, "float": float}.get(value_type)
    for choice in choices or ():
        if parse is None:
            return
        try:
            parse(choice)
        except ValueError:
            raise ValueError(
                f"choice {choice!r} is not {'an int' if value_type == 'int' else 'a float'}; fix the choices or the type"
            ) from None


class CommandSpec(_Model):
    """The arguments a script (or one of its subcommands) accepts."""

    summary: str = ""
    flags: dict[str, FlagSpec] = Field(default_factory=dict)
    positionals: list[PositionalSpec] = Field(default_factory=list)
    subcommands: dict[str, CommandSpec] = Field(
        default_factory=dict, description="`context_cache.py get ...`: name -> spec."
    )

    @field_validator("flags")
    @classmethod
    def _flags_start_with_dash(cls, flags: dict[str, FlagSpec]) -> dict[str, FlagSpec]:
        for name in flags:
            if not name.startswith("-"):
                raise ValueError(f"flag {name!r} must start with '-' (write '--{name}')")
        return flags


class ReadPolicy(_Model):
    """What the read tool may open.  Paths are relative to the harness work directory."""

    roots: list[str] = Field(
        default_factory=list,
        description="Readable roots, e.g. `notes/`; matched exactly (case-sensitive); "
                    "empty = none.",
    )
    blocked: list[str] = Field(
        default_factory=list,
        description="Blocked even inside a root, matched case-insensitively with `\\` as a "
                    "separator too: `notes/private/` blocks that directory and all below; "
                    "a bare name blocks that component at any depth (`secrets/`); a bare "
                    "file name also blocks its dotted variants (`.env` blocks "
                    "`.env.local`).",
    )
    allow_absolute: bool = Field(False, description="Absolute paths may be read at all.")


class CommandPattern(_Model):
    """A command allowed by its words, read strictly (``policy/wordpatterns.py``): a
    program with a fixed prefix followed by plain words, e.g. ``uv run scripts/x.py *``."""

    match: str = Field(description="Words to match; `*` alone is any number of plain "
                                   "words, `*`/`?` inside a word match within that word.")
    unless: list[str] = Field(default_factory=list,
                              description="Patterns excepted: a command matching one of "
                                          "them is not allowed by this entry.")

    @field_validator("match")
    @classmethod
    def _usable_match(cls, value: str) -> str:
        problem = pattern_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("unless")
    @classmethod
    def _usable_unless(cls, values: list[str]) -> list[str]:
        for value in values:
            problem = pattern_problem(value)
            if problem:
                raise ValueError(f"{value!r}: {problem}")
        return values

ArgumentHolds = Literal["command", "argv", "path", "workdir", "value", "absent"]
ArgumentType = Literal["string", "integer", "number", "boolean", "array", "object"]
SwitchDenial = Literal["undeclared-argument", "sandbox-escalation", "background-run"]
_JSON_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
               "array": (list,), "object": (dict,)}


class ArgumentSpec(_Model):
    """One key a tool call may carry, and what it may hold.  A key the tool does not
    declare is a denial (``undeclared-argument``): a harness may act on any key it
    receives (``cwd``, ``env``, ``dangerouslyDisableSandbox``...)."""

    holds: ArgumentHolds = Field(
        "value",
        description="`command`: the bash command, judged as one (a bash tool has exactly "
                    "one key holding `command` or `argv`); `argv`: the command as a list of "
                    "words (Codex's `shell {command: [...]}`: `[\"bash\", \"-lc\", SCRIPT]` "
                    "judges SCRIPT, any other list is judged as those words); `path`: a path "
                    "judged under `read` (a read tool has exactly one; another tool may have "
                    "some); `workdir`: a working directory, allowed only when it names the "
                    "project root (`.`, or `project_root`) or a directory `workdirs` lists "
                    "for the tool; `value`: a plain value of `type` (and "
                    "`choices`), judged for hidden characters only; `absent`: a switch that "
                    "must be absent, null, false or one of `choices` "
                    "(`dangerouslyDisableSandbox`, `run_in_background`), else denied as "
                    "`denial`.",
    )
    type: ArgumentType = Field(
        "string", description="JSON type of a `value` (`command` and `path` are strings)."
    )
    choices: list[bool | int | float | str] | None = Field(
        None, description="The only values a `value` may hold; for `absent`, the harmless "
                          "values it may hold besides false (`use_default`)."
    )
    denial: SwitchDenial = Field(
        "undeclared-argument",
        description="For `absent`: the failure class of a call that sets the switch "
                    "(`sandbox-escalation` AE106, `background-run` AE107).",
    )
    required: bool = Field(False, description="The call must carry the key.")
    description: str = Field("", description="Shown to the model in the tool's schema.")

    @model_validator(mode="after")
    def _fits_its_role(self) -> ArgumentSpec:
        if self.holds not in ("value", "absent") and (self.type != "string"
                                                      or self.choices is not None):
            raise ValueError(f"`type` and `choices` are for `holds: value`, not {self.holds!r}")
        if self.holds != "absent" and self.denial != "undeclared-argument":
            raise ValueError("`denial` is for `holds: absent`")
        if self.holds == "absent" and self.required:
            raise ValueError("a key that must be absent cannot be required")
        if self.holds == "absent" and self.type != "string":
            raise ValueError("`type` is for `holds: value`; an `absent` switch's `choices` "
                             "say what it may hold")
        for choice in self.choices or ():
            if self.holds == "value" and not accepts_type(choice, self.type):
                raise ValueError(f"choice {choice!r} is not of type {self.type}")
        return self

    def json_schema(self) -> dict:
        """The key's entry in the tool's JSON Schema, as offered to the model."""
        if self.holds == "absent":
            harmless = [False, *(self.choices or ())]
            schema: dict = {"enum": harmless} if self.choices else {"type": "boolean",
                                                                    "enum": [False]}
        elif self.holds == "argv":
            schema = {"type": "array", "items": {"type": "string"}}
        else:
            schema = {"type": self.type}
            if self.choices is not None:
                schema["enum"] = list(self.choices)
        if self.description:
            schema["description"] = self.description
        return schema


def accepts_type(value: object, type_: str) -> bool:
    """``value`` (decoded JSON) is of JSON type ``type_``; a boolean is no number."""
    if isinstance(value, bool) and type_ != "boolean":
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return isinstance(value, _JSON_TYPES[type_])


_JUDGED_ROLE = {"bash": "command", "read": "path"}
_ROLES = {"command": ("command", "argv"), "path": ("path",)}
_ROLE_TEXT = {"command": "the shell command", "path": "the file path"}


class ToolSpec(_Model):
    """A tool the harness offers the model, with every argument key a call may carry.

    The short form of older files, ``argument: command, required: [command]``, still
    loads: it declares that one key as the command (bash) or path (read), required, and
    each other name in ``required`` as a required string value."""

    name: str
    kind: Literal["bash", "read", "other"] = "other"
    arguments: dict[str, ArgumentSpec] = Field(
        default_factory=dict,
        description="Every key a call may carry and what it holds; any other key is "
                    "denied.  Default for bash/read: `command` / `path`, required.",
    )
    argument: str | None = Field(
        None, description="Short form: the key carrying the command (bash) or the path "
                          "(read), when `arguments` is not given."
    )
    required: list[str] = Field(
        default_factory=list, description="Short form: required keys, when `arguments` is "
                                          "not given."
    )
    description: str = ""

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: object) -> object:
        if not isinstance(data, dict) or data.get("arguments") is not None:
            if isinstance(data, dict):  # both forms (a dumped tool has both): must agree
                named = [data.get("argument"), *(data.get("required") or ())]
                if any(n and n not in data["arguments"] for n in named):
                    raise ValueError("`argument`/`required` name keys `arguments` does not "
                                     "declare; give either `arguments` or the short form")
            return data
        kind = data.get("kind")
        role = _JUDGED_ROLE.get(kind) if isinstance(kind, str) else None
        declared: dict[str, dict] = {}
        if role is not None:
            key = data.get("argument") or role
            declared[key] = {"holds": role, "required": True, "description": _ROLE_TEXT[role]}
        for name in data.get("required") or ():
            declared.setdefault(name, {"holds": "value", "required": True})
        return {**data, "arguments": declared}

    @model_validator(mode="after")
    def _one_judged_key(self) -> ToolSpec:
        counts = {role: sum(a.holds in _ROLES[role] for a in self.arguments.values())
                  for role in ("command", "path")}
        role = _JUDGED_ROLE.get(self.kind)
        if self.kind == "read" and counts["command"]:
            raise ValueError("a read tool has no `holds: command` key")
        if self.kind == "other" and counts["command"]:
            raise ValueError("only a bash tool has a `holds: command` (or `argv`) key")
        if role is not None:
            if counts[role] != 1:
                raise ValueError(f"a {self.kind} tool declares exactly one key with "
                                 f"`holds: {role}`{' (or `argv`)' if role == 'command' else ''} "
                                 f"(found {counts[role]})")
            if not self.arguments[self.judged_key or ""].required:
                raise ValueError(f"the `holds: {role}` key of a {self.kind} tool must be "
                                 "required")
        return self

    @property
    def judged_key(self) -> str | None:
        """The key holding the command (bash tool) or the path (read tool)."""
        role = _JUDGED_ROLE.get(self.kind)
        if role is None:
            return None
        return next((k for k, a in self.arguments.items() if a.holds in _ROLES[role]), None)

    def parameters_schema(self) -> dict:
        """The JSON Schema of the arguments, as offered to the model: the declared keys
        and no others."""
        return {
            "type": "object",
            "properties": {k: a.json_schema() for k, a in self.arguments.items()},
            "required": [k for k, a in self.arguments.items() if a.required],
            "additionalProperties": False,
        }


class ProfileSpec(_Model):
    """The tools of one agent CLI as it defines them (``policy/profiles.py`` has the
    built-in ones); an allow-list may add its own."""

    description: str = ""
    tools: list[ToolSpec] = Field(default_factory=list)


class Strictness(_Model):
    """Switches that loosen the default (strictest) policy for a looser harness."""

    pipe_to: list[str] = Field(
        default_factory=list, description="Programs an allowed command may pipe into."
    )
    allow_stderr_redirect: bool = False
    allow_chain: bool = Field(False, description="`&&`, `||`, `;` between allowed commands.")
    allow_wrappers: list[str] = Field(
        default_factory=list, description="Wrapper prefixes tolerated, e.g. `timeout`."
    )
    max_length: int = Field(16384, ge=1, description="Longer commands are AE202.")


class AllowList(_Model):
    """A whole harness policy."""

    name: str
    description: str = ""
    extends: str | None = Field(
        None,
        description="Base allow-list file, relative to this one: its fields apply unless "
        "this file sets them (`scripts`/`programs` entries merge by name, a `null` entry "
        "removes one; `read`/`strict` merge key by key; other fields replace).",
    )
    runner: list[str] = Field(
        default_factory=lambda: ["uv", "run"], description="Prefix words, e.g. `uv run`."
    )
    script_dir: str = Field("scripts", description="Scripts are run as `<script_dir>/<name>`.")
    scripts: dict[str, CommandSpec] = Field(default_factory=dict)
    programs: dict[str, CommandSpec] = Field(
        default_factory=dict, description="Plain programs allowed without the runner."
    )
    patterns: list[CommandPattern] = Field(
        default_factory=list,
        description="Commands allowed by their words (a string is `{match: ...}`); "
                    "consulted after `scripts` and `programs`.",
    )
    read: ReadPolicy = Field(default_factory=ReadPolicy)
    tools: list[ToolSpec] = Field(
        default_factory=lambda: [
            ToolSpec(name="bash", kind="bash"),
            ToolSpec(name="read", kind="read"),
        ]
    )
    profiles: dict[str, bool | ProfileSpec] = Field(
        default_factory=dict,
        description="Tool profiles of the agent CLIs, used to judge calls the proxy relays "
                    "or `import` reads (`agent-eval policy profiles` lists them).  Every "
                    "built-in profile is on; `NAME: false` switches one off, `NAME: {tools: "
                    "[...]}` adds one (or replaces a built-in of that name).",
    )
    project_root: str | None = Field(
        None, description="The absolute path of the folder the harness runs in: a working "
                          "directory (`holds: workdir`) spelt so is the project root, as "
                          "`.` is.")
    workdirs: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Working directories a tool's calls may name besides the project root, "
                    "by tool name (`exec_command: [scratch]`).  A working directory changes "
                    "what every relative path of the command means (`uv run scripts/x.py` "
                    "in `scratch` runs `scratch/scripts/x.py`), so no other is allowed.")
    denial_message: str = Field(
        "Denied by the allow-list ({code} {name}): {message}. "
        "Only `uv run scripts/<name>.py` with the listed flags is allowed.",
        description="Returned to the model on a denial; may use {code} {name} {message}.",
    )
    strict: Strictness = Field(default_factory=Strictness)

    @field_validator("patterns", mode="before")
    @classmethod
    def _pattern_strings(cls, value: object) -> object:
        if isinstance(value, list):
            return [{"match": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("profiles")
    @classmethod
    def _switched_profiles_exist(cls, profiles: dict[str, bool | ProfileSpec]
                                 ) -> dict[str, bool | ProfileSpec]:
        from agent_eval.policy.profiles import BUILTIN

        for name, profile in profiles.items():
            if isinstance(profile, bool) and name not in BUILTIN:
                raise ValueError(f"no built-in profile {name!r} to switch "
                                 f"{'on' if profile else 'off'} (built-in: "
                                 f"{', '.join(BUILTIN)}); give `{{tools: [...]}}` to add one")
        return profiles

    @field_validator("tools")
    @classmethod
    def _tool_names_are_unique(cls, tools: list[ToolSpec]) -> list[ToolSpec]:
        names = [t.name for t in tools]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"tool {twice[0]!r} is listed twice; each name once")
        return tools

    @cached_property
    def fingerprint(self) -> str:
        """A short stable hash of the policy's content, for run fingerprints and caches."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def tool(self, name: str, *, profiles: bool = False) -> ToolSpec | None:
        """The tool called ``name``: the allow-list's own, or with ``profiles`` (a call
        from an agent CLI) first the tool of that name in an enabled profile."""
        if profiles:
            spec = self.profile_tools.get(name)
            if spec is not None:
                return spec
        for spec in self.tools:
            if spec.name == name:
                return spec
        return None

    @cached_property
    def active_profiles(self) -> dict[str, ProfileSpec]:
        """The profiles in use, by name: the built-in ones not switched off, then the
        allow-list's own."""
        from agent_eval.policy.profiles import BUILTIN  # the table is built from these models

        active = {name: p for name, p in BUILTIN.items() if self.profiles.get(name) is not False}
        active.update({n: p for n, p in self.profiles.items() if isinstance(p, ProfileSpec)})
        return active

    @cached_property
    def profile_tools(self) -> dict[str, ToolSpec]:
        """Every tool of the active profiles by name (the first profile naming it wins)."""
        tools: dict[str, ToolSpec] = {}
        for profile in self.active_profiles.values():
            for spec in profile.tools:
                tools.setdefault(spec.name, spec)
        return tools


MAX_ALIAS_NODES = 10_000
"""The most nodes YAML aliases (``*name``) may add to a file once expanded.  Anchors and
aliases stay usable for what they are for (a flag block or a ``<<:`` merge repeated a
few times); a file whose aliases nest (a "billion laughs": 762 bytes that expand to five
million nodes, minutes and gigabytes to validate) is refused before anything is built."""


def read_yaml_mapping(path: str | Path, *, what: str = "YAML file") -> dict:
    """Read a YAML file that must hold a mapping; every failure is a one-line
    ``ConfigError`` naming the file (and the line, for syntax errors).  Shared by every
    YAML input: allow-lists, scenarios, suite defaults, protocols, targets."""
    path = Path(path)
    try:
        raw = parse_yaml(path.read_text(encoding="utf-8"))[1]
    except FileNotFoundError:
        raise ConfigError(f"file not found; pass an existing {what}", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read file ({exc})", path=str(path)) from None
    except yaml.YAMLError as exc:
        if isinstance(exc, YamlRefused):
            raise ConfigError(str(exc), path=str(path)) from None
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"not valid YAML{where}; fix the syntax", path=str(path)) from None
    if not isinstance(raw, dict):
        raise ConfigError("must be a YAML mapping", path=str(path))
    return raw


class YamlRefused(yaml.YAMLError):
    """A document refused before it is built: aliases that expand past
    :data:`MAX_ALIAS_NODES`, an alias inside itself, nesting too deep to compose."""


def parse_yaml(text: str) -> tuple[yaml.Node | None, object]:
    """The node tree and the data of one YAML document (PyYAML's safe loader), refusing
    aliases that would expand past :data:`MAX_ALIAS_NODES` nodes (or nest in themselves)
    with a :class:`YamlRefused`, in time linear in the file; so is a document nested
    too deep to compose.

    libyaml's loader (``yaml.CSafeLoader``, ten times faster: a suite's thirty files cost
    70 ms of every run's start in pure Python) composes nested nodes by recursion in C,
    where no RecursionError guards the stack, so it reads only a document that cannot nest
    deeper than :data:`C_LOADER_MAX_DEPTH`: every level opens with one of ``[{-:?``, so
    their count bounds the depth.  Anything else goes to the pure-Python loader."""
    loader = _loader_for(text)(text)
    try:
        try:
            node = loader.get_single_node()
            if node is None:
                return None, None
            if "*" in text:  # an alias is written *name: without a star there is none
                _check_aliases(node)
            return node, loader.construct_document(node)
        except RecursionError:
            raise YamlRefused("nested too deep to read; flatten it") from None
        except yaml.YAMLError as exc:  # libyaml stops at 1,000 levels on its own
            if "maximum nesting depth" in str(exc):
                raise YamlRefused("nested too deep to read; flatten it") from None
            raise
    finally:
        loader.dispose()


C_LOADER_MAX_DEPTH = 5_000  # C frames of a few hundred bytes: well inside any thread's stack


def _loader_for(text: str) -> type:
    """``yaml.CSafeLoader`` where libyaml is there and ``text`` cannot nest past
    :data:`C_LOADER_MAX_DEPTH`; else ``yaml.SafeLoader``."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is None:
        return yaml.SafeLoader
    openers = sum(text.count(ch) for ch in "[{-:?")
    return fast if openers < C_LOADER_MAX_DEPTH else yaml.SafeLoader


def _check_aliases(root: yaml.Node) -> None:
    """Count the nodes of the document as aliases expand it (the composer makes an alias
    the very node it names, so a node met twice is an alias): each distinct node once,
    iteratively, so a deep file cannot overflow the stack here."""
    sizes: dict[int, int] = {}
    ancestors: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            ancestors.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            continue
        if key in sizes:
            continue
        ancestors.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in ancestors:
                mark = child.start_mark
                raise YamlRefused(f"line {mark.line + 1}: an alias refers to the node that "
                                     "holds it (a loop); write the value out")
            if id(child) not in sizes:
                stack.append((child, False))
    added = sizes[id(root)] - len(sizes)
    if added > MAX_ALIAS_NODES:
        raise YamlRefused(
            f"its aliases (*name) would expand it by {added:,} nodes, over the "
            f"{MAX_ALIAS_NODES:,} allowed (a \"billion laughs\" file?); write the repeated "
            "parts out, or share them with `extends`")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return node.value
    return []


def load_allowlist(path: str | Path) -> AllowList:
    """Read and validate an allow-list file (with the file it ``extends``, if any); a bad
    file raises ``ConfigError``."""
    path = Path(path)
    return allowlist_from_dict(_read_with_bases(path, ()), source=str(path))


_MERGED_BY_NAME = ("scripts", "programs")
_MERGED_BY_KEY = ("read", "strict")


def _read_with_bases(path: Path, seen: tuple[Path, ...]) -> dict:
    raw = read_yaml_mapping(path, what="allow-list YAML")
    raw.setdefault("name", path.stem)
    base_ref = raw.get("extends")
    if base_ref is None:
        return raw
    if not isinstance(base_ref, str) or not base_ref:
        raise ConfigError("must be the path of another allow-list file", path=str(path),
                          field="extends")
    base_path = (path.parent / base_ref).resolve()
    if base_path in seen or base_path == path.resolve():
        raise ConfigError(f"{base_ref!r} extends this file again (a cycle); break the chain",
                          path=str(path), field="extends")
    if not base_path.exists():
        raise ConfigError(f"base allow-list {base_ref!r} not found (looked at {base_path})",
                          path=str(path), field="extends")
    base = _read_with_bases(base_path, (*seen, path.resolve()))
    return merge_allowlist_dicts(base, raw)


def merge_allowlist_dicts(base: dict, child: dict) -> dict:
    """``child`` on top of ``base``, by the rules documented on ``AllowList.extends``."""
    merged = {k: v for k, v in base.items() if k not in ("name", "description", "extends")}
    for key, value in child.items():
        if key in _MERGED_BY_NAME and isinstance(value, dict):
            entries = dict(base.get(key) or {})
            for name, spec in value.items():
                if spec is None:
                    entries.pop(name, None)
                else:
                    entries[name] = spec
            merged[key] = entries
        elif key in _MERGED_BY_KEY and isinstance(value, dict):
            merged[key] = {**(base.get(key) or {}), **value}
        else:
            merged[key] = value
    return merged


def allowlist_from_dict(raw: dict, *, source: str = "<allowlist>") -> AllowList:
    """Validate a mapping as an allow-list; errors name the source and the field."""
    try:
        return AllowList.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_first_error(exc), path=source) from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown field; check the spelling against `agent-eval schema allowlist`"
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"{loc}: {msg}{more}"
