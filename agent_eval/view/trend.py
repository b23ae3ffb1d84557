"""The nightly trend: errors per 100 calls and handshake completion per target over a
label's last runs, as one inline SVG (no script).  Every text in it is escaped here."""

from __future__ import annotations

from markupsafe import Markup

from agent_eval.metrics.summary import GroupSummary
from agent_eval.report.charts import PALETTE, svg_text

W, H, LEFT, TOP, PANEL = 560, 150, 44, 22, 110


def trend_chart(label: str, points: list[dict[str, GroupSummary]],
                runs: list[tuple[int, str]] | None = None) -> Markup:
    """Two panels side by side: errors/100 (left) and handshake completion % (right); one
    line per target, one point per run (its figures per target), oldest left.  With
    ``runs`` (each point's run id and date, oldest first) the x axis is dated and every
    point is a link to its run's page."""
    names = list(dict.fromkeys(n for p in points for n in p))
    colour = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}
    errors = {n: [(i, 100 * v.errors.k / v.calls) for i, p in enumerate(points)
                  if (v := p.get(n)) and v.calls] for n in names}
    handshake = {n: [(i, 100 * v.handshake.completed.k / v.handshake.sessions)
                     for i, p in enumerate(points) if (v := p.get(n)) and v.handshake.sessions]
                 for n in names}
    top = max([y for line in errors.values() for _, y in line] + [1.0])
    width = 2 * (W // 2) + 10
    parts = [f'<svg class="chart trend" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{H + 20 + 16 * ((len(names) + 3) // 4)}" role="img" '
             f'aria-label="trend of {svg_text(label)}">',
             f'<title>Trend of “{svg_text(label)}” over its last {len(points)} runs</title>']
    parts += _panel(0, "errors/100", errors, top, colour, len(points), runs)
    parts += _panel(W // 2 + 10, "handshake completed %", handshake, 100.0, colour, len(points),
                    runs)
    for i, name in enumerate(names):
        x, y = 8 + (i % 4) * 140, H + 14 + 16 * (i // 4)
        parts.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{colour[name]}"/>'
                     f'<text class="legend" x="{x + 14}" y="{y}">{svg_text(name)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _panel(x0: int, title: str, lines: dict, top: float, colour: dict, n: int,
           runs: list[tuple[int, str]] | None = None) -> list[str]:
    inner = W // 2 - LEFT - 10
    out = [f'<text x="{x0 + LEFT}" y="14">{svg_text(title)}</text>',
           f'<line class="grid" x1="{x0 + LEFT}" y1="{TOP + PANEL}" x2="{x0 + LEFT + inner}" '
           f'y2="{TOP + PANEL}"/>',
           f'<text class="tick" x="{x0 + LEFT - 4}" y="{TOP + 4}" text-anchor="end">'
           f'{top:.0f}</text>',
           f'<text class="tick" x="{x0 + LEFT - 4}" y="{TOP + PANEL}" text-anchor="end">0</text>']

    def xy(i: int, v: float) -> tuple[float, float]:
        x = x0 + LEFT + (inner * i / (n - 1) if n > 1 else inner / 2)
        return x, TOP + PANEL - PANEL * min(v, top) / top

    for name, points in lines.items():
        coords = [xy(i, v) for i, v in points]
        if len(coords) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            out.append(f'<polyline fill="none" stroke="{colour[name]}" stroke-width="1.8" '
                       f'points="{path}"/>')
        for (x, y), (i, v) in zip(coords, points, strict=True):
            dot = (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour[name]}">'
                   f'<title>{svg_text(name)}: {v:.1f}')
            if runs:
                run_id, date = runs[i]
                out.append(f'<a class="point" href="/runs/{run_id}">{dot} (run {run_id}, '
                           f'{svg_text(date)})</title></circle></a>')
            else:
                out.append(f"{dot}</title></circle>")
    if runs:  # dates under the first, middle and last points
        for i in sorted({0, (n - 1) // 2, n - 1}):
            x = x0 + LEFT + (inner * i / (n - 1) if n > 1 else inner / 2)
            out.append(f'<text class="tick" x="{x:.1f}" y="{TOP + PANEL + 12}" '
                       f'text-anchor="middle">{svg_text(runs[i][1])}</text>')
    return out
