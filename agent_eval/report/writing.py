"""Writing ``reports/<run>/`` to disk: the only part of the report that touches files.

Order of work, so a 10,000-session run stays fast and flat in memory:

1. session rows (small) are read once and named by column;
2. sessions stream once as the rows their pages show (four queries per hundred sessions,
   ``Store.iter_transcripts``), rendered a hundred to a file
   (``sessions/<first>-<last>.html``), each batch written, then dropped: mostly in a
   worker process with its own connection (``report/batches.py``), while
3. the figures come from the store's aggregator (``index.read_figures``: GROUP BYs, as
   every reader's do), and the calls stream once here for the per-session counts, the
   repeats, the class lists and the agreement with the source harness;
4. server samples inside each run's window (the "Server throughput" section; calls are
   streamed a second time only for a run that has samples);
5. rule pages, the pre-filtered lists (``lists/``), the index and the summary files.

So a report is a few hundred files whatever the run's size.

File names come from integers the store assigned and from registry codes, never from
anything the model wrote.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from agent_eval.errors import ConfigError
from agent_eval.policy import RULES
from agent_eval.policy.schemas import tool_drift
from agent_eval.report.batches import SessionFiles
from agent_eval.report.batches import write_text as _write
from agent_eval.report.ci_files import junit_xml, summary_json, summary_markdown
from agent_eval.report.index import CallTally, build_index_page, column_namer, read_figures
from agent_eval.report.lists import (
    class_file,
    class_lists,
    failed_list,
    scenario_file,
    scenario_lists,
)
from agent_eval.report.pages import (
    LISTS_DIR,
    RULES_DIR,
    SESSIONS_DIR,
    build_rule_page,
    session_file,
)
from agent_eval.report.render import (
    render_index,
    render_list,
    render_rule,
)
from agent_eval.report.throughput import read_run_throughput


def report_dir(out_root: Path, run_ids: list[int]) -> Path:
    """``out_root/<id>`` for one run, ``out_root/<id1>-<id2>`` for several."""
    return Path(out_root) / "-".join(str(int(r)) for r in run_ids)


def write_report(store, run_ids: list[int], out_root: Path, *, workers: int | None = None
                 ) -> Path:
    """Write the report of ``run_ids`` under ``out_root``; the path of its index.html.

    ``workers``: 1 writes most session files in a worker process beside this one, 0 all
    here, None (default) a worker when a core is spare (``report/batches.py``); the
    output is the same.
    Raises ConfigError when no run is given or the output folder cannot be written.
    """
    run_ids = list(dict.fromkeys(int(r) for r in run_ids))
    if not run_ids:
        raise ConfigError("no run to report on: give a run id, latest or label:NAME",
                          field="RUN")
    runs = [store.get_run(r) for r in run_ids]
    out = report_dir(out_root, run_ids)
    try:
        (out / SESSIONS_DIR).mkdir(parents=True, exist_ok=True)
        (out / RULES_DIR).mkdir(parents=True, exist_ok=True)
        (out / LISTS_DIR).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the report folder ({exc.strerror}): pass --out DIR "
                          "with a writable folder", path=str(out), field="--out") from None

    name_of = column_namer(run_ids)
    sessions = [dataclasses.replace(s, target=name_of(s)) for s in store.session_rows(run_ids)]
    files = {session_file(s.id) for s in sessions}
    with SessionFiles(store, run_ids, out, files, workers, sessions):
        # sessions/ is written by a worker process (report/batches.py) while this one
        # builds the index, the lists and the summaries
        tally = CallTally()
        page = build_index_page(runs, sessions, store.call_rows(run_ids),
                                read_figures(store, run_ids), tally)
        server = tuple(
            read_run_throughput(store, run, [s for s in sessions if s.run_id == run.id])
            for run in runs
        )
        lists = [item for run_id in run_ids for item in store.offered_tool_lists(run_id)]
        page = dataclasses.replace(page, tool_list_rows=tuple(
            (h[:12], str(len(tools)), str(n)) for h, tools, n in lists), drift=tuple(
            (name, str(k)) for name, k in tool_drift(lists).items()))
        page = dataclasses.replace(page, server=server, mcp_rows=tuple(
            (r.server, str(r.tools), str(r.calls), str(r.denied), str(r.schema_mismatches))
            for r in store.mcp_servers(run_ids)))
        for rule in RULES.values():
            _write(out / RULES_DIR / f"{rule.code}.html", render_rule(build_rule_page(rule)))
        _write_lists(out, page, sessions, tally)

        denials = dict(tally.denials)
        _write(out / "summary.md", summary_markdown(page))
        _write(out / "summary.json", summary_json(page, sessions, denials))
        denied: dict[int, list] = {}
        for call in tally.denied:
            denied.setdefault(call.session_id, []).append(call)
        (out / "junit.xml").write_bytes(junit_xml(sessions, denials, denied))
        index = out / "index.html"
        _write(index, render_index(page))
    return index


def _write_lists(out: Path, page, sessions, tally: CallTally) -> None:
    """``lists/``: failed sessions, one list per class found and one per scenario."""
    column_of = {s.id: s.target for s in sessions if s.status != "error"}
    lists = {"failed.html": failed_list(page.sessions, page.columns)}
    for code, listed in class_lists(tally.denied, column_of, page.columns).items():
        lists[class_file(code)] = listed
    scenarios = sorted({s.scenario for s in sessions})
    for n, (_, listed) in enumerate(scenario_lists(page.sessions, scenarios,
                                                   page.columns).items()):
        lists[scenario_file(n)] = listed
    for name, listed in lists.items():
        _write(out / LISTS_DIR / name, render_list(listed))
