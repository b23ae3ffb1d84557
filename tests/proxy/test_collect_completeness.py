"""What telemetry could prove, shown wherever the figures are: per session (events seen,
calls judged, calls not judgeable) in ``show``, the report's and the viewer's session
pages; per run in ``runs``, the report's index and the viewer's run page."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from agent_eval.cli import main as cli
from agent_eval.proxy.collect import Collector
from agent_eval.report.writing import write_report
from agent_eval.scenario.bundled import load_policy
from agent_eval.transcript import completeness_text, telemetry_completeness
from agent_eval.view.overview import build_run_page

FIXTURES = Path(__file__).parent.parent / "fixtures" / "otlp"


def collected(store) -> int:
    collector = Collector(store, load_policy("allowlists/ralf.yaml"), label="otel-night")
    for name in ("claude_code.logs.json", "codex.logs.json", "gemini_cli.logs.json"):
        status, _ = collector.receive("/v1/logs", "application/json", "",
                                      (FIXTURES / name).read_bytes())
        assert status == 200
    status, _ = collector.receive("/v1/traces", "application/json", "",
                                  (FIXTURES / "genai.traces.json").read_bytes())
    assert status == 200
    stats = collector.close()
    assert stats.run_id is not None
    return stats.run_id


def test_session_figures_come_from_its_tags_and_only_for_telemetry():
    assert telemetry_completeness(("otlp_events:6", "skipped_calls:2"), 2) == (6, 2, 2)
    assert telemetry_completeness(("otlp_events:3",), 3) == (3, 3, 0)
    assert telemetry_completeness(("skipped_calls:2",), 2) is None  # an import, not telemetry
    assert completeness_text((6, 2, 2)) == ("6 events seen, 2 calls judged, 2 not judgeable "
                                            "(arguments cut or absent)")
    assert completeness_text(None) == ""


def test_runs_lists_a_collected_runs_figures_and_its_not_judged_calls(store):
    run_id = collected(store)
    [row] = store.list_run_rows().rows
    stats_calls = sum(s.n_calls for s in store.session_rows([run_id]))
    assert row.telemetry is not None
    events, judged, not_judged = row.telemetry
    assert (judged, not_judged) == (stats_calls, 3) and events > judged + not_judged
    result = CliRunner().invoke(cli, ["runs", "--db", store.url], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"{judged} (+3 not judged)" in result.output
    listed = json.loads(CliRunner().invoke(cli, ["runs", "--json", "--db", store.url]).output)
    assert listed[0]["telemetry"] == [events, judged, 3]


def test_show_and_the_session_pages_say_what_telemetry_proved(store, tmp_path):
    run_id = collected(store)
    [claude] = [s for s in store.session_rows([run_id]) if s.key.startswith("claude_code")]
    result = CliRunner().invoke(cli, ["show", str(claude.id), "--db", store.url],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    figures = telemetry_completeness(claude.tags, claude.n_calls)
    assert figures is not None and figures[2] == 2
    assert f"telemetry: {completeness_text(figures)}" in " ".join(result.output.split())
    index = write_report(store, [run_id], tmp_path, workers=0)
    pages = "".join(p.read_text() for p in index.parent.rglob("*.html"))
    assert completeness_text(figures) in pages  # the session's page
    total = store.run_telemetry(run_id)
    assert f"From telemetry: {completeness_text(total)}" in index.read_text()


def test_the_viewer_run_page_says_it_and_other_runs_do_not(store):
    run_id = collected(store)
    page = build_run_page(store, run_id)
    assert page.completeness == completeness_text(store.run_telemetry(run_id))
    assert page.completeness.endswith("3 not judgeable (arguments cut or absent)")
