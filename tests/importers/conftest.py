"""Fixtures for the importer tests: the real-data corpora (``$AGENT_EVAL_CORPORA``,
skipped with what to do when unset; see tests/support/real_corpora.py) and the OpenCode database /
storage shapes rebuilt in a temp folder from the captured fixtures."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from support.real_corpora import OPENCODE, need_corpora


@pytest.fixture(scope="session")
def corpora() -> Path:
    return need_corpora()


@pytest.fixture(scope="session")
def opencode_db(corpora: Path, tmp_path_factory) -> Path:
    """A real SQLite opencode.db (1.2+ layout) holding the captured session/message/part rows."""
    rows = json.loads((corpora / OPENCODE / "opencode-db-rows.session-message-part.json").read_text())
    path = tmp_path_factory.mktemp("opencode") / "opencode.db"
    con = sqlite3.connect(path)
    for table, items in rows.items():
        columns = list(items[0])
        con.execute(f"CREATE TABLE {table} ({', '.join(columns)})")
        for item in items:
            values = [json.dumps(v) if isinstance(v, dict | list) else v for v in item.values()]
            con.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(values))})", values)
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="session")
def opencode_storage(corpora: Path, tmp_path_factory) -> Path:
    """The JSON-file storage of OpenCode <= 1.1, laid out from the captured export."""
    export = json.loads((corpora / OPENCODE / "opencode-export.json").read_text())
    root = tmp_path_factory.mktemp("ochome") / "storage"
    info = export["info"]
    _write(root / "session" / info["projectID"] / f"{info['id']}.json", info)
    for message in export["messages"]:
        minfo = message["info"]
        _write(root / "message" / info["id"] / f"{minfo['id']}.json", minfo)
        for part in message["parts"]:
            _write(root / "part" / minfo["id"] / f"{part['id']}.json", part)
    return root


def _write(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
