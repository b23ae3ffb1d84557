"""Read a folder file by file, each with the reader of its own format.

``agent-eval import auto PATH`` (or ``import PATH`` with FORMAT left out) tells each
file's format with :mod:`agent_eval.importers.detect`; a mixed folder (Claude Code
projects beside Codex rollouts and mini-swe-agent trajectories) imports in one run, each
session recorded with the format it came from.  With a named FORMAT a folder is read the
same way, but only with that reader: a file plainly of another format is passed over
and reported.

One broken file never stops a folder: a file its reader refuses (or that no reader
recognises) is reported through ``on_skip`` with line 0 and the reason, and the import
goes on.  Files are read one at a time and their sessions yielded as each file is done,
so memory holds one file's sessions, not the folder's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from agent_eval.errors import ConfigError
from agent_eval.importers.claude_code import transcript_order
from agent_eval.importers.detect import guess_format, guess_whole_folder
from agent_eval.importers.reading import (
    ImportedSession,
    SkipReporter,
    guarded,
    refuse_no_calls,
    warn_skipped,
)

SUFFIXES = (".jsonl", ".json", ".traj", ".db")
"""Files a folder import looks at; anything else (logs, images, source) is not a transcript."""

FileReporter = Callable[[Path, int], None]
"""Called as ``on_file(path, size in bytes)`` after each file is read (progress)."""


def folder_files(folder: Path) -> list[Path]:
    """The transcript candidates under ``folder``, in name order (a Claude Code, Qwen Code
    or Gemini CLI session file before its subagents).  The ``.meta.json`` beside a
    subagent's ``.jsonl`` (Claude Code, Qwen Code) is read with it, not on its own."""
    files = [p for p in folder.rglob("*") if p.suffix in SUFFIXES and p.is_file()
             and not _beside_its_subagent(p)]
    return sorted(files, key=transcript_order)


def _beside_its_subagent(path: Path) -> bool:
    return path.name.endswith(".meta.json") and \
        path.with_name(path.name.removesuffix(".meta.json") + ".jsonl").is_file()


def read_tagged(
    readers: dict, fmt: str | None, path: Path, *, model: str | None,
    on_skip: SkipReporter | None = None, on_file: FileReporter | None = None,
) -> Iterator[tuple[str, ImportedSession]]:
    """Yield ``(format, session)`` for every session at ``path``.

    ``fmt`` None (auto) detects each file's format; otherwise only ``fmt``'s reader is
    used.  A single file in auto mode whose format is not recognised is a ConfigError.
    """
    report = on_skip or warn_skipped
    whole = guess_whole_folder(path) if path.is_dir() else None
    if not path.is_dir() or whole is not None and fmt in (None, whole):
        use = fmt or whole or guess_format(path)
        if use is None:
            raise ConfigError(
                f"cannot tell which format this file is; name it: agent-eval import FORMAT PATH "
                f"(FORMAT one of {', '.join(readers)})", path=str(path))
        sessions = guarded(readers[use](path, model=model, on_skip=on_skip), path, use)
        for session in refuse_no_calls(sessions, path, use, guess_format(path) if fmt else use):
            yield use, session
        if on_file is not None:
            on_file(path, _size(path))
        return
    wholes = whole_folders(path)
    files = [f for f in folder_files(path) if not any(w in f.parents for w in wholes)]
    if not files and not wholes:
        raise ConfigError(f"no transcript files ({', '.join('*' + s for s in SUFFIXES)}) in this folder",
                          path=str(path))
    for item in sorted([*files, *wholes], key=transcript_order):
        yield from _read_one(readers, fmt, item, model=model, report=report, on_skip=on_skip,
                             guess=wholes.get(item))
        if on_file is not None:
            on_file(item, _size(item))


def whole_folders(folder: Path) -> dict[Path, str]:
    """The sub-folders of ``folder`` read as one thing (an OpenHands conversation and its
    ``events/``, an OpenCode storage), outermost only, with their format; their files are
    not read one by one."""
    found: dict[Path, str] = {}
    for sub in sorted(p for p in folder.rglob("*") if p.is_dir()):
        if any(w in sub.parents for w in found):
            continue
        kind = guess_whole_folder(sub)
        if kind is not None:
            found[sub] = kind
    return found


def _read_one(readers: dict, fmt: str | None, file: Path, *, model: str | None,
              report: SkipReporter, on_skip: SkipReporter | None,
              guess: str | None = None) -> Iterator[tuple[str, ImportedSession]]:
    guess = guess or guess_format(file)
    if fmt is not None and guess not in (None, fmt):
        what = "folder" if file.is_dir() else "file"
        report(file, 0, f"{what} looks like {guess}, not {fmt}; skipped (import it as {guess}, or use auto)")
        return
    use = fmt or guess
    if use is None:
        report(file, 0, "format not recognised; file skipped")
        return
    try:
        sessions = guarded(readers[use](file, model=model, on_skip=on_skip), file, use)
        for session in refuse_no_calls(sessions, file, use, guess):
            yield use, session
    except ConfigError as exc:
        text = str(exc)
        if exc.path:
            text = text.removeprefix(f"{exc.path}: ")
        report(file, 0, f"file skipped: {text}")
    except OSError as exc:
        report(file, 0, f"file skipped: the {use} reader could not read it ({type(exc).__name__}: {exc})")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size if path.is_file() else 0
    except OSError:
        return 0
