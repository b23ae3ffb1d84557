"""Inline SVG charts, drawn in Python so the report needs no script and no CDN.

Every label (target names come from the operator's config or an imported file; codes from
the store) passes through :func:`svg_text` before it is placed in the SVG, and the result is
returned as ``Markup`` only after that, so the template can inline it without autoescape
doubling the entities.  ``svg_text`` also shows each control character as its visible
symbol (ESC as ␛, NUL as ␀), since XML has no way to hold them and a terminal colour code
in a target name would otherwise make the SVG ill-formed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from html import escape

from markupsafe import Markup

from agent_eval.metrics import GroupSummary
from agent_eval.metrics.clustered import ClusteredRate
from agent_eval.policy import get_rule

PALETTE = (
    "#d62728", "#ff7f0e", "#bcbd22", "#2ca02c", "#17becf", "#1f77b4", "#9467bd",
    "#e377c2", "#8c564b", "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896",
    "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#393b79",
)  # fmt: skip
_SYMBOLS = {c: 0x2400 + c for c in range(0x20)} | {0x7F: 0x2421} \
    | {c: 0xFFFD for c in range(0x80, 0xA0)} | {0xFFFE: 0xFFFD, 0xFFFF: 0xFFFD}
_SURROGATE = re.compile("[\ud800-\udfff]")


def svg_text(text: str) -> str:
    """``text`` escaped for an SVG (or any XML) text or attribute: markup escaped, each C0
    control and DEL shown as its Control Pictures symbol (U+2400 block: ESC is ␛), C1
    controls, non-characters and lone surrogates as U+FFFD."""
    return escape(_SURROGATE.sub("\ufffd", text.translate(_SYMBOLS)))


LABEL_W = 190
BAR_W = 520
ROW_H = 26


def class_chart(summaries: dict[str, GroupSummary]) -> Markup:
    """One stacked horizontal bar per target: its errors per 100 calls, split by class.

    Segments are in precedence order, so the same class has the same colour and place in
    every bar; a legend names the classes.  Each segment has a ``<title>`` tooltip.
    """
    codes = sorted(
        {code for s in summaries.values() for code, r in s.classes.items() if r.k},
        key=lambda c: list(_all_codes(summaries)).index(c),
    )
    colour = {code: PALETTE[i % len(PALETTE)] for i, code in enumerate(codes)}
    top = max((s.errors.per100 or 0.0 for s in summaries.values()), default=0.0)
    scale = _nice_max(top)
    rows = len(summaries)
    legend_rows = (len(codes) + 2) // 3
    height = 30 + rows * ROW_H + 24 + legend_rows * 18 + 10
    width = LABEL_W + BAR_W + 70
    parts = [_open(width, height, "Errors per 100 tool calls by failure class, per target")]
    parts.append(_axis(scale, 30 + rows * ROW_H))
    for i, (name, s) in enumerate(summaries.items()):
        y = 30 + i * ROW_H
        parts.append(_label(name, y + 16))
        x: float = LABEL_W
        for code in codes:
            rate = s.classes.get(code)
            if rate is None or not rate.k or rate.per100 is None:
                continue
            w = BAR_W * rate.per100 / scale
            tip = f"{name}: {code} {_rule_name(code)} {rate.per100:.2f} per 100 ({rate.k}/{rate.n})"
            parts.append(
                f'<rect x="{x:.1f}" y="{y + 4}" width="{w:.1f}" height="{ROW_H - 8}" '
                f'fill="{colour[code]}"><title>{svg_text(tip)}</title></rect>'
            )
            x += w
        total = s.errors.per100
        parts.append(
            f'<text x="{x + 6:.1f}" y="{y + 17}" class="num">'
            f'{"–" if total is None else f"{total:.2f}"}</text>'
        )
    legend_y = 30 + rows * ROW_H + 30
    for j, code in enumerate(codes):
        lx = LABEL_W + (j % 3) * 180 - 120
        ly = legend_y + (j // 3) * 18
        parts.append(
            f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{colour[code]}"/>'
            f'<text x="{lx + 16}" y="{ly}" class="legend">{svg_text(code)} '
            f"{svg_text(_rule_name(code))}</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def error_chart(summaries: dict[str, GroupSummary],
                clustered: Mapping[str, ClusteredRate] | None = None) -> Markup:
    """Errors per 100 tool calls per target: a dot with its clustered 95% interval
    (``clustered``: sessions as clusters, the one gate and compare decide on) as whiskers,
    and Wilson's interval on calls as a thin grey line under it, as detail (it treats a
    session's calls as independent, so it is too narrow).  Without ``clustered``, or for a
    target with a single session (no clustered interval), Wilson's whiskers alone."""
    clustered = clustered or {}
    top = max((max(s.errors.hi100 or 0.0, _hi(clustered.get(name)))
               for name, s in summaries.items()), default=0.0)
    scale = _nice_max(top)
    rows = len(summaries)
    height = 30 + rows * ROW_H + 24
    width = LABEL_W + BAR_W + 70
    title = ("Errors per 100 tool calls with clustered 95% intervals (sessions as clusters; "
             "grey: Wilson on calls)" if clustered else
             "Errors per 100 tool calls with Wilson 95% intervals")
    parts = [_open(width, height, title)]
    parts.append(_axis(scale, 30 + rows * ROW_H))
    for i, (name, s) in enumerate(summaries.items()):
        y = 30 + i * ROW_H + ROW_H // 2
        parts.append(_label(name, y + 4))
        r = s.errors
        if r.per100 is None or r.lo100 is None or r.hi100 is None:  # all or none: calls
            parts.append(f'<text x="{LABEL_W + 4}" y="{y + 4}" class="num">no calls</text>')
            continue

        def px(v: float) -> float:
            return LABEL_W + BAR_W * v / scale

        c = clustered.get(name)
        lo, hi, which = r.lo100, r.hi100, "Wilson, calls"
        detail = ""
        if c is not None and c.lo100 is not None and c.hi100 is not None:
            lo, hi, which = c.lo100, c.hi100, "clustered, sessions"
            detail = (f'<line x1="{px(r.lo100):.1f}" x2="{px(r.hi100):.1f}" y1="{y + 8}" '
                      f'y2="{y + 8}" class="detail" stroke="#9e9e9e" stroke-width="1"/>')
        tip = (f"{name}: {r.per100:.2f} [{lo:.1f}–{hi:.1f}] per 100 ({which}; {r.k}/{r.n})"
               + (f", Wilson on calls [{r.lo100:.1f}–{r.hi100:.1f}]" if detail else ""))
        parts.append(
            f'<g class="rate" data-lo="{lo:.2f}" data-hi="{hi:.2f}">'
            f'<title>{svg_text(tip)}</title>'
            f'<line x1="{px(lo):.1f}" x2="{px(hi):.1f}" y1="{y}" y2="{y}" '
            f'class="whisker"/>'
            f'<line x1="{px(lo):.1f}" x2="{px(lo):.1f}" y1="{y - 6}" y2="{y + 6}" '
            f'class="whisker"/>'
            f'<line x1="{px(hi):.1f}" x2="{px(hi):.1f}" y1="{y - 6}" y2="{y + 6}" '
            f'class="whisker"/>{detail}'
            f'<circle cx="{px(r.per100):.1f}" cy="{y}" r="5" class="dot"/></g>'
            f'<text x="{px(max(hi, r.hi100)) + 8:.1f}" y="{y + 4}" class="num">'
            f'{r.per100:.2f}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _hi(rate: ClusteredRate | None) -> float:
    return 0.0 if rate is None or rate.hi100 is None else rate.hi100


def change_chart(changes: list[tuple[str, float, float, float]]) -> Markup:
    """The change B − A per row (``(label, diff, lo, hi)`` per 100 calls): a dot with its
    95% interval around a zero line; red where the interval lies above zero (worse),
    green below (better), grey where it crosses zero."""
    if not changes:
        return Markup("")
    scale = _nice_max(max(max(abs(lo), abs(hi)) for _, _, lo, hi in changes))
    height = 30 + len(changes) * ROW_H + 10
    width = LABEL_W + BAR_W + 70
    parts = [_open(width, height, "Change B − A in errors per 100 tool calls, 95% intervals")]

    def px(v: float) -> float:
        return LABEL_W + BAR_W * (v + scale) / (2 * scale)

    for k in range(5):
        v = -scale + 2 * scale * k / 4
        parts.append(f'<line x1="{px(v):.1f}" x2="{px(v):.1f}" y1="22" y2="{height - 10}" '
                     f'class="grid"/><text x="{px(v):.1f}" y="16" text-anchor="middle" '
                     f'class="tick">{v:+g}</text>')
    for i, (label, diff, lo, hi) in enumerate(changes):
        y = 30 + i * ROW_H + ROW_H // 2
        colour = "#c62828" if lo > 0 else "#2e7d32" if hi < 0 else "#7f7f7f"
        tip = f"{label}: {diff:+.2f} [{lo:+.1f}, {hi:+.1f}] per 100"
        parts.append(_label(label, y + 4))
        parts.append(f'<line x1="{px(lo):.1f}" x2="{px(hi):.1f}" y1="{y}" y2="{y}" '
                     f'stroke="{colour}" stroke-width="2"/>'
                     f'<circle cx="{px(diff):.1f}" cy="{y}" r="4" fill="{colour}">'
                     f'<title>{svg_text(tip)}</title></circle>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _all_codes(summaries: dict[str, GroupSummary]) -> dict[str, None]:
    order: dict[str, None] = {}
    for s in summaries.values():
        for code in s.classes:  # each summary's classes are in precedence order already
            order.setdefault(code, None)
    return order


def _rule_name(code: str) -> str:
    rule = get_rule(code)
    return rule.name if rule else ""


def _open(width: int, height: int, title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{svg_text(title)}"><title>{svg_text(title)}</title>'
    )


def _label(name: str, y: int) -> str:
    shown = name if len(name) <= 28 else name[:27] + "…"
    return f'<text x="{LABEL_W - 8}" y="{y}" text-anchor="end" class="label">{svg_text(shown)}</text>'


def _axis(scale: float, bottom: int) -> str:
    ticks = []
    for k in range(5):
        v = scale * k / 4
        x = LABEL_W + BAR_W * k / 4
        ticks.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="22" y2="{bottom}" class="grid"/>'
            f'<text x="{x:.1f}" y="16" text-anchor="middle" class="tick">{v:g}</text>'
        )
    return "".join(ticks)


def _nice_max(value: float) -> float:
    """A round axis end at or above ``value`` (5, 10, 20, 25, 50, 100...)."""
    for step in (1, 2, 4, 5, 10, 20, 25, 40, 50, 100):
        if value <= step:
            return float(step)
    return 100.0
