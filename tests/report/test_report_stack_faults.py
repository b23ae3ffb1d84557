"""The report shows stack faults beside the model's errors, never in them: the HTML
table, summary.md and summary.json; a session's faults keep their raw wire text."""

from __future__ import annotations

import json

from support.factories import add_run

from agent_eval.report import write_report
from agent_eval.store import open_store
from agent_eval.transcript import CallRecord, SessionRecord, StackFaultRecord


def test_the_report_has_a_stack_fault_table_apart_from_the_errors(tmp_path):
    with open_store(str(tmp_path / "s.db")) as store:
        calls = [CallRecord(index=i, turn_index=i, tool="bash", arguments="{}",
                            decision="allow") for i in range(4)]
        cut = StackFaultRecord(1, "AE501", "call 'bash' cut by the output cap",
                               '{"command": "<script>alert(1)</script>', ends=True)
        run = add_run(store, [
            SessionRecord(key="a", target="llama-cpp", scenario="s", calls=calls),
            SessionRecord(key="b", target="llama-cpp", scenario="s", status="error",
                          error="reply cut", stack_faults=[cut])],
            label="n", suite="s", targets={"llama-cpp": "m"}, base_url="http://x/v1",
            status="finished")
        folder = write_report(store, [run], tmp_path / "reports").parent
    html = (folder / "index.html").read_text(encoding="utf-8")
    table = html[html.index('id="stack-table"'):]
    table = table[:table.index("</table>")]
    assert "AE501 cut-by-token-limit" in table and "20.00" in table  # 1 of 4 + 1 lost call
    assert "<script>" not in html
    data = json.loads((folder / "summary.json").read_text(encoding="utf-8"))["targets"]
    entry = data["llama-cpp"]
    assert entry["errors"] == 0
    assert entry["stack_faults"] == {"faults": 1, "calls": 5, "per_100": 20.0,
                                     "ci95": entry["stack_faults"]["ci95"],
                                     "classes": {"AE501": 1}}
    md = (folder / "summary.md").read_text(encoding="utf-8")
    assert "### Stack faults (the server's, never in the errors above)" in md
    assert "| AE501 cut-by-token-limit | 1 |" in md


def test_a_sessions_stack_faults_show_with_their_raw_wire_text_escaped(tmp_path):
    from click.testing import CliRunner

    from agent_eval.cli import main

    db = str(tmp_path / "s.db")
    with open_store(db) as store:
        run = add_run(store, label="n", suite="s", targets={"t": "m"}, base_url="http://x/v1")
        name = StackFaultRecord(0, "AE507", "tool name 'bash<|im_end|>' is not a name",
                                "bash<|im_end|><script>x</script>", ends=True)
        (sid,) = store.record_sessions(run, [SessionRecord(
            key="a", target="t", scenario="s", status="error", error="stack fault",
            stack_faults=[name])])
        store.set_run_status(run, "finished")
        folder = write_report(store, [run], tmp_path / "reports").parent
    pages = "".join(p.read_text(encoding="utf-8") for p in (folder / "sessions").glob("*.html"))
    assert "AE507 malformed-tool-name" in pages
    assert "bash&lt;|im_end|&gt;&lt;script&gt;x&lt;/script&gt;" in pages
    assert "<script>x" not in pages
    out = CliRunner().invoke(main, ["show", str(sid), "--db", db])
    assert out.exit_code == 0, out.output
    assert "stack fault, reply 0: AE507 malformed-tool-name" in out.output
    assert "bash<|im_end|><script>x</script>" in out.output
