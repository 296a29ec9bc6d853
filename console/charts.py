"""Small server-side SVG bar charts (no JavaScript, no library).

Every chart is an ``<svg role="img">`` with a ``<title>`` and a ``<desc>``, text labels on its
axes, a legend for stacked series, and a ``<title>`` per bar (shown as a tooltip). Colours come
from CSS classes (``static/css/console.css``), so light and dark themes apply. Labels are
escaped; the result is safe to insert in a template.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH = 720  # viewBox width; pick it near the shown width so text keeps its size
HEIGHT = 260
LEFT = 44
RIGHT = 12
TOP = 34
BOTTOM = 44
MAX_X_LABELS = 10


@dataclass(frozen=True)
class Series:
    key: str
    label: str


def nice_ceiling(value: int) -> int:
    """The smallest of 1, 2, 5 x 10^k at or above ``value`` (at least 1)."""
    if value <= 1:
        return 1
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _frame(
    *, chart_id: str, title: str, description: str, body: list[str], width: int
) -> SafeString:
    head = (
        f'<svg class="chart" id="{escape(chart_id)}" role="img" '
        f'aria-labelledby="{escape(chart_id)}-title {escape(chart_id)}-desc" '
        f'viewBox="0 0 {width} {HEIGHT}" preserveAspectRatio="xMidYMid meet" '
        f'xmlns="http://www.w3.org/2000/svg">'
        f'<title id="{escape(chart_id)}-title">{escape(title)}</title>'
        f'<desc id="{escape(chart_id)}-desc">{escape(description)}</desc>'
    )
    return mark_safe(head + "".join(body) + "</svg>")  # noqa: S308 - every text is escaped


def _axes(*, top_value: int, unit: str, width: int) -> list[str]:
    plot_height = HEIGHT - TOP - BOTTOM
    parts = []
    for fraction in (0, 0.5, 1):
        y = TOP + plot_height * (1 - fraction)
        label = _fmt(top_value * fraction)
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{width - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="axis" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>'
        )
    parts.append(
        f'<text class="axis" x="{LEFT}" y="{TOP - 22}" text-anchor="start">{escape(unit)}</text>'
    )
    return parts


def _x_labels(labels: Sequence[str], *, slot: float) -> list[str]:
    every = max(1, math.ceil(len(labels) / MAX_X_LABELS))
    parts = []
    for index, label in enumerate(labels):
        if index % every:
            continue
        x = LEFT + slot * (index + 0.5)
        parts.append(
            f'<text class="axis" x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" '
            f'text-anchor="middle">{escape(label)}</text>'
        )
    return parts


def stacked_bars_svg(
    *,
    chart_id: str,
    title: str,
    description: str,
    labels: Sequence[str],
    series: Sequence[Series],
    values: Sequence[dict[str, int]],
    unit: str = "",
    width: int = WIDTH,
) -> SafeString:
    """One stacked bar per label; ``values[i][series.key]`` is the height of a segment."""
    totals = [sum(v.get(s.key, 0) for s in series) for v in values]
    top_value = nice_ceiling(max(totals, default=0))
    plot_width = width - LEFT - RIGHT
    plot_height = HEIGHT - TOP - BOTTOM
    slot = plot_width / max(len(labels), 1)
    bar = max(slot * 0.7, 1.0)
    body = _axes(top_value=top_value, unit=unit, width=width)
    for index, (label, counts) in enumerate(zip(labels, values, strict=True)):
        x = LEFT + slot * index + (slot - bar) / 2
        base = TOP + plot_height
        for item in series:
            count = counts.get(item.key, 0)
            if not count:
                continue
            height = plot_height * count / top_value
            base -= height
            body.append(
                f'<rect class="bar s-{escape(item.key)}" x="{x:.1f}" y="{base:.1f}" '
                f'width="{bar:.1f}" height="{height:.1f}" data-series="{escape(item.key)}" '
                f'data-value="{count}"><title>{escape(label)}: {count} {escape(item.label)}'
                "</title></rect>"
            )
    body.extend(_x_labels(labels, slot=slot))
    body.extend(_legend(series, width=width))
    return _frame(chart_id=chart_id, title=title, description=description, body=body, width=width)


def _legend(series: Sequence[Series], *, width: int) -> list[str]:
    parts = ['<g class="legend">']
    x = width - RIGHT - 96 * len(series)
    for item in series:
        parts.append(
            f'<rect class="s-{escape(item.key)}" x="{x}" y="8" width="12" height="12" rx="2"/>'
            f'<text class="axis" x="{x + 17}" y="18">{escape(item.label)}</text>'
        )
        x += 96
    parts.append("</g>")
    return parts


def bars_svg(
    *,
    chart_id: str,
    title: str,
    description: str,
    labels: Sequence[str],
    values: Sequence[int],
    css_class: str,
    unit: str = "",
    width: int = WIDTH,
) -> SafeString:
    """One bar per label with its count written above it."""
    top_value = nice_ceiling(max(values, default=0))
    plot_width = width - LEFT - RIGHT
    plot_height = HEIGHT - TOP - BOTTOM
    slot = plot_width / max(len(labels), 1)
    bar = slot * 0.6
    body = _axes(top_value=top_value, unit=unit, width=width)
    for index, (label, count) in enumerate(zip(labels, values, strict=True)):
        x = LEFT + slot * index + (slot - bar) / 2
        height = plot_height * count / top_value
        y = TOP + plot_height - height
        if count:
            body.append(
                f'<rect class="bar {escape(css_class)}" x="{x:.1f}" y="{y:.1f}" '
                f'width="{bar:.1f}" height="{height:.1f}" data-value="{count}">'
                f"<title>{escape(label)}: {count}</title></rect>"
            )
        body.append(
            f'<text class="value" x="{x + bar / 2:.1f}" y="{y - 5:.1f}" '
            f'text-anchor="middle">{count}</text>'
        )
    body.extend(_x_labels(labels, slot=slot))
    return _frame(chart_id=chart_id, title=title, description=description, body=body, width=width)
