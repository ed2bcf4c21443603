"""A sweep's plots, drawn with matplotlib (Agg, no display): SLO attainment per application under each
scheduler beside its solo run, and the GPU's SM activity over one run of a workflow under each scheduler.

matplotlib is imported when a plot is drawn, not when the CLI starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# One colour per series, the same in both plots; schedulers past these get matplotlib's cycle.
COLOURS = {"solo": "#9e9e9e", "greedy": "#d95f02", "credit": "#1b9e77", "partition": "#7570b3"}
# The label of a scheduler's void runs, in place of their bar.
VOID_COLOUR = "#b2182b"
FORMATS = ("png", "svg")

Timeline = tuple[Sequence[float], Sequence[float], tuple[float, float] | None]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def attainment_rows(
    workflows: Mapping[str, Mapping[str, Any]], schedulers: Sequence[str]
) -> tuple[list[str], list[tuple[str, dict[str, float | None]]]]:
    """Return the attainment plot's series and its rows (``"workflow: app"``, attainment per series).

    An application without a figure in any series (no SLO) has no row, and ``solo`` is a series only
    where some application has a solo figure (a sweep with solo runs): bars of nothing are left out.
    """
    rows: list[tuple[str, dict[str, float | None]]] = []
    for name, per in workflows.items():
        apps: Mapping[str, Any] = next((s["apps"] for s in per.values() if s.get("apps")), {})
        for app, first in apps.items():
            values: dict[str, float | None] = {"solo": first.get("solo_attainment")}
            for scheduler in schedulers:
                values[scheduler] = per.get(scheduler, {}).get("apps", {}).get(app, {}).get("slo_attainment")
            if any(value is not None for value in values.values()):
                rows.append((f"{name}: {app}", values))
    solo = any(values["solo"] is not None for _, values in rows)
    return [*(["solo"] if solo else []), *schedulers], rows


def void_bars(workflows: Mapping[str, Mapping[str, Any]]) -> set[tuple[str, str]]:
    """Return the (row, scheduler) bars of the attainment plot that have no figure because every run of
    the scheduler was void (the summary's ``void``: a failed product check, outputs not finite): the
    plot says so where the bar would be, as the tables do."""
    return {
        (f"{name}: {app}", scheduler)
        for name, per in workflows.items()
        for app in next((s["apps"] for s in per.values() if s.get("apps")), {})
        for scheduler, s in per.items()
        if s.get("void") and app not in s.get("apps", {})
    }


def attainment_plot(
    workflows: Mapping[str, Mapping[str, Any]], schedulers: Sequence[str], path: Path
) -> Path | None:
    """Draw horizontal bars per workflow and application with an SLO: its attainment alone (where the
    sweep has solo runs), then under each scheduler; where every run was void, the plot says so.

    ``workflows`` is the summary's ``{name: {scheduler: {"apps": {...}}}}``; a scheduler without figures
    for an application gets no bar. Returns ``path``, or None when no application has a figure.
    """
    series, rows = attainment_rows(workflows, schedulers)
    if not rows:
        return None
    void = void_bars(workflows)
    plt = _pyplot()
    bar = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(9, 1 + 0.3 * len(rows) * len(series)))
    for j, key in enumerate(series):
        ys = [i + j * bar for i in range(len(rows))]
        xs = [100 * (values[key] or 0.0) for _, values in rows]
        ax.barh(ys, xs, height=bar, color=COLOURS.get(key), label=key)
        for y, (label, values) in zip(ys, rows, strict=True):
            value = values[key]
            text = "no figure" if value is None else f"{value:.0%}"
            if (label, key) in void:
                text = "void runs: left out"
            ax.text(
                (100 * value if value is not None else 0) + 1,
                y,
                text,
                va="center",
                fontsize=7,
                color=VOID_COLOUR if (label, key) in void else "black",
            )
    ax.set_yticks([i + bar * (len(series) - 1) / 2 for i in range(len(rows))], [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, 110)
    ax.set_xlabel("SLO attainment (%)")
    ax.set_title(
        "SLO attainment per application" + (" (alone, then each scheduler)" if "solo" in series else "")
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def sm_activity_plot(runs: Mapping[str, Timeline], path: Path) -> Path | None:
    """Draw one panel per scheduler: SM activity (%) against seconds since the run's start.

    ``runs`` maps a scheduler to (t, activity, serving window or None); the serving window (first
    counted request's start to the last one's end) is shaded: before it the models load. Returns
    ``path``, or None when there is no run.
    """
    if not runs:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(len(runs), 1, sharex=True, squeeze=False, figsize=(8, 1.6 * len(runs) + 0.8))
    for ax, (scheduler, (t, values, window)) in zip(axes[:, 0], runs.items(), strict=True):
        if window is not None:
            ax.axvspan(*window, color="#f0f0f0")
        ax.plot(t, values, color=COLOURS.get(scheduler), linewidth=0.8)
        ax.set_ylim(0, 100)
        ax.set_ylabel(f"{scheduler}\nSM %")
    axes[-1, 0].set_xlabel("seconds since the run started")
    axes[0, 0].set_title("GPU SM activity over one run (shaded: serving requests)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
