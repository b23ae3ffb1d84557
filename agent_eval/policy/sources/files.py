"""Reading configuration files as their CLIs write them: JSON with comments (OpenCode's
``opencode.jsonc``, Claude Code's ``settings.json``), and Markdown agent files with YAML
front matter.  The only I/O of ``policy/sources``; every failure is one ``ConfigError``
naming the file (and the line where there is one) and what to do.

A key given twice in one JSON object is refused: JavaScript keeps the last value, other
readers the first, so which rule the CLI applies is ambiguous.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from agent_eval.errors import ConfigError
from agent_eval.policy.calls import DuplicateKey, unique_object

MAX_CONFIG_BYTES = 4 * 1024 * 1024
MAX_ALIASES = 64


class _BoundedLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses more than ``MAX_ALIASES`` aliases (a front matter
    of nested aliases expands to billions of nodes when anything walks it)."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self.aliases_seen = getattr(self, "aliases_seen", 0) + 1
            if self.aliases_seen > MAX_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_ALIASES} aliases")
        return super().compose_node(parent, index)



def read_text(path: Path, what: str) -> str:
    """The file's text; missing, unreadable, too large or not UTF-8 is a ConfigError."""
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{what} is {size} bytes, more than the {MAX_CONFIG_BYTES} "
                              "a configuration may have; pass the configuration file itself",
                              path=str(path))
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"file not found; pass an existing {what}", path=str(path)) from None
    except IsADirectoryError:
        raise ConfigError(f"is a folder; pass the {what} itself", path=str(path)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text ({exc.reason} at byte {exc.start}); save it as "
                          "UTF-8", path=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read file ({exc.strerror})", path=str(path)) from None


def strip_jsonc(text: str) -> str:
    """``text`` with ``//`` and ``/* */`` comments and trailing commas blanked out
    (positions kept, so a JSON error's line is the file's line).  Strings are skipped
    exactly; an unterminated comment is left for the JSON reader to refuse."""
    out = list(text)
    i, n = 0, len(text)
    last_significant = -1
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            last_significant = min(j, n - 1)
            i = j + 1
            continue
        if ch == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
            continue
        if ch == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                return "".join(out)
            for k in range(i, end + 2):
                if out[k] != "\n":
                    out[k] = " "
            i = end + 2
            continue
        if ch in "}]" and last_significant >= 0 and out[last_significant] == ",":
            out[last_significant] = " "
        if not ch.isspace():
            last_significant = i
        i += 1
    return "".join(out)


def read_json(path: Path, what: str) -> dict[str, Any]:
    """A JSON (or JSONC) object from ``path``."""
    text = read_text(path, what)
    try:
        data = json.loads(strip_jsonc(text), object_pairs_hook=unique_object)
    except DuplicateKey as dup:
        raise ConfigError(f"key {dup.args[0]!r} is given twice in one object; which value "
                          "the CLI applies is ambiguous, so keep one", path=str(path)) from None
    except RecursionError:
        raise ConfigError("nested too deeply to read", path=str(path)) from None
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        where = f" at line {line}" if line else ""
        raise ConfigError(f"not valid JSON{where} ({getattr(exc, 'msg', exc)}); fix the "
                          "syntax", path=str(path)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"must be a JSON object (a {what})", path=str(path))
    return data


def read_front_matter(path: Path, what: str) -> tuple[dict[str, Any], str]:
    """The YAML front matter of a Markdown file (``---`` lines around it) and its body."""
    text = read_text(path, what)
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            head = "".join(lines[1:index])
            body = "".join(lines[index + 1:])
            break
    else:
        raise ConfigError("front matter opened with --- is never closed; end it with a "
                          "--- line", path=str(path))
    try:
        data = yaml.load(head, Loader=_BoundedLoader) if head.strip() else {}
    except RecursionError:
        raise ConfigError("front matter nested too deeply to read", path=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark else ""
        raise ConfigError(f"front matter is not valid YAML{where}; fix the syntax",
                          path=str(path)) from None
    if not isinstance(data, dict):
        raise ConfigError("front matter must be a YAML mapping", path=str(path))
    return data, body.strip()
