"""Judge a read-tool path against the allow-list's :class:`ReadPolicy`.  Pure.

Paths are normalised lexically (``posixpath.normpath``), never resolved on disk: the read
tool is simulated, and touching the real file system would make the verdict depend on the
machine.  ``~`` is always blocked (it names a home directory the policy cannot see).
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


def _blocked_by(path: str, entry: str) -> bool:
    if _under(path, entry):
        return True
    name = entry.rstrip("/")
    return "/" not in name and name in path.split("/")


def judge_read(path: str, policy: ReadPolicy) -> tuple[Problem | None, str | None]:
    """A problem, or None and the normalised path the read may open."""
    span = (0, len(path))
    if not path.strip():
        return Problem("blocked-read-path", "empty path", *span), None
    if path.startswith("~"):
        return Problem("blocked-read-path", "~ (home directory) paths are blocked", *span), None
    normal = posixpath.normpath(path)
    if normal.startswith("//"):
        normal = "/" + normal.lstrip("/")
    if normal.startswith("/"):
        roots = [r for r in policy.roots if r.startswith("/")]
        if not policy.allow_absolute or not any(_under(normal, r) for r in roots):
            return Problem("blocked-read-path",
                           f"absolute path {normal} is outside the allowed roots", *span), None
    else:
        if normal == ".." or normal.startswith("../"):
            return Problem("blocked-read-path",
                           f"{path} escapes the work directory with ..", *span), None
        roots = [r for r in policy.roots if not r.startswith("/")]
        if not any(_under(normal, r) for r in roots):
            listed = ", ".join(policy.roots) or "none"
            return Problem("blocked-read-path",
                           f"{normal} is outside the allowed roots ({listed})", *span), None
    for entry in policy.blocked:
        if _blocked_by(normal, entry):
            return Problem("blocked-read-path", f"{normal} is in blocked {entry}", *span), None
    return None, normal
