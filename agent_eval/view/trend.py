"""The nightly trend: errors per 100 calls (with each run's clustered 95% interval) and
handshake completion per target over a label's last runs, as one inline SVG (no script).
Both panels have axes (a y axis with its scale, an x axis of runs labelled by date, with
the time where several runs share a day) and every point links to its run.  Every text
in it is escaped here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime

from markupsafe import Markup

from agent_eval.metrics.summary import GroupSummary
from agent_eval.report.charts import PALETTE, svg_text

W, H, LEFT, TOP, PANEL = 560, 180, 44, 22, 110
CHAR_W = 6.5
"""About how wide a tick label's character is (px): labels that would not fit their
spacing are slanted."""

Interval = tuple[float, float]


def run_stamps(runs: Sequence[tuple[int, datetime]]) -> list[tuple[int, str]]:
    """Each run's axis label, oldest first: ``11-28``, or ``11-28 21:04`` where several of
    the runs share that day (three identical "11-28" said nothing), ``11-28 21:04:07``
    where they share the minute too."""
    out = []
    for fmt in ("%m-%d", "%m-%d %H:%M", "%m-%d %H:%M:%S"):
        out.append([at.strftime(fmt) for _, at in runs])
    day, minute, second = out
    days, minutes = Counter(day), Counter(minute)
    return [(run_id, d if days[d] == 1 else m if minutes[m] == 1 else s)
            for (run_id, _), d, m, s in zip(runs, day, minute, second, strict=True)]


def trend_chart(label: str, points: list[dict[str, GroupSummary]],
                runs: list[tuple[int, str]] | None = None,
                intervals: Sequence[Mapping[str, Interval]] | None = None) -> Markup:
    """Two panels side by side: errors/100 (left) and handshake completion % (right); one
    line per target, one point per run (its figures per target), oldest left.  With
    ``runs`` (each point's run id and axis label, oldest first: :func:`run_stamps`) the x
    axis is labelled and every point is a link to its run's page; with ``intervals`` (per
    point, per target, the clustered 95% interval of errors/100) each error point carries
    its interval as a whisker and in its tooltip."""
    names = list(dict.fromkeys(n for p in points for n in p))
    colour = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}
    errors = {n: [(i, 100 * v.errors.k / v.calls) for i, p in enumerate(points)
                  if (v := p.get(n)) and v.calls] for n in names}
    handshake = {n: [(i, 100 * v.handshake.completed.k / v.handshake.sessions)
                     for i, p in enumerate(points) if (v := p.get(n)) and v.handshake.sessions]
                 for n in names}
    spans = [hi for per in intervals or () for _, hi in per.values()]
    top = _nice(max([y for line in errors.values() for _, y in line] + spans + [1.0]))
    width = 2 * (W // 2) + 10
    parts = [f'<svg class="chart trend" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{H + 20 + 16 * ((len(names) + 3) // 4)}" role="img" '
             f'aria-label="trend of {svg_text(label)}">',
             f'<title>Trend of “{svg_text(label)}” over its last {len(points)} runs</title>']
    parts += _panel(0, "errors/100 [clustered 95% CI]" if intervals else "errors/100", errors,
                    top, colour, len(points), runs, intervals)
    parts += _panel(W // 2 + 10, "handshake completed %", handshake, 100.0, colour, len(points),
                    runs)
    for i, name in enumerate(names):
        x, y = 8 + (i % 4) * 140, H + 14 + 16 * (i // 4)
        parts.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{colour[name]}"/>'
                     f'<text class="legend" x="{x + 14}" y="{y}">{svg_text(name)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _x_labels(xs: list[float], labels: list[str]) -> list[tuple[int, int]]:
    """Which runs' labels the x axis writes, and in which row (0 or 1): all of them in one
    row when they fit, else staggered in two, else the first, middle and last (the others
    are in each point's tooltip).  The ends are anchored inward, so no label runs past
    its panel; widths are estimated at :data:`CHAR_W` per character."""
    n = len(xs)

    def span(i: int) -> tuple[float, float]:
        w = CHAR_W * len(labels[i])
        if i == 0 and n > 1:
            return xs[i], xs[i] + w
        if i == n - 1 and n > 1:
            return xs[i] - w, xs[i]
        return xs[i] - w / 2, xs[i] + w / 2

    def fits(shown: list[int], rows: int) -> bool:
        ends: dict[int, float] = {}
        for k, i in enumerate(shown):
            lo, hi = span(i)
            if lo < ends.get(k % rows, -1e9) + 4:
                return False
            ends[k % rows] = hi
        return True

    for shown in (list(range(n)), sorted({0, (n - 1) // 2, n - 1})):
        for rows in (1, 2):
            if fits(shown, rows):
                return [(i, k % rows) for k, i in enumerate(shown)]
    return [(i, k % 2) for k, i in enumerate(sorted({0, n - 1}))]


def _nice(top: float) -> float:
    """The axis top: the next of 1, 2, 2.5, 5 × 10^k at or above ``top``."""
    step = 1.0
    while step * 10 < top:
        step *= 10
    while step > top * 10:
        step /= 10
    return next(m * step for m in (1, 2, 2.5, 5, 10) if m * step >= top)


def _panel(x0: int, title: str, lines: dict, top: float, colour: dict, n: int,
           runs: list[tuple[int, str]] | None = None,
           intervals: Sequence[Mapping[str, Interval]] | None = None) -> list[str]:
    inner = W // 2 - LEFT - 10
    left, bottom = x0 + LEFT, TOP + PANEL
    out = [f'<text x="{left}" y="14">{svg_text(title)}</text>',
           f'<line class="axis" stroke="#555" x1="{left}" y1="{TOP}" x2="{left}" '
           f'y2="{bottom}"/>',
           f'<line class="axis" stroke="#555" x1="{left}" y1="{bottom}" x2="{left + inner}" '
           f'y2="{bottom}"/>']
    for k in range(5):  # y ticks and grid at quarters of the scale
        v = top * k / 4
        y = bottom - PANEL * k / 4
        out.append(f'<text class="tick" x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">'
                   f'{v:g}</text>')
        if k:
            out.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{left + inner}" '
                       f'y2="{y:.1f}"/>')

    def px(i: int) -> float:
        return left + (inner * i / (n - 1) if n > 1 else inner / 2)

    def py(v: float) -> float:
        return bottom - PANEL * min(v, top) / top

    for name, points in lines.items():
        coords = [(px(i), py(v)) for i, v in points]
        if len(coords) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            out.append(f'<polyline fill="none" stroke="{colour[name]}" stroke-width="1.8" '
                       f'points="{path}"/>')
        for (x, y), (i, v) in zip(coords, points, strict=True):
            span = (intervals[i].get(name) if intervals else None)
            whisker, ci = "", ""
            if span is not None:
                lo, hi = span
                ci = f" [{lo:.1f}–{hi:.1f}]"
                whisker = (f'<line class="ci" x1="{x:.1f}" x2="{x:.1f}" y1="{py(lo):.1f}" '
                           f'y2="{py(hi):.1f}" stroke="{colour[name]}" stroke-width="1" '
                           f'opacity="0.6" pointer-events="none"/>')
            dot = (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour[name]}">'
                   f'<title>{svg_text(name)}: {v:.1f}{ci}')
            if runs:
                run_id, stamp = runs[i]
                out.append(f'<a class="point" href="/runs/{run_id}">{whisker}{dot} (run '
                           f'{run_id}, {svg_text(stamp)})</title></circle></a>')
            else:
                out.append(f"{whisker}{dot}</title></circle>")
    if runs:  # the x axis: every run's label if they fit (in two staggered rows at most)
        for i, row in _x_labels([px(i) for i in range(n)], [r[1] for r in runs]):
            anchor = "start" if i == 0 and n > 1 else "end" if i == n - 1 and n > 1 else "middle"
            out.append(f'<text class="tick x" x="{px(i):.1f}" y="{bottom + 12 + 14 * row}" '
                       f'text-anchor="{anchor}">{svg_text(runs[i][1])}</text>')
        out.append(f'<text class="tick" x="{left + inner}" y="{bottom + 40}" '
                   f'text-anchor="end">run (oldest left)</text>')
    return out
