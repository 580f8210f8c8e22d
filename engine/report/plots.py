"""The report's plots as hand-written SVG strings (no plotting library, nothing to load at view
time): scatter plots of accuracy against a cost, grouped bars of accuracy by question group, and
HydraRAG's stage-recall funnel. Every text is escaped; numbers are formatted here.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
           "#e377c2", "#7f7f7f", "#bcbd22")
MARKERS = ("circle", "square", "diamond", "triangle")  # one per dataset
WIDTH, HEIGHT = 420, 280
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 28, 44


@dataclass
class Point:
    x: float
    y: float
    method: int  # colour
    dataset: int  # marker
    label: str  # the tooltip


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _nice_max(value: float) -> float:
    """A round axis end at or above `value`."""
    if value <= 0:
        return 1.0
    step = 10 ** len(str(int(value))) / 10 if value >= 1 else 0.1
    while step * 10 < value:
        step *= 10
    for factor in (1, 2, 2.5, 5, 10):
        if step * factor >= value:
            return step * factor
    return step * 10


def _number(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:g}" if value >= 10 else f"{value:.2g}"


def _frame(title: str, x_label: str, y_label: str, x_max: float | None, y_max: float) -> list[str]:
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    parts = [f'<svg class="plot" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
             f'role="img" aria-label="{escape(title)}">',
             f'<text x="{WIDTH / 2}" y="16" class="pt">{escape(title)}</text>',
             f'<rect x="{LEFT}" y="{TOP}" width="{inner_w}" height="{inner_h}" class="pf"/>']
    for k in range(5):
        y = TOP + inner_h - inner_h * k / 4
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + inner_w}" y1="{y:.1f}" y2="{y:.1f}" class="pg"/>')
        parts.append(f'<text x="{LEFT - 4}" y="{y + 4:.1f}" class="py">{escape(_number(y_max * k / 4))}</text>')
        if x_max is not None:
            x = LEFT + inner_w * k / 4
            parts.append(f'<text x="{x:.1f}" y="{TOP + inner_h + 14}" class="px">{escape(_number(x_max * k / 4))}</text>')
    parts.append(f'<text x="{LEFT + inner_w / 2}" y="{HEIGHT - 6}" class="pl">{escape(x_label)}</text>')
    parts.append(f'<text transform="translate(12 {TOP + inner_h / 2}) rotate(-90)" class="pl">{escape(y_label)}</text>')
    return parts


def _marker(shape: str, x: float, y: float, fill: str, tip: str) -> str:
    title = f"<title>{escape(tip)}</title>"
    if shape == "square":
        return f'<rect class="pm" x="{x - 5:.1f}" y="{y - 5:.1f}" width="10" height="10" fill="{fill}">{title}</rect>'
    if shape == "diamond":
        return (f'<path class="pm" d="M{x:.1f} {y - 6:.1f}L{x + 6:.1f} {y:.1f}L{x:.1f} {y + 6:.1f}'
                f'L{x - 6:.1f} {y:.1f}Z" fill="{fill}">{title}</path>')
    if shape == "triangle":
        return (f'<path class="pm" d="M{x:.1f} {y - 6:.1f}L{x + 6:.1f} {y + 5:.1f}L{x - 6:.1f} {y + 5:.1f}Z" '
                f'fill="{fill}">{title}</path>')
    return f'<circle class="pm" cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{fill}">{title}</circle>'


def scatter(title: str, x_label: str, points: list[Point]) -> str:
    """Accuracy (y, 0..1 shown in %) against a cost (x), one marker per method and dataset."""
    x_max = _nice_max(max((p.x for p in points), default=1.0))
    parts = _frame(title, x_label, "Hits@1 (%)", x_max, 100)
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    for p in points:
        x = LEFT + inner_w * (p.x / x_max)
        y = TOP + inner_h * (1 - p.y)
        parts.append(_marker(MARKERS[p.dataset % len(MARKERS)], x, y, colour(p.method), p.label))
    parts.append("</svg>")
    return "".join(parts)


def grouped_bars(title: str, groups: list[str], series: list[tuple[str, int, list[float | None]]]) -> str:
    """Hits@1 per group value (x) for each series (name, colour index, one value per group)."""
    parts = _frame(title, "", "Hits@1 (%)", None, 100)
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = inner_w / max(len(groups), 1)
    bar = slot * 0.8 / max(len(series), 1)
    for g, group in enumerate(groups):
        x0 = LEFT + slot * g + slot * 0.1
        parts.append(f'<text x="{x0 + slot * 0.4:.1f}" y="{TOP + inner_h + 14}" class="px">{escape(group)}</text>')
        for s, (name, colour_index, values) in enumerate(series):
            value = values[g]
            if value is None:
                continue
            h = inner_h * value
            parts.append(f'<rect class="pb" x="{x0 + bar * s:.1f}" y="{TOP + inner_h - h:.1f}" '
                         f'width="{max(bar - 1, 1):.1f}" height="{h:.1f}" fill="{colour(colour_index)}">'
                         f'<title>{escape(f"{name}, {group}: {100 * value:.1f}%")}</title></rect>')
    parts.append("</svg>")
    return "".join(parts)


def funnel(title: str, stages: list[tuple[str, float | None]], n: int) -> str:
    """Horizontal bars: the share of questions whose gold answer reached each stage."""
    row = 30
    height = TOP + row * len(stages) + 30
    label_w, bar_w = 215, WIDTH - 215 - 50
    parts = [f'<svg class="plot" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
             f'role="img" aria-label="{escape(title)}">',
             f'<text x="{WIDTH / 2}" y="16" class="pt">{escape(title)}</text>']
    for k, (label, share) in enumerate(stages):
        y = TOP + row * k
        parts.append(f'<text x="{label_w - 6}" y="{y + 17}" class="py">{escape(label)}</text>')
        if share is None:
            continue
        w = bar_w * share
        parts.append(f'<rect class="pb" x="{label_w}" y="{y + 4}" width="{w:.1f}" height="{row - 8}" fill="{colour(k)}">'
                     f'<title>{escape(f"{label}: {100 * share:.1f}% of {n}")}</title></rect>')
        parts.append(f'<text x="{label_w + w + 4:.1f}" y="{y + 17}" class="pv">{100 * share:.1f}%</text>')
    parts.append(f'<text x="{WIDTH / 2}" y="{height - 8}" class="pl">{n} questions with gold answers</text>')
    parts.append("</svg>")
    return "".join(parts)


def legend(methods: list[str], datasets: list[str]) -> str:
    """The colours of the methods and the markers of the datasets, as HTML."""
    items = [f'<span class="lg"><i style="background:{colour(i)}"></i>{escape(m)}</span>'
             for i, m in enumerate(methods)]
    shapes = {"circle": "●", "square": "■", "diamond": "◆", "triangle": "▲"}
    items += [f'<span class="lg">{shapes[MARKERS[i % len(MARKERS)]]} {escape(d)}</span>'
              for i, d in enumerate(datasets)]
    return '<div class="legend">' + "".join(items) + "</div>"
