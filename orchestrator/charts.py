"""Inline SVG charts for the static report, generated here so the report needs no JS, no library
and no network: grouped horizontal bars (with standard-error whiskers) and a grouped histogram.

Every chart is one well-formed ``<svg>`` element (parseable as XML) carrying
``class="chart"``, a ``data-chart`` name, a ``<title>`` and a legend (wrapped into rows when the
series' names are long). Each has a viewBox, so the report's CSS scales it down to its container.

A bar chart's value axis (`axis`) is one of three kinds: ``percent`` (fractions shown as %),
``seconds`` (s, then minutes ``m`` from 10 minutes, hours ``h`` from 3 hours) or ``number`` (k, M, G
from a thousand, a million, a billion). Its ticks are 1, 2, 2.5 or 5 x 10^n apart and each label
carries the decimals its step needs: up to 0.3 s reads ``0s 0.1s 0.2s 0.3s`` and up to 7 200 s
``0m 50m 100m 150m``, never ``0s`` at every tick.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")
FONT = 'font-family="sans-serif" font-size="12"'
CHAR_W = 7.0  # approximate width of a 12px sans-serif character
Value = tuple[float | None, float | None]  # (mean, standard error)


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def nice_scale(top: float, intervals: int = 4) -> tuple[float, float]:
    """(axis maximum, tick step) for values up to ``top``: the smallest step of 1, 2, 2.5 or 5 x 10^n that
    covers top in at most ``intervals`` steps, and the first multiple of it >= top ((1, 0.25) for nothing)."""
    if top <= 0 or not math.isfinite(top):
        return 1.0, 0.25
    base = 10 ** math.floor(math.log10(top / intervals))
    step = next(m * base for m in (1, 2, 2.5, 5, 10) if m * base * intervals >= top * (1 - 1e-9))
    return max(1, math.ceil(top / step * (1 - 1e-9))) * step, step


def decimals(step: float) -> int:
    """Digits after the point that print every multiple of ``step`` exactly (20 -> 0, 2.5 -> 1, 0.025 -> 3)."""
    for d in range(10):
        if abs(round(step, d) - step) <= 1e-9 * max(1.0, abs(step)):
            return d
    return 10


def short(value: float) -> str:
    """A value as a bar label: two significant digits below 10 (0.3, 0.034, 2.5), whole numbers above (1,234)."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    return f"{value:.2g}" if abs(value) < 10 else f"{value:,.0f}"


KINDS = ("percent", "seconds", "number")


@dataclass(frozen=True)
class Axis:
    """A value axis: its maximum, its ticks (value, label) and how a value on it reads."""

    kind: str
    vmax: float
    ticks: tuple[tuple[float, str], ...]
    unit: str = ""
    div: float = 1.0

    def label(self, value: float) -> str:
        """A value in the axis's unit (a bar's label): 0.3 -> 0.3s, 0.29 -> 29% (percent), 4000 -> 67m."""
        return short(value / self.div) + self.unit


def _unit(kind: str, top: float) -> tuple[str, float]:
    if kind == "seconds":
        return ("s", 1.0) if top < 600 else ("m", 60.0) if top < 3 * 3600 else ("h", 3600.0)
    if kind == "number":
        for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if top >= div:
                return unit, div
    return "", 1.0


def axis(top: float, kind: str = "number", max_value: float | None = None) -> Axis:
    """The axis for values up to ``top`` (``max_value`` fixes its end, e.g. 1.0 for 100 %)."""
    if kind not in KINDS:
        raise ValueError(f"axis kind {kind!r}: one of {', '.join(KINDS)}")
    end = max_value if max_value is not None and max_value > 0 else top
    unit, div = ("%", 0.01) if kind == "percent" else _unit(kind, end)
    vmax, step = nice_scale(end / div)
    ticks = tuple((i * step * div, f"{i * step:,.{decimals(step) if i else 0}f}{unit}")
                  for i in range(round(vmax / step) + 1))
    return Axis(kind, vmax * div, ticks, unit, div)


def _a(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _svg(name: str, title: str, width: float, height: float, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{escape(name)}" role="img" '
            f'width="{_a(width)}" height="{_a(height)}" viewBox="0 0 {_a(width)} {_a(height)}" '
            f'aria-label="{escape(title)}"><title>{escape(title)}</title>' + "".join(body) + "</svg>")


LEGEND_ROW = 18.0
TALL = 600.0  # px of bars beyond which a bar chart shows its scale above the bars as well as below


def _legend_item_width(name: str) -> float:
    return 30 + CHAR_W * len(name)


def _legend(series: Sequence[str], x0: float, y: float, width: float,
            colors: Sequence[str] | None = None) -> tuple[list[str], float]:
    """Swatch + name per series, left to right, wrapping into rows `width` wide; returns (elements, height)."""
    out, x, rows = [], x0, 1
    for i, name in enumerate(series):
        item = _legend_item_width(name)
        if x > x0 and x + item - 20 > x0 + width:
            x, y, rows = x0, y + LEGEND_ROW, rows + 1
        out.append(f'<rect x="{_a(x)}" y="{_a(y)}" width="10" height="10" fill="{colors[i] if colors else color(i)}"/>'
                   f'<text x="{_a(x + 14)}" y="{_a(y + 9)}" {FONT}>{escape(name)}</text>')
        x += item
    return out, rows * LEGEND_ROW


def empty(name: str, title: str, message: str = "no trials recorded") -> str:
    return _svg(name, title, 360, 40, [f'<text x="10" y="25" {FONT} fill="#666">{escape(message)}</text>'])


def hbars(name: str, title: str, categories: Sequence[str], series: Sequence[str],
          values: Mapping[tuple[str, str], Value], kind: str = "number", max_value: float | None = None,
          caption: str = "", colors: Mapping[str, str] | None = None) -> str:
    """Grouped horizontal bars: one group per category, one bar per series that has a value there (a category
    with none reads n/a), whiskers at mean ± se. ``kind``: the value axis (KINDS); ``max_value`` fixes its end;
    ``caption`` is written under it; ``colors``: a series' colour (the same agent in the same colour in every
    chart), else the palette in order."""
    if not categories or not series:
        return empty(name, title)
    fill = [(colors or {}).get(ser) or color(i) for i, ser in enumerate(series)]
    top = max(((v[0] or 0.0) + (v[1] or 0.0) for v in values.values()), default=0.0)
    scale_axis = axis(top, kind, max_value)
    vmax, label = scale_axis.vmax, scale_axis.label
    left, plot_w, bar_h = 12 + CHAR_W * max(map(len, categories)), 420.0, 14.0
    widest = max(_legend_item_width(ser) for ser in series)
    width = max(left + plot_w + 80, 12 + widest + 10)
    # The legend lines up with the plot when its longest name fits there, else it starts at the left edge.
    legend_x = left if left + widest <= width - 10 else 12.0
    body, legend_rows_h = _legend(series, legend_x, 6, width - legend_x - 10, fill)
    shown = {cat: [si for si, ser in enumerate(series) if values.get((cat, ser), (None, None))[0] is not None]
             for cat in categories}
    group_h = {cat: max(1, len(shown[cat])) * (bar_h + 2) + 12 for cat in categories}
    plot_h = sum(group_h.values())
    # A plot taller than a window repeats its scale above the bars, where the reader starts.
    scale_on_top = plot_h > TALL
    legend_h = legend_rows_h + 10 + (16 if scale_on_top else 0)
    height = legend_h + plot_h + 36
    scale = plot_w / vmax
    plot_bottom = legend_h + plot_h
    for tick, text in scale_axis.ticks:
        x = left + tick * scale
        body.append(f'<line x1="{_a(x)}" y1="{_a(legend_h)}" x2="{_a(x)}" y2="{_a(plot_bottom)}" stroke="#ddd"/>'
                    f'<text class="tick" x="{_a(x)}" y="{_a(plot_bottom + 16)}" {FONT} text-anchor="middle">'
                    f"{escape(text)}</text>")
        if scale_on_top:
            body.append(f'<text class="tick" x="{_a(x)}" y="{_a(legend_h - 4)}" {FONT} text-anchor="middle">'
                        f"{escape(text)}</text>")
    body.append(f'<text x="{_a(left + plot_w / 2)}" y="{_a(height - 4)}" {FONT} text-anchor="middle">'
                f"{escape(caption)}</text>")
    y0 = legend_h + 6
    for cat in categories:
        body.append(f'<text x="{_a(left - 6)}" y="{_a(y0 + group_h[cat] / 2 - 4)}" {FONT} text-anchor="end">'
                    f"{escape(cat)}</text>")
        if not shown[cat]:
            body.append(f'<text x="{_a(left + 4)}" y="{_a(y0 + 11)}" {FONT} fill="#999">n/a</text>')
        for row, si in enumerate(shown[cat]):
            ser = series[si]
            mean, se = values[cat, ser]
            if mean is None:  # not in `shown`
                continue
            y = y0 + row * (bar_h + 2)
            w = max(mean * scale, 0.0)
            body.append(f'<rect class="bar" x="{_a(left)}" y="{_a(y)}" width="{_a(w)}" height="{_a(bar_h)}" '
                        f'fill="{fill[si]}"><title>{escape(f"{cat} / {ser}: {label(mean)}")}</title></rect>')
            if w < 2:  # a zero (or nearly) still shows whose it is
                body.append(f'<rect class="zero" x="{_a(left)}" y="{_a(y)}" width="2" height="{_a(bar_h)}" '
                            f'fill="{fill[si]}"/>')
            end = w
            if se:
                lo, hi = left + max(mean - se, 0.0) * scale, left + min(mean + se, vmax) * scale
                mid = y + bar_h / 2
                body.append(f'<line class="se" x1="{_a(lo)}" y1="{_a(mid)}" x2="{_a(hi)}" y2="{_a(mid)}" '
                            f'stroke="#333"/>')
                end = max(end, hi - left)
            body.append(f'<text x="{_a(left + end + 4)}" y="{_a(y + 11)}" {FONT}>{escape(label(mean))}</text>')
        y0 += group_h[cat]
    return _svg(name, title, width, height, body)


def histogram(name: str, title: str, samples: Mapping[str, Sequence[float]], bins: int = 10,
              lo: float = 0.0, hi: float = 1.0, caption: str = "") -> str:
    """Grouped vertical histogram of each series' samples over [lo, hi] (hi falls in the last bin)."""
    if not any(samples.values()):
        return empty(name, title)
    counts = {s: [0] * bins for s in samples}
    for s, xs in samples.items():
        for x in xs:
            counts[s][min(bins - 1, max(0, math.floor(round((x - lo) / (hi - lo) * bins, 9))))] += 1  # 0.3 -> bin 3
    step = max(1, math.ceil(max(max(c) for c in counts.values()) / 4))
    cmax = 4 * step  # four whole-number gridline steps
    left, plot_h, bar_w = 44.0, 200.0, 12.0
    bin_w = len(samples) * bar_w + 8
    width = max(left + bins * bin_w + 20, left + max(map(_legend_item_width, samples)) + 10)
    body, legend_rows_h = _legend(list(samples), left, 6, width - left - 10)
    top = legend_rows_h + 10
    height = top + plot_h + 44
    bottom = top + plot_h
    for i in range(5):
        tick = cmax * i / 4
        y = bottom - tick / cmax * plot_h
        body.append(f'<line x1="{_a(left)}" y1="{_a(y)}" x2="{_a(left + bins * bin_w)}" y2="{_a(y)}" stroke="#ddd"/>'
                    f'<text x="{_a(left - 4)}" y="{_a(y + 4)}" {FONT} text-anchor="end">{_a(tick)}</text>')
    for b in range(bins):
        x0 = left + b * bin_w + 4
        edge = lo + (hi - lo) * b / bins
        body.append(f'<text x="{_a(x0 - 4)}" y="{_a(bottom + 14)}" font-family="sans-serif" '
                    f'font-size="10" text-anchor="middle">{edge:.1f}</text>')
        for si, s in enumerate(samples):
            h = counts[s][b] / cmax * plot_h
            body.append(f'<rect class="bar" x="{_a(x0 + si * bar_w)}" y="{_a(bottom - h)}" width="{_a(bar_w - 1)}" '
                        f'height="{_a(h)}" fill="{color(si)}"><title>{escape(s)} '
                        f"[{edge:.1f}, {edge + (hi - lo) / bins:.1f}): {counts[s][b]}</title></rect>")
    right = left + bins * bin_w
    body.append(f'<text x="{_a(right)}" y="{_a(bottom + 14)}" font-family="sans-serif" '
                f'font-size="10" text-anchor="middle">{hi:.1f}</text>'
                f'<line x1="{_a(left)}" y1="{_a(bottom)}" x2="{_a(right)}" y2="{_a(bottom)}" stroke="#333"/>'
                f'<text x="{_a(left + bins * bin_w / 2)}" y="{_a(height - 6)}" {FONT} text-anchor="middle">'
                f"{escape(caption)}</text>")
    return _svg(name, title, width, height, body)
