"""The study's two plots as plain SVG (no plotting library): SLO attainment per application under each
scheduler beside its solo run, and the GPU's SM activity over one run of the mix under each scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

# One colour per series, the same in both plots.
COLOURS = {"solo": "#9e9e9e", "greedy": "#d95f02", "credit": "#1b9e77", "partition": "#7570b3"}
FONT = 'font-family="sans-serif"'


def _svg(width: int, height: int, body: Sequence[str]) -> str:
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            *body,
            "</svg>",
        ]
    )


def _text(x: float, y: float, text: str, anchor: str = "start", extra: str = "") -> str:
    size = "" if "font-size" in extra else 'font-size="12"'
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {FONT} {size} {extra}>{escape(text)}</text>'


def _legend(x: float, y: float, names: Sequence[str]) -> list[str]:
    out = []
    for i, name in enumerate(names):
        left = x + 110 * i
        out.append(f'<rect x="{left}" y="{y - 10}" width="12" height="12" fill="{COLOURS[name]}"/>')
        out.append(_text(left + 16, y, name))
    return out


def attainment_svg(workflows: Mapping[str, Mapping[str, Any]], schedulers: Sequence[str]) -> str:
    """Return horizontal bars: per workflow and application, SLO attainment alone and per scheduler.

    ``workflows`` is the summary's ``{name: {scheduler: {"apps": {...}}}}``; a scheduler without
    figures for an application gets no bar.
    """
    series = ["solo", *schedulers]
    bar, gap, label_w, plot_w = 11, 10, 190, 420
    rows: list[tuple[str, str, dict[str, float | None]]] = []
    for name, per in workflows.items():
        apps: Mapping[str, Any] = next((s["apps"] for s in per.values() if s.get("apps")), {})
        for app, first in apps.items():
            values: dict[str, float | None] = {"solo": first.get("solo_attainment")}
            for scheduler in schedulers:
                values[scheduler] = per.get(scheduler, {}).get("apps", {}).get(app, {}).get("slo_attainment")
            rows.append((name, app, values))
    group_h = bar * len(series) + gap
    top = 40
    height = top + group_h * len(rows) + 40
    body = [
        _text(
            10,
            18,
            "SLO attainment per application (bars: alone, then each scheduler)",
            extra='font-weight="bold"',
        )
    ]
    body += _legend(label_w, 34, series)
    for i, (name, app, values) in enumerate(rows):
        y0 = top + 8 + i * group_h
        body.append(_text(label_w - 8, y0 + bar * len(series) / 2 + 4, f"{name}: {app}", "end"))
        for j, key in enumerate(series):
            value = values[key]
            y = y0 + j * bar
            if value is None:
                body.append(_text(label_w + 4, y + bar - 2, "not run", extra='font-size="9"'))
                continue
            w = plot_w * value
            body.append(
                f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar - 1}" fill="{COLOURS[key]}">'
                f"<title>{escape(f'{name} {app} {key}: {value:.0%}')}</title></rect>"
            )
            body.append(_text(label_w + w + 4, y + bar - 2, f"{value:.0%}", extra='font-size="9"'))
    axis_y = top + group_h * len(rows) + 6
    body.append(f'<line x1="{label_w}" y1="{axis_y}" x2="{label_w + plot_w}" y2="{axis_y}" stroke="black"/>')
    for tick in range(0, 101, 25):
        x = label_w + plot_w * tick / 100
        body.append(f'<line x1="{x}" y1="{top}" x2="{x}" y2="{axis_y}" stroke="#ddd"/>')
        body.append(_text(x, axis_y + 16, f"{tick} %", "middle"))
    return _svg(label_w + plot_w + 60, height + 6, body)


def sm_activity_svg(
    runs: Mapping[str, tuple[Sequence[float], Sequence[float], tuple[float, float] | None]],
) -> str:
    """Return one panel per scheduler: SM activity (%) against seconds since the run's start.

    ``runs`` maps a scheduler to (t, activity, serving window or None); the serving window (first
    counted request's start to the last one's end) is shaded: before it the models load.
    """
    panel_h, left, plot_w, top = 110, 60, 560, 30
    t_max = max((max(t) for t, _, _ in runs.values() if t), default=1.0)
    body = [
        _text(
            10,
            18,
            "GPU SM activity over one run of the mix (shaded: serving requests)",
            extra='font-weight="bold"',
        )
    ]
    for i, (scheduler, (t, values, window)) in enumerate(runs.items()):
        y0 = top + i * (panel_h + 20)
        body.append(_text(left + plot_w + 8, y0 + 14, scheduler, extra=f'fill="{COLOURS[scheduler]}"'))
        if window is not None:
            x_a, x_b = (left + plot_w * w / t_max for w in window)
            body.append(
                f'<rect x="{x_a:.1f}" y="{y0}" width="{x_b - x_a:.1f}" height="{panel_h}" fill="#f0f0f0"/>'
            )
        for pct in (0, 50, 100):
            y = y0 + panel_h * (1 - pct / 100)
            body.append(f'<line x1="{left}" y1="{y}" x2="{left + plot_w}" y2="{y}" stroke="#ddd"/>')
            body.append(_text(left - 6, y + 4, f"{pct} %", "end"))
        points = " ".join(
            f"{left + plot_w * x / t_max:.1f},{y0 + panel_h * (1 - v / 100):.1f}"
            for x, v in zip(t, values, strict=True)
        )
        body.append(
            f'<polyline points="{points}" fill="none" stroke="{COLOURS[scheduler]}" stroke-width="1"/>'
        )
    axis_y = top + len(runs) * (panel_h + 20) - 2
    for tick in range(0, int(t_max) + 1, 10):
        x = left + plot_w * tick / t_max
        body.append(_text(x, axis_y, f"{tick}", "middle"))
    body.append(_text(left + plot_w / 2, axis_y + 16, "seconds since the run started", "middle"))
    return _svg(left + plot_w + 90, axis_y + 24, body)
