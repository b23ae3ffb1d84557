"""Which release of an agent CLI is emulated, in which mode, and what holds for it.

A CLI's permission check changes between releases: Claude Code's old releases let a
``cd DIR && ...`` chain or a whole-command prefix through, its current release asks for
output redirections and runs read-only commands with no rule at all.  Each such
behaviour is one :class:`Behaviour` record carrying the versions it holds for
(``since`` inclusive, ``until`` exclusive, either open) and where it was reported; the
emulation of a version applies exactly the behaviours holding for it.  The default
version is the release the conformance corpus was recorded against (:data:`PINNED`, the
versions of ``scripts/ci/agent-clis.pins``); a session's own version comes from its
client's ``User-Agent`` (:func:`version_from_headers`) or a transcript, or a flag.

A **mode** is how the CLI runs unattended: Claude Code's permission mode
(``permissions.defaultMode`` or ``--permission-mode``), Codex's approval policy and
sandbox (``APPROVAL/SANDBOX``: ``never/workspace-write``), OpenCode's only
``default`` (its agents are chosen apart), Gemini CLI's and Qwen Code's approval modes
(``--approval-mode``).  docs/policies.md lists both.  Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from agent_eval.errors import ConfigError

PINNED = {"claude-code": "2.1.332", "codex": "0.169.0", "opencode": "1.18.33",
          "gemini-cli": "0.61.0", "qwen-code": "0.24.4"}
"""The release of each CLI emulated when none is named: the pinned one."""

CLAUDE_MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto")
CODEX_APPROVALS = ("untrusted", "on-failure", "on-request", "never")
CODEX_SANDBOXES = ("read-only", "workspace-write", "danger-full-access")
CODEX_DEFAULT_MODE = "never/read-only"
GEMINI_MODES = ("default", "autoEdit", "yolo", "plan")
"""``gemini --approval-mode`` (``auto_edit`` on the command line is ``autoEdit``)."""
QWEN_MODES = ("default", "plan", "auto-edit", "auto", "yolo")
"""``codex exec``'s own defaults: no approvals, a read-only sandbox."""


@dataclass(frozen=True, slots=True)
class Behaviour:
    """One emulated behaviour of a CLI's permission check and the versions it holds for.

    ``quirk``: a behaviour reported as a bug (``--quirks`` turns these on or off one by
    one); the others are how the release behaves by design."""

    name: str
    harness: str
    summary: str
    source: str
    since: str | None = None
    until: str | None = None
    quirk: bool = True

    def holds(self, version: str) -> bool:
        key = version_key(version)
        return (self.since is None or key >= version_key(self.since)) and \
            (self.until is None or key < version_key(self.until))

    def versions(self) -> str:
        """The versions it holds for, in words: ``< 2.1.332``, ``>= 2.1.332``, ``all``."""
        parts = [f">= {self.since}" if self.since else "", f"< {self.until}" if self.until else ""]
        return ", ".join(p for p in parts if p) or "all"


_CC = "claude-code"
_FOUND = "found on the pinned release by the conformance corpus (docs/policies.md)"
BEHAVIOURS = (
    Behaviour("whole-command-prefix", _CC, "an allow rule matched the start of the whole "
              "compound command", "anthropics/claude-code#4956 (1.0.x); " + _FOUND,
              until=PINNED[_CC]),
    Behaviour("cd-chain", _CC, "the parts after `cd DIR &&` were not judged",
              "anthropics/claude-code#28784, #59498 (2.1.x); " + _FOUND, until=PINNED[_CC]),
    Behaviour("inline-shell-unseen", _CC, "the script of `bash -c '...'` was not inspected "
              "for protected writes", "anthropics/claude-code#43085"),
    Behaviour("redirect-stripped", _CC, "output redirections were removed before a part "
              "was matched", "changelog 1.0.123; " + _FOUND, since="1.0.123",
              until=PINNED[_CC]),
    Behaviour("assignment-stripped", _CC, "leading `VAR=value` assignments were removed "
              "before a part was matched", "anthropics/claude-code#92542; " + _FOUND,
              until=PINNED[_CC]),
    Behaviour("read-only-unasked", _CC, "read-only commands (ls, cat, grep, git status...) "
              "run with no rule in the default, acceptEdits and plan modes, also behind "
              "the stripped wrappers and `xargs`", "code.claude.com/docs/en/permissions (read-only "
              "tier); " + _FOUND, since=PINNED[_CC], quirk=False),
    Behaviour("redirect-asks", _CC, "an output redirection into a file asks, whatever rule "
              "matches the command (acceptEdits accepts a file of the working directory)",
              _FOUND, since=PINNED[_CC], quirk=False),
    Behaviour("assignment-asks", _CC, "a part with leading `VAR=value` assignments asks",
              _FOUND, since=PINNED[_CC], quirk=False),
    Behaviour("heredoc-asks", _CC, "a heredoc with an unquoted delimiter asks (its body "
              "undergoes expansion)", _FOUND, since=PINNED[_CC], quirk=False),
    Behaviour("background-asks", _CC, "a `&` background job asks", _FOUND,
              since=PINNED[_CC], quirk=False),
    Behaviour("subshell-asks", _CC, "a subshell `( ... )` asks", _FOUND, since=PINNED[_CC],
              quirk=False),
    Behaviour("brace-asks", _CC, "a brace expansion `{a,b}` asks", _FOUND,
              since=PINNED[_CC], quirk=False),
    Behaviour("path-outside-asks", _CC, "a read-only file command (`ls`, `cat`...) "
              "naming a path outside the working and additional directories asks, whatever "
              "rule allows the command", _FOUND, since=PINNED[_CC], quirk=False),
    Behaviour("cd-outside-asks", _CC, "`cd` into a folder outside the working and "
              "additional directories asks", _FOUND, since=PINNED[_CC], quirk=False),
)
QUIRK_NAMES = tuple(b.name for b in BEHAVIOURS if b.quirk)

_VERSION = re.compile(r"\d+(?:\.\d+){0,3}")


def version_key(text: str) -> tuple[int, ...]:
    """``2.1.32`` -> (2, 1, 32); a pre-release or build tail is ignored."""
    m = _VERSION.match(text.strip().lstrip("v"))
    if m is None:
        raise ConfigError(f"{text!r} is not a version; write it as 2.1.332", field="--cli-version")
    return tuple(int(p) for p in m.group(0).split("."))


def check_mode(harness: str, mode: str) -> str:
    """``mode`` when the CLI has it, else a ConfigError naming the modes it has."""
    if harness == "claude-code":
        if mode not in CLAUDE_MODES:
            raise ConfigError(f"Claude Code has no mode {mode!r}; its modes: "
                              f"{', '.join(CLAUDE_MODES)}", field="--mode")
        return mode
    if harness == "codex":
        approval, _, sandbox = mode.partition("/")
        if approval not in CODEX_APPROVALS or sandbox not in CODEX_SANDBOXES:
            raise ConfigError(f"Codex mode {mode!r} is not APPROVAL/SANDBOX with APPROVAL one "
                              f"of {', '.join(CODEX_APPROVALS)} and SANDBOX one of "
                              f"{', '.join(CODEX_SANDBOXES)}", field="--mode")
        return mode
    if harness == "gemini-cli":
        if mode not in GEMINI_MODES:
            raise ConfigError(f"Gemini CLI has no approval mode {mode!r}; its modes: "
                              f"{', '.join(GEMINI_MODES)}", field="--mode")
        return mode
    if harness == "qwen-code":
        if mode not in QWEN_MODES:
            raise ConfigError(f"Qwen Code has no approval mode {mode!r}; its modes: "
                              f"{', '.join(QWEN_MODES)}", field="--mode")
        return mode
    if mode != "default":
        raise ConfigError("OpenCode has one mode, default (pick its agent with --agent)",
                          field="--mode")
    return mode


CODEX_UNTRUSTED_UNTIL = "0.149.0"
"""The first Codex release that refuses approval ``untrusted`` at start (reported by its
users: 0.148.0 took it, 0.149.1 refused it; the pinned 0.169.0 refuses it)."""
CODEX_UNTRUSTED_REFUSAL = ('approval_policy = "untrusted" is no longer supported; '
                           "remove this setting")
"""What the pinned Codex prints (exit 1, before any model call) for approval ``untrusted``."""


def check_release(harness: str, version: str, mode: str, field: str = "--mode") -> None:
    """A ConfigError when the release does not start in ``mode``: Codex from 0.149.0 with
    approval ``untrusted`` (docs/policies.md).  ``field``: where the mode came from."""
    if harness == "codex" and mode.partition("/")[0] == "untrusted" \
            and version_key(version) >= version_key(CODEX_UNTRUSTED_UNTIL):
        raise ConfigError(
            f"Codex {version} refuses approval untrusted: it exits at start with "
            f"\"{CODEX_UNTRUSTED_REFUSAL}\" (every release from {CODEX_UNTRUSTED_UNTIL}); "
            "use on-request or never, or --cli-version 0.148.0 for a release that had it",
            field=field)


@dataclass(frozen=True, slots=True)
class Emulation:
    """The release and mode a verdict assumed, and the behaviours applied."""

    harness: str
    version: str
    mode: str
    behaviours: frozenset[str]

    def describe(self) -> str:
        return f"{self.harness} {self.version}, mode {self.mode}"

    def as_dict(self) -> dict[str, object]:
        return {"harness": self.harness, "version": self.version, "mode": self.mode,
                "behaviours": sorted(self.behaviours)}


def emulation_for(harness: str, version: str | None, mode: str,
                  quirks: frozenset[str] | None) -> Emulation:
    """The emulation of ``harness`` at ``version`` (None: the pinned release) in ``mode``.
    ``quirks`` (None: those holding for the version) replaces the quirk behaviours; the
    by-design ones always follow the version."""
    chosen = version or PINNED.get(harness, "0")
    version_key(chosen)
    mine = [b for b in BEHAVIOURS if b.harness == harness]
    by_design = {b.name for b in mine if not b.quirk and b.holds(chosen)}
    if quirks is None:
        named = {b.name for b in mine if b.quirk and b.holds(chosen)}
    else:
        named = {b.name for b in mine if b.quirk and b.name in quirks}
    return Emulation(harness, chosen, mode, frozenset(by_design | named))


_AGENTS = (("claude-code", re.compile(r"claude-cli/(\d[\w.\-]*)")),
           ("codex", re.compile(r"codex[_\-a-z]*/(\d[\w.\-]*)")),
           ("opencode", re.compile(r"opencode/(\d[\w.\-]*)")),
           ("gemini-cli", re.compile(r"GeminiCLI[\w-]*/(\d[\w.\-]*)")),
           ("qwen-code", re.compile(r"QwenCode/(\d[\w.\-]*)")))


def version_from_headers(headers: Mapping[str, str]) -> tuple[str, str] | None:
    """``(harness, version)`` a client's ``User-Agent`` names (``claude-cli/2.1.332
    (external, cli)``, ``codex_cli_rs/0.169.0 ...``, ``opencode/1.18.33``), else None."""
    agent = next((v for k, v in headers.items() if k.lower() == "user-agent"), "")
    for harness, pattern in _AGENTS:
        m = pattern.search(agent)
        if m is not None:
            return harness, m.group(1)
    return None
