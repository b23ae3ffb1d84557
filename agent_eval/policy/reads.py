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

Spellings refused outright, before any matching (``blocked-read-path``), because some
reader of the path would open another file than the one judged:

- a ``%`` followed by two hex digits (or ``%u`` and four): a reader that decodes URLs
  opens ``docs/%2eenv`` as ``docs/.env``, and ``%252e`` after a second decoding;
- a ``:``: on Windows ``.env::$DATA`` and ``notes::$INDEX_ALLOCATION`` are alternate
  data streams of the same file or folder, ``C:x`` names a drive;
- a ``~`` anywhere: a home directory at the start, an 8.3 short name elsewhere
  (``notes/PRIVAT~1`` is ``notes/private`` to Windows), an editor backup at the end
  (``.env~``);
- glob and shell characters ``* ? [ ] { } $ ` ! # | & ; < >``: a harness that expands
  the path or hands it to a shell opens what they expand to (``docs/*env``,
  ``notes/$(id)``; ``#.env#`` is an editor's copy of ``.env``);
- whitespace other than the space (U+00A0 and other spaces); TAB, LF and every other
  control or invisible character are refused before this, as ``invalid-bytes``.

Blocked names are also matched through Unicode case folding and compatibility forms
(NFKC, then upper- and lower-case folded): ``notes/prıvate`` (dotless ı) is
``notes/PRIVATE`` to a file system that upper-cases names, ``ｓecrets`` is
``secrets`` to one that maps look-alikes.  A bare blocked file name also blocks the
copies editors leave beside it: ``.env.swp`` (vim, already a dotted variant),
``.secrets.txt.swp``, ``#.env#`` and ``.#.env`` (emacs), ``.env~``.

Every blocked entry, file or folder, also blocks the copies file managers and version
control make of it (:func:`_original`): ``NAME copy``, ``NAME copy 2`` (macOS Finder),
``NAME (copy)``, ``NAME (another copy)``, ``NAME (3rd copy)`` (GNOME Files), ``NAME -
Copy``, ``NAME - Copy (2)``, ``Copy of NAME`` (Windows Explorer), ``NAME (2)`` (Windows,
browsers), ``NAME,v`` (RCS: every revision of the file), ``NAME.orig``, ``NAME.rej``
(patch, merge tools), ``NAME.bak``, ``NAME.old`` (editors, admins); also with the affix
before the extension (``secrets copy.txt``) and copies of copies.

A path with blanks is also read as a harness that splits it at blanks would (a shell,
``xargs``): a blank-separated part that is absolute, escapes with ``..`` or names a
blocked file refuses the path (``notes/a.md /etc/hostname``, ``notes/x ../../secret``);
and as Windows reads it, trailing blanks and dots of each name dropped (``notes/x ..``
is ``notes/x``, so ``notes/x ../../secret`` escapes).  A part need not be under a root:
``notes/my plan.md`` is one file and allowed.

A working directory (a shell tool's ``workdir``) is judged by :func:`judge_workdir`, not
as a read path.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from functools import lru_cache

from agent_eval.policy.allowlist import ReadPolicy
from agent_eval.policy.arguments import Problem


def _under(path: str, prefix: str) -> bool:
    base = prefix.rstrip("/")
    if base in ("", "."):
        return not path.startswith("/")
    return path == base or path.startswith(base + "/")


_REFUSED = (
    (re.compile(r"%(?:[0-9A-Fa-f]{2}|[uU][0-9A-Fa-f]{4})"),
     "a percent-encoded character: a reader that decodes it opens another name"),
    (re.compile(r":"), "a ':' names an NTFS data stream or a drive on Windows"),
    (re.compile(r"~"), "a '~' is a home directory, an 8.3 short name (PRIVAT~1) or an "
                       "editor backup"),
    (re.compile(r"[*?\[\]{}$`!#|&;<>]"), "a glob or shell character: a harness that "
                                         "expands the path opens something else"),
    (re.compile(r"[^\S ]"), "whitespace other than a space"),
)
_SWAP = re.compile(r"\.sw[a-p]$")


def _refused(path: str) -> Problem | None:
    for pattern, why in _REFUSED:
        found = pattern.search(path)
        if found:
            return Problem("blocked-read-path", f"{why} ({found.group()!r} at "
                           f"{found.start()})", found.start(), found.end())
    return None


def _fold_name(part: str) -> str:
    """One name as a file system that ignores case (any of Unicode's case mappings) or
    maps compatibility look-alikes might read it."""
    return unicodedata.normalize("NFKC", part).upper().lower().casefold()


def _fold(path: str) -> str:
    """``path`` as a case-insensitive, ``\\``-separating file system would name it."""
    parts = []
    for part in path.replace("\\", "/").split("/"):
        if part not in (".", ".."):
            part = part.rstrip(". ") or part
        parts.append(_fold_name(part))
    return posixpath.normpath("/".join(parts)) if parts else ""


def _names_of(part: str) -> tuple[str, ...]:
    """The name a component stands for, and the file it is an editor's copy of."""
    stem = part.removeprefix(".#").removeprefix("#").removesuffix("#").removesuffix("~")
    if _SWAP.search(stem):
        stem = stem[:-4].removeprefix(".")
    return (part, stem) if stem and stem != part else (part,)


_COPY_SUFFIX = re.compile(
    r"(?: copy(?: \d{1,6})?"  # macOS Finder: "NAME copy", "NAME copy 2"
    r"| - copy(?: \(\d{1,6}\))?"  # Windows Explorer: "NAME - Copy", "NAME - Copy (2)"
    r"| \((?:copy|another copy|\d{1,6}(?:st|nd|rd|th) copy)\)"  # GNOME Files
    r"| \(\d{1,6}\))$")  # Windows and browsers: "NAME (2)"
_COPY_PREFIX = re.compile(r"copy(?: \(\d{1,6}\))? of ")  # Windows, Google Drive: "Copy of NAME"
_COPY_ENDINGS = (",v", ".orig", ".rej", ".bak", ".old")
"""RCS keeps every revision of NAME in ``NAME,v``; patch leaves ``.orig`` and ``.rej``,
merge tools ``.orig``, editors and admins ``.bak`` and ``.old``."""


@lru_cache(maxsize=8192)
def _original(name: str) -> str:
    """The name a (folded) name is a copy of, by the conventions of file managers and
    version control (``_COPY_SUFFIX``, ``_COPY_PREFIX``, ``_COPY_ENDINGS``), also with
    the affix before the extension (``report copy.txt``) and a copy of a copy; the name
    itself when it is none.  Only the last few characters are matched: linear."""
    if " " not in name and "," not in name and "." not in name:
        return name  # every affix holds one of them
    for _ in range(8):
        before = name
        prefix = _COPY_PREFIX.match(name)
        if prefix and prefix.end() < len(name):
            name = name[prefix.end():]
        for ending in _COPY_ENDINGS:
            if name.endswith(ending) and len(name) > len(ending):
                name = name[:-len(ending)]
        name = _cut_copy_suffix(name)
        stem, dot, ext = name.rpartition(".")
        if dot and stem:
            cut = _cut_copy_suffix(stem)
            if cut != stem:
                name = f"{cut}.{ext}"
        if name == before:
            break
    return name


def _cut_copy_suffix(name: str) -> str:
    tail = name[-48:]
    found = _COPY_SUFFIX.search(tail)
    if found is None:
        return name
    kept = len(name) - len(tail) + found.start()
    return name[:kept] if kept > 0 else name


@lru_cache(maxsize=1024)
def _entry_name(entry: str) -> str:
    return _fold(entry.rstrip("/\\"))


def _blocked_by(folded: str, entry: str) -> bool:
    name = _entry_name(entry)
    if "/" in name:
        return _under(folded, name) or _under(_originals(folded), name)
    if name in ("", "."):
        return False
    is_file = not entry.endswith(("/", "\\"))
    return any(part == name or (is_file and part.startswith(name + "."))
               for whole in _components(folded)
               for part in _candidates(whole, is_file))


@lru_cache(maxsize=64)
def _components(folded: str) -> tuple[str, ...]:
    """The distinct names of a path, once for every blocked entry judged against it."""
    return tuple(dict.fromkeys(folded.split("/")))


def _originals(folded: str) -> str:
    """``folded`` with every component replaced by the name it is a copy of."""
    return "/".join(_original(part) for part in folded.split("/"))


@lru_cache(maxsize=8192)
def _candidates(whole: str, is_file: bool) -> frozenset[str]:
    """The names a component may stand for: itself, the file it is an editor's copy of
    (files only), and the name each of those is a copy of."""
    names = set(_names_of(whole)) if is_file else {whole}
    names |= {_original(name) for name in names}
    if is_file:
        names |= {n for name in list(names) for n in _names_of(name)}
    return frozenset(names)


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
    refused = _refused(path)
    if refused is not None:
        return refused, None
    problem, normal = _judge_one(path, policy)
    if problem is None and "\\" in path:
        problem, _ = _judge_one(path.replace("\\", "/"), policy)
    if problem is None and " " in path:
        problem = _blank_problem(path, policy)
    return problem, None if problem else normal


def _blank_problem(path: str, policy: ReadPolicy) -> Problem | None:
    """A path with blanks, as a harness that splits it at blanks (a shell, ``xargs``)
    or drops a name's trailing blanks and dots (Windows: ``x ..`` is ``x``) reads it:
    each blank-separated part must neither be absolute, nor escape with ``..``, nor name
    a blocked file; the path with trailing blanks and dots dropped must be allowed too.
    A part need not be under a root (``notes/my plan.md`` is one file)."""
    start = 0
    seen: set[str] = set()
    for part in path.split(" "):
        span = (start, start + len(part))
        start += len(part) + 1
        if not part or part in seen:
            continue
        seen.add(part)
        normal = _normalise(part)
        why = None
        if normal.startswith("/"):
            why = "is an absolute path"
        elif normal == ".." or normal.startswith("../"):
            why = "escapes the work directory with .."
        else:
            folded = _fold(normal)
            entry = next((e for e in policy.blocked if _blocked_by(folded, e)), None)
            if entry is not None:
                why = f"is in blocked {entry}"
        if why is not None:
            return Problem("blocked-read-path", f"split at its blanks, the path names "
                           f"{part}, which {why}", *span)
    trimmed = "/".join(p if p in (".", "..") else (p.rstrip(". ") or p)
                       for p in path.split("/"))
    if trimmed != path:
        problem, _ = _judge_one(trimmed, policy)
        if problem is not None:
            return Problem("blocked-read-path", f"without the trailing blanks and dots of "
                           f"its names (as Windows reads it), {problem.message}", 0, len(path))
    return None


def _spelling(path: str) -> str | None:
    """A directory as compared: lexically normalised, no trailing ``/``; None when it has a
    ``..`` component (through a link, ``a/..`` need not be where ``a`` is)."""
    if ".." in path.replace("\\", "/").split("/"):
        return None
    return _normalise(path)


def judge_workdir(path: str, allowed: list[str], root: str | None) -> Problem | None:
    """A working directory: None when it is the project root (``.``, ``./``, or
    ``root``'s spelling) or one of ``allowed`` (relative to the root, or under ``root``
    spelt absolutely); else the problem.  A working directory is not a read path: it
    changes what every relative path of the command names (``uv run scripts/x.py`` in
    ``scratch`` runs ``scratch/scripts/x.py``), so a readable folder is no better than
    any other.  Spellings a reader of paths refuses are refused here too."""
    span = (0, len(path))
    if not path.strip():
        return Problem("blocked-read-path", "empty working directory", *span)
    if path.startswith("~"):
        return Problem("blocked-read-path", "~ (home directory) as the working directory",
                       *span)
    refused = _refused(path)
    if refused is not None:
        return refused
    normal = _spelling(path)
    home = _normalise(root) if root else None
    wanted = {"."} | {_normalise(d) for d in allowed}
    if home is not None:
        wanted |= {home} | {_normalise(f"{home}/{d}") for d in allowed if not d.startswith("/")}
    if normal is not None and "\\" not in path and normal in wanted:
        return None
    listed = ", ".join(sorted(wanted))
    return Problem("blocked-read-path", f"working directory {path} is not the project root "
                   f"nor listed for the tool (allowed: {listed})", *span)

