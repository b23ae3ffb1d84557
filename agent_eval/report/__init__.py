"""The report: ``reports/<run>/`` with an HTML index, a page per session and per rule,
``summary.md``, ``summary.json`` and ``junit.xml``.

    >>> write_report(store, [run_id], Path("reports"))          # doctest: +SKIP
    PosixPath('reports/7/index.html')

Self-contained (inline CSS and SVG, no script, no CDN; opens from disk), every string the
model wrote escaped.  Module map: ``pages``
(session and rule page contexts), ``index`` (the index context), ``throughput`` (the
index's server-throughput section, from imported server logs), ``breakdown`` (errors
by scenario and by tag), ``agreement`` (our verdicts against the source harness's own,
for imports), ``charts`` (SVG),
``render`` (jinja2), ``summary`` (md / json / junit), ``writing`` (files on disk).
"""

from agent_eval.report.writing import report_dir, write_report

__all__ = ["report_dir", "write_report"]
