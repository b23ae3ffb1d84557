"""The store: runs and targets: resolving a reference, fingerprints, vocabularies, secrets.

The SQL store, against a fresh SQLite file and a fresh PostgreSQL database each.

Commands and failure classes are the real ones from docs/design.md.  The ``store`` fixture
(tests/conftest.py) runs each store test once per backend.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from support.factories import add_run, session

from agent_eval.errors import ConfigError
from agent_eval.store import (
    scrub_secrets,
)


def test_resolve_run_finds_by_id_latest_and_label(store):
    def new_run(label):
        return store.create_run(label=label, kind="live", suite=None, config={}, fingerprint={})

    first, second, third = new_run("nightly"), new_run("nightly"), new_run("adhoc")

    assert store.resolve_run(first).id == first
    assert store.resolve_run(str(second)).id == second
    assert store.resolve_run("latest").id == third
    assert store.resolve_run("label:nightly").id == second
    assert [r.id for r in store.list_runs(limit=2)] == [third, second]


@pytest.mark.parametrize(
    "ref, message",
    [
        pytest.param("999", "no run with id 999", id="missing-id"),
        pytest.param("label:weekly", "'label:weekly'", id="missing-label"),
        pytest.param("yesterday", "'yesterday' is not a run", id="not-a-reference"),
    ],
)
def test_resolve_run_names_the_reference_it_cannot_find(store, ref, message):
    store.create_run(label="nightly", kind="live", suite=None, config={}, fingerprint={})

    with pytest.raises(ConfigError, match=message):
        store.resolve_run(ref)


def test_latest_on_an_empty_store_is_a_config_error(store):
    with pytest.raises(ConfigError, match="no runs yet"):
        store.resolve_run("latest")


def test_a_run_keeps_its_fingerprint_status_and_parent(store, run_id):
    rescore = store.create_run(
        label=None, kind="rescore", suite=None, config={}, fingerprint={}, parent_run_id=run_id
    )
    store.set_run_status(run_id, "finished")

    run = store.get_run(run_id)
    assert (run.status, run.kind, run.label) == ("finished", "live", "nightly")
    assert run.fingerprint == {"suite_sha256": "ab12", "engine": "0.1.0"}
    assert run.finished_at is not None and run.finished_at >= run.created_at
    assert store.get_run(rescore).parent_run_id == run_id


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(
            lambda s: s.create_run(
                label=None, kind="nightly", suite=None, config={}, fingerprint={}
            ),
            id="bad-kind",
        ),
        pytest.param(lambda s: s.set_run_status(1, "done"), id="bad-status"),
    ],
)
def test_closed_vocabularies_are_enforced(store, call):
    with pytest.raises(ConfigError, match="use one of"):
        call(store)


def test_adding_a_target_twice_returns_the_same_id(store, run_id):
    again = store.add_target(run_id, name="qwen-27b", model="other", base_url="x", settings={})

    assert again == store.run_targets(run_id)[0].id
    assert [t.name for t in store.run_targets(run_id)] == ["qwen-27b", "qwen-35b-moe"]


def test_credentials_never_reach_the_store(store, run_id):
    settings = {
        "api_key": "sk-live-123",
        "headers": {"Authorization": "Bearer sk-live-456", "X-Trace": "on"},
        "extra_body": {"chat_template_kwargs": {"enable_thinking": True}},
        "clients": [{"access_token": "tok-789", "name": "a"}],
        "DB_PASSWORD": "hunter2",
        "temperature": 1.0,
        "max_tokens": 4096,
    }
    tid = store.add_target(
        run_id, name="secret", model="m", base_url="http://127.0.0.1", settings=settings
    )

    (target,) = [t for t in store.run_targets(run_id) if t.id == tid]
    assert target.settings == {
        "headers": {"X-Trace": "on"},
        "extra_body": {"chat_template_kwargs": {"enable_thinking": True}},
        "clients": [{"name": "a"}],
        "temperature": 1.0,
        "max_tokens": 4096,
    }
    with store.engine.connect() as conn:
        raw = conn.execute(text("SELECT settings FROM targets WHERE id = :i"), {"i": tid})
        assert "sk-live" not in str(raw.scalar())


def test_run_config_and_fingerprint_are_scrubbed_too(store):
    rid = store.create_run(
        label=None,
        kind="live",
        suite=None,
        config={"targets": [{"name": "a", "api_key": "sk-1"}]},
        fingerprint={"secret_token": "t"},
    )

    assert store.get_run(rid).config == {"targets": [{"name": "a"}]}
    assert store.get_run(rid).fingerprint == {}


def test_scrub_secrets_leaves_values_that_merely_mention_keys():
    assert scrub_secrets({"prompt": "use your api_key", "tags": ["token"]}) == {
        "prompt": "use your api_key",
        "tags": ["token"],
    }


def _run_with_sessions(store, label: str, keys: tuple[str, ...], kind: str = "import") -> int:
    return add_run(store, [session(k) for k in keys], label=label, kind=kind,
                   targets=("qwen-27b",), base_url="import:openai")


@pytest.mark.parametrize("ref", ["latest", "label:nightly"], ids=["latest", "label"])
def test_resolve_run_skips_newer_runs_that_hold_no_sessions(store, ref):
    full = _run_with_sessions(store, "nightly", ("a", "b"))
    store.set_run_status(full, "finished")
    empty = _run_with_sessions(store, "nightly", ())
    store.set_run_status(empty, "failed")

    assert store.resolve_run(ref).id == full
    assert store.resolve_run(empty).id == empty


@pytest.mark.parametrize("status", ["running", "interrupted"])
def test_resolve_run_keeps_an_empty_run_that_may_still_get_sessions(store, status):
    _run_with_sessions(store, "nightly", ("a",))
    resumable = _run_with_sessions(store, "nightly", (), kind="live")
    store.set_run_status(resumable, status)

    assert store.resolve_run("latest").id == resumable


@pytest.mark.parametrize("status", ["running", "interrupted"])
@pytest.mark.parametrize("ref", ["latest", "label:nightly"], ids=["latest", "label"])
def test_latest_never_names_an_import_that_did_not_finish(store, status, ref):
    complete = _run_with_sessions(store, "nightly", ("a",))
    store.set_run_status(complete, "finished")
    killed = _run_with_sessions(store, "nightly", ("b", "c"))  # sessions, but half the file
    store.set_run_status(killed, status)

    assert store.resolve_run(ref).id == complete
    assert store.resolve_run(killed).id == killed  # by id it is still there to inspect


def test_latest_on_a_store_holding_only_a_killed_import_says_there_is_no_complete_run(store):
    _run_with_sessions(store, "nightly", ("a",))  # status stays running: the import was killed

    with pytest.raises(ConfigError, match="no runs yet .an import that never finished"):
        store.resolve_run("latest")


def test_resolve_run_falls_back_to_the_newest_run_when_none_qualifies(store):
    for _ in range(2):
        newest = _run_with_sessions(store, "nightly", ())
        store.set_run_status(newest, "failed")

    assert store.resolve_run("latest").id == newest
