"""A report of several session files is written by two processes (``report/batches.py``):
the bytes are those of the one-process report, and a hostile transcript rendered in the
worker is escaped like any other."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.report_fixtures import (
    ALLOWED,
    PIPED,
    SCRIPT_TAG,
    XSS,
    fill_store,
    judged_call,
    session,
)

from agent_eval.report import write_report
from agent_eval.report.batches import SessionFiles
from agent_eval.report.pages import session_file
from agent_eval.store import open_store

ESCAPED_SCRIPT = "&lt;script&gt;alert(1)&lt;/script&gt;"


@pytest.fixture(scope="module")
def big_store(tmp_path_factory) -> tuple[str, int, int]:
    """The hostile fixture run plus 320 clean sessions and a last hostile one (id > 300)."""
    fx = fill_store(str(tmp_path_factory.mktemp("workers") / "store.db"))
    clean = [session(f"careful/bulk/{n}", "careful", "bulk",
                     [judged_call(0, 0, ALLOWED, "ok")], n_turns=1) for n in range(320)]
    late = session("sloppy/late-xss/0", "sloppy", "xss",
                   [judged_call(0, 0, PIPED, f"Permission denied {XSS}")], n_turns=1)
    late.turns[0].content = f"content {XSS}"
    with open_store(fx.db) as store:
        store.record_sessions(fx.run_id, clean)
        store.record_session(fx.run_id, late)
        late_id = store.find_session(fx.run_id, late.key)
    return fx.db, fx.run_id, late_id


def _files(report: Path) -> dict[str, bytes]:
    return {str(p.relative_to(report)): p.read_bytes() for p in sorted(report.rglob("*"))
            if p.is_file()}


def test_two_processes_write_the_same_bytes_as_one(big_store, tmp_path):
    db, run_id, late_id = big_store
    with open_store(db) as store:
        serial = write_report(store, [run_id], tmp_path / "serial", workers=0).parent
        split = write_report(store, [run_id], tmp_path / "split", workers=1).parent
    assert sorted(p.name for p in (split / "sessions").iterdir()) == [
        "0-99.html", "100-199.html", "200-299.html", "300-399.html"]
    assert _files(split) == _files(serial)
    late = (split / "sessions" / session_file(late_id)).read_text(encoding="utf-8")
    assert f'id="s{late_id}"' in late and f"content {ESCAPED_SCRIPT}" in late
    assert SCRIPT_TAG not in late


def test_the_worker_takes_the_later_files_and_this_process_the_earlier(big_store, tmp_path):
    db, run_id, _ = big_store
    files = {"0-99.html", "100-199.html", "200-299.html", "300-399.html"}
    with open_store(db) as store:
        split = SessionFiles(store, [run_id], tmp_path, files, workers=1)
        assert (split.parallel, split._mine, split._theirs) == (True, (0, 99), (100, 399))
        one = SessionFiles(store, [run_id], tmp_path, {"0-99.html"}, workers=1)
        off = SessionFiles(store, [run_id], tmp_path, files, workers=0)
        assert (one.parallel, off.parallel) == (False, False)


def test_an_in_memory_database_is_written_in_one_process(tmp_path):
    with open_store("sqlite://") as store:
        files = SessionFiles(store, [1], tmp_path, {"0-99.html", "100-199.html"}, workers=1)
        assert files.parallel is False


def test_iter_sessions_keeps_to_an_id_range(big_store):
    db, run_id, late_id = big_store
    with open_store(db) as store:
        ids = [s.id for s in store.iter_sessions([run_id], (100, 199))]
        whole = {s.id: s for s in store.iter_sessions([run_id])}
        ranged = next(iter(store.iter_sessions([run_id], (late_id, late_id))))
    assert ids == list(range(100, 200))
    assert ranged == whole[late_id]


def test_by_default_a_worker_starts_only_when_a_core_is_spare(big_store, tmp_path,
                                                              monkeypatch):
    db, run_id, _ = big_store
    files = {"0-99.html", "100-199.html"}
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    with open_store(db) as store:
        monkeypatch.setattr("os.getloadavg", lambda: (0.4, 0.5, 0.5))
        assert SessionFiles(store, [run_id], tmp_path, files).parallel is True
        monkeypatch.setattr("os.getloadavg", lambda: (1.2, 0.5, 0.5))
        assert SessionFiles(store, [run_id], tmp_path, files).parallel is False
