"""The store: server-log samples and requests.

The SQL store, against a fresh SQLite file and a fresh PostgreSQL database each.

Commands and failure classes are the real ones from docs/design.md.  The ``store`` fixture
(tests/conftest.py) runs each store test once per backend.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from support.factories import T0

from agent_eval.errors import ConfigError


def test_server_samples_read_back_by_time_window(store):
    rows = [
        {
            "source": "vllm.log",
            "ts": T0 + timedelta(seconds=10 * i),
            "prompt_tps": 1200.5,
            "generation_tps": 45.0 + i,
            "running": i,
            "waiting": 0,
            "kv_cache_pct": 12.5,
        }
        for i in range(6)
    ]

    assert store.add_server_samples(rows) == 6
    window = store.server_samples(
        since=T0 + timedelta(seconds=20), until=T0 + timedelta(seconds=40)
    )
    assert [(s["running"], s["ts"]) for s in window] == [
        (2, T0 + timedelta(seconds=20)),
        (3, T0 + timedelta(seconds=30)),
    ]
    assert window[0]["raw"] is None and window[0]["source"] == "vllm.log"


def test_server_requests_round_trip(store):
    store.add_server_requests(
        [
            {
                "source": "a.log",
                "ts": T0,
                "method": "POST",
                "path": "/v1/chat/completions",
                "status": 200,
                "duration_s": 3.5,
            },
            {"source": "b.log", "ts": T0, "method": "GET", "path": "/v1/models", "status": 200},
        ]
    )

    assert [(r["path"], r["duration_s"]) for r in store.server_requests(source="a.log")] == [
        ("/v1/chat/completions", 3.5)
    ]


@pytest.mark.parametrize(
    "row, field",
    [
        pytest.param({"source": "s", "ts": T0, "gpu_temp": 80}, "gpu_temp", id="unknown-field"),
        pytest.param({"source": "s", "running": 1}, "ts", id="missing-ts"),
    ],
)
def test_a_bad_server_sample_is_refused_and_nothing_written(store, row, field):
    good = {"source": "s", "ts": T0}

    with pytest.raises(ConfigError, match=re.escape(field)) as caught:
        store.add_server_samples([good, row])

    assert caught.value.field == field
    assert store.server_samples() == []
