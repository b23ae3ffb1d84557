"""Our verdict beside the source harness's own: on the session page, in
``show``, as an agreement table and a disagreement list on the index, in summary.json and
summary.md; and imported outputs labelled as what the source recorded.

Two stores: one hand-made, with disagreements both ways and counts worked out by hand;
one filled by ``record_import`` from the captured OpenCode 1.18.34 files of the real-data
corpora (``$AGENT_EVAL_CORPORA``; skipped saying so when unset, see tests/support/real_corpora.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.factories import add_run
from support.real_corpora import OPENCODE, need
from support.report_fixtures import (
    ALLOWED,
    PIPED,
    Tables,
    judged_call,
    section_at,
    session,
    session_section,
)

from agent_eval.cli import main
from agent_eval.report import write_report
from agent_eval.report.agreement import MAX_DISAGREEMENTS
from agent_eval.report.pages import call_href
from agent_eval.store import open_store

REJECTED = "The user rejected permission to use this specific tool call."


def fill(db: str, *, extra_disagreements: int = 0) -> dict[str, int]:
    """Run 1.  ``imported`` (source "opencode"): 4 calls with a source verdict, 2 agree,
    1 we deny and the source ran (``ls | head``), 1 we allow and the source refused.
    ``live`` (source "live"): no source verdicts at all."""
    calls = [
        judged_call(0, 0, PIPED, "total 24\nfile-a", source_decision="allow"),
        judged_call(1, 1, ALLOWED, REJECTED, source_decision="deny", source_reason=REJECTED),
        judged_call(2, 2, ALLOWED, "context", source_decision="allow"),
        judged_call(3, 3, PIPED, REJECTED, source_decision="deny", source_reason=REJECTED),
    ]
    calls += [judged_call(4 + i, 4 + i, PIPED, "ran", source_decision="allow")
              for i in range(extra_disagreements)]
    imported = session("opencode/ses_1", "opencode", "ses_1", calls, n_turns=len(calls),
                       source="opencode")
    live = session("careful/pipes/0", "careful", "pipes", [judged_call(0, 0, PIPED, "denied")],
                   n_turns=1)
    with open_store(db) as store:
        run_id = add_run(store, [imported, live], label="mixed", kind="import",
                         targets=("opencode", "careful"), base_url="import:opencode")
        return {key: store.find_session(run_id, key) for key in (imported.key, live.key)}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> tuple[str, dict[str, int], Path]:
    db = str(tmp_path_factory.mktemp("agreement") / "store.db")
    ids = fill(db)
    with open_store(db) as store:
        report = write_report(store, [1], tmp_path_factory.mktemp("reports")).parent
    return db, ids, report


@pytest.fixture(scope="module")
def opencode_report(tmp_path_factory) -> Path:
    fixture = need(f"{OPENCODE}/opencode-db-rows.session-message-part.json")
    from agent_eval.importers.recording import record_import
    from agent_eval.policy import load_allowlist

    db = str(tmp_path_factory.mktemp("opencode") / "store.db")
    allowlist = load_allowlist(Path(__file__).resolve().parents[2] / "allowlists" / "ralf.yaml")
    with open_store(db) as store:
        run_id = record_import(store, "opencode", fixture, allowlist).run_id
        return write_report(store, [run_id], tmp_path_factory.mktemp("reports")).parent


def page(report: Path, name: str) -> str:
    return (report / name).read_text(encoding="utf-8")


def summary(report: Path) -> dict:
    return json.loads(page(report, "summary.json"))


def calls_of(html: str) -> list[str]:
    """The HTML of each call block of a session page, in order."""
    return html.split('<div class="call" ')[1:]


# --- the session page and show -----------------------------------------------------------


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        (0, 'source: <span class="badge allow">allow</span> <strong class="disagrees">'),
        (1, f'source: <span class="badge deny">deny</span> ({REJECTED}) '
            '<strong class="disagrees">'),
        (2, 'source: <span class="badge allow">allow</span></span>'),
        (3, f'source: <span class="badge deny">deny</span> ({REJECTED})</span>'),
    ],
    ids=["we-deny-source-ran-it", "we-allow-source-refused", "both-allow", "both-deny"],
)
def test_session_page_shows_the_source_verdict_beside_ours(mixed, index, expected):
    _, ids, report = mixed
    block = calls_of(session_section(report, ids['opencode/ses_1']))[index]
    assert expected in block
    assert ("disagrees" in block) == (index in (0, 1))


def test_live_session_page_has_no_source_verdict(mixed):
    _, ids, report = mixed
    html = session_section(report, ids['careful/pipes/0'])
    assert 'class="source-verdict' not in html and "disagrees</strong>" not in html


def test_imported_output_is_labelled_as_what_the_source_recorded(mixed):
    _, ids, report = mixed
    blocks = calls_of(session_section(report, ids['opencode/ses_1']))
    assert all("output the source recorded (" in b for b in blocks)
    assert not any("denial the model saw" in b for b in blocks)


def test_live_denial_is_labelled_as_the_denial_the_model_saw(mixed):
    _, ids, report = mixed
    [block] = calls_of(session_section(report, ids['careful/pipes/0']))
    assert "denial the model saw (6 characters)" in block


def test_show_prints_the_source_verdict_and_marks_the_disagreement(mixed):
    db, ids, _ = mixed
    result = CliRunner().invoke(main, ["show", str(ids["opencode/ses_1"]), "--db", db])
    assert result.exit_code == 0, result.output
    lines = [line.strip("│ ") for line in result.output.splitlines()]
    verdicts = [line for line in lines if line.startswith(("deny", "allow"))]
    assert verdicts == [
        "deny  bash  AE301 pipe-to-filter  source: allow  DISAGREES",
        f"allow bash  source: deny ({REJECTED})  DISAGREES",
        "allow bash  source: allow",
        f"deny  bash  AE301 pipe-to-filter  source: deny ({REJECTED})",
    ]
    assert "output the source recorded: total 24" in result.output
    assert "denial the model saw" not in result.output


# --- the index ---------------------------------------------------------------------------


def test_index_agreement_table_counts_both_directions_per_target(mixed):
    _, _, report = mixed
    # 4 calls with a source verdict; 2 agree: Wilson 95% of 2/4 is 15.0–85.0
    assert Tables(page(report, "index.html")).tables["agreement-table"] == [
        ["target", "calls with a source verdict", "agree [95% CI]", "ours deny, source allow",
         "ours allow, source deny"],
        ["opencode", "4", "2/4 (50.0%) [15.0–85.0]", "1", "1"],
    ]


def test_index_lists_each_disagreement_with_a_link_to_the_call(mixed):
    _, ids, report = mixed
    tables = Tables(page(report, "index.html"))
    sid = ids["opencode/ses_1"]
    assert tables.tables["disagreement-table"][1:] == [
        [str(sid), "opencode", "0", "bash", PIPED, "deny AE301", "allow"],
        [str(sid), "opencode", "1", "bash", ALLOWED, "allow", "deny"],
    ]
    assert call_href(sid, 0, from_dir=None) in tables.hrefs
    assert call_href(sid, 1, from_dir=None) in tables.hrefs


def test_disagreement_list_stops_at_its_cap_while_counts_cover_all(tmp_path):
    db = str(tmp_path / "many.db")
    fill(db, extra_disagreements=60)
    with open_store(db) as store:
        report = write_report(store, [1], tmp_path / "reports").parent
    tables = Tables(page(report, "index.html")).tables
    assert len(tables["disagreement-table"]) - 1 == MAX_DISAGREEMENTS
    assert tables["agreement-table"][1][:4] == ["opencode", "64", "2/64 (3.1%) [0.9–10.7]", "61"]
    assert f"Disagreements (first {MAX_DISAGREEMENTS})" in page(report, "index.html")


def test_index_of_a_live_run_has_no_agreement_section(hostile_report):
    html = page(hostile_report, "index.html")
    assert 'id="agreement"' not in html and "agreement-table" not in html


# --- summary.json and summary.md ---------------------------------------------------------


def test_summary_json_source_agreement_per_target_with_source_verdicts(mixed):
    assert summary(mixed[2])["source_agreement"] == {
        "opencode": {
            "calls_with_source_verdict": 4,
            "agree": 2,
            "agree_per_100": 50.0,
            "agree_ci95": [15.0, 85.0],
            "ours_deny_source_allow": 1,
            "ours_allow_source_deny": 1,
        }
    }


def test_summary_json_source_agreement_is_empty_for_a_live_run(hostile_report):
    assert summary(hostile_report)["source_agreement"] == {}


def test_summary_markdown_has_one_agreement_line(mixed):
    md = page(mixed[2], "summary.md")
    assert ("Agreement with the source harness: opencode 2/4 agree (50.0%), 2 disagree "
            "(ours deny, source allow 1; ours allow, source deny 1).") in md.splitlines()


# --- the real OpenCode fixtures ----------------------------------------------------------


def test_opencode_import_reports_agreement_with_opencode_permissions(opencode_report):
    # opencode-db-rows: 7 calls, all denied by ralf.yaml; OpenCode itself refused 4 (an
    # `rm` rule, an external directory, an unknown tool, the second session's pipe) and
    # ran 3 (`ls | head && echo`, a read of /tmp/ocproj/hello.txt, `cat missing_file.txt`)
    [(column, agreement)] = summary(opencode_report)["source_agreement"].items()
    assert agreement["calls_with_source_verdict"] == 7
    assert (agreement["agree"], agreement["ours_deny_source_allow"],
            agreement["ours_allow_source_deny"]) == (4, 3, 0)
    rows = Tables(page(opencode_report, "index.html")).tables["disagreement-table"][1:]
    assert [(r[4], r[5], r[6]) for r in rows] == [
        ("ls -la | head -5 && echo done", "deny AE301", "allow"),
        ("/tmp/ocproj/hello.txt", "deny AE320", "allow"),
        ("cat missing_file.txt", "deny AE307", "allow"),
    ]


def test_opencode_session_labels_the_real_output_and_the_permission_error(opencode_report):
    index = Tables(page(opencode_report, "index.html"))
    first = next(h for h in index.hrefs if h.startswith("sessions/"))
    blocks = calls_of(section_at(opencode_report, first))
    assert "output the source recorded" in blocks[0] and "total 24" in blocks[0]
    assert "disagrees" in blocks[0]
    assert "The user has specified a rule which prevents you" in blocks[2]
    assert "disagrees" not in blocks[2]
