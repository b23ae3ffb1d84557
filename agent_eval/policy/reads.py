"""Judge a read-tool path against the allow-list's :class:`ReadPolicy`.  Pure.

Paths are normalised lexically (``posixpath.normpath``), never resolved on disk: the read
tool is simulated, and touching the real file system would make the verdict depend on the
machine.  ``~`` is always blocked (it names a home directory the policy cannot see).

How a path is matched (the rules a user of ``read.roots`` / ``read.blocked`` relies on):

- **Roots** are an allow, so they match exactly as written (case-sensitive, ``/`` only).
- **Blocked entries** are a deny, so they match the path as any file system might read
  it: case-insensitively (``notes/Private/x``, ``docs/.ENV``), with ``\\`` taken as a
  separator too (``notes/private\\a``), and with trailing dots and blanks of a name
  ignored (``notes/private./a``, as Windows does).
- An entry with a ``/`` inside (``notes/private/``) blocks that directory and everything
  under it.  A bare name blocks every path with a component of that name, at any depth:
  ``secrets/`` blocks ``secrets/k`` and ``docs/secrets/k``.  A bare name written without
  a trailing ``/`` is a file name and also blocks its dotted variants: ``.env`` blocks
  ``.env``, ``.env.local`` and ``.env.production`` (not ``environment.md``).
- A path with a ``\\`` must be allowed both ways (``\\`` as a character and as a
  separator); otherwise it is denied.
"""

from __future__ import annotations

import posixpath

from agent_eval.policy.allowlist import ReadPolicy
from agent_eval.policy.arguments import Problem


def _under(path: str, prefix: str) -> bool:
    base = prefix.rstrip("/")
    if base in ("", "."):
        return not path.startswith("/")
    return path == base or path.startswith(base + "/")


def _fold(path: str) -> str:
    """``path`` as a case-insensitive, ``\\``-separating file system would name it."""
    parts = []
    for part in path.replace("\\", "/").split("/"):
        if part not in (".", ".."):
            part = part.rstrip(". ") or part
        parts.append(part.casefold())
    return posixpath.normpath("/".join(parts)) if parts else ""


def _blocked_by(folded: str, entry: str) -> bool:
    name = _fold(entry.rstrip("/\\"))
    if "/" in name:
        return _under(folded, name)
    if name in ("", "."):
        return False
    is_file = not entry.endswith(("/", "\\"))
    return any(part == name or (is_file and part.startswith(name + "."))
               for part in folded.split("/"))


def _normalise(path: str) -> str:
    normal = posixpath.normpath(path)
    if normal.startswith("//"):
        normal = "/" + normal.lstrip("/")
    return normal


def _outside_roots(path: str, normal: str, policy: ReadPolicy) -> Problem | None:
    span = (0, len(path))
    if normal.startswith("/"):
        roots = [r for r in policy.roots if r.startswith("/")]
        if not policy.allow_absolute or not any(_under(normal, r) for r in roots):
            return Problem("blocked-read-path",
                           f"absolute path {normal} is outside the allowed roots", *span)
        return None
    if normal == ".." or normal.startswith("../"):
        return Problem("blocked-read-path", f"{path} escapes the work directory with ..", *span)
    roots = [r for r in policy.roots if not r.startswith("/")]
    if not any(_under(normal, r) for r in roots):
        listed = ", ".join(policy.roots) or "none"
        return Problem("blocked-read-path",
                       f"{normal} is outside the allowed roots ({listed})", *span)
    return None


def _judge_one(path: str, policy: ReadPolicy) -> tuple[Problem | None, str | None]:
    normal = _normalise(path)
    problem = _outside_roots(path, normal, policy)
    if problem:
        return problem, None
    folded = _fold(normal)
    for entry in policy.blocked:
        if _blocked_by(folded, entry):
            return Problem("blocked-read-path", f"{normal} is in blocked {entry}",
                           0, len(path)), None
    return None, normal


def judge_read(path: str, policy: ReadPolicy) -> tuple[Problem | None, str | None]:
    """A problem, or None and the normalised path the read may open."""
    span = (0, len(path))
    if not path.strip():
        return Problem("blocked-read-path", "empty path", *span), None
    if path.startswith("~"):
        return Problem("blocked-read-path", "~ (home directory) paths are blocked", *span), None
    problem, normal = _judge_one(path, policy)
    if problem is None and "\\" in path:
        problem, _ = _judge_one(path.replace("\\", "/"), policy)
    return problem, None if problem else normal
