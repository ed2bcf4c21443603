"""The summary as Markdown: the platform, the sweep's levels, one table per workflow, the plots' names, then
the hand-written part of the file as it was."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from benchmarks.metrics import THRESHOLD_SCALES
from benchmarks.results import QualityFigure, format_quality, format_shares
from benchmarks.spec.model import parse_slo
from benchmarks.sweep.model import Sweep

# Everything below this line of the Markdown is written by hand; ``--summarize`` keeps it.
HAND_WRITTEN_MARKER = "<!-- Written by hand below this line: summarize keeps it as it is. -->"
NO_PARAMETERS = "no parameters"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f} %"


def _interval(interval: Sequence[float] | None) -> str:
    """Return ' [low-high %]': a 95 % interval of an attainment, or nothing when there is none."""
    return "" if interval is None else f" [{100 * interval[0]:.0f}-{100 * interval[1]:.0f} %]"


def _claim(a: Mapping[str, Any]) -> str:
    """Return an application's claim against its goal: the interval's verdict, and when its attainment
    reaches the goal on fewer requests than early stopping needs, that it has too few."""
    claim = a.get("claim")
    if not claim:
        return "—"
    text = f"{claim['verdict']} ({_pct(claim['goal'])} goal)"
    if claim["too_few"]:
        needed = claim["requests_needed"]
        text += "; too few requests: " + (
            f"{claim['requests_due']} of {needed} needed" if needed is not None else "no count supports 100 %"
        )
    return text


def _curve(a: Mapping[str, Any]) -> str:
    """Return an application's attainment at each scaled SLO threshold ("50 / 75 / 75 / 100 / 100 %")."""
    curve = a.get("slo_attainment_curve")
    return " / ".join(f"{100 * v:.0f}" for v in curve.values()) + " %" if curve else "—"


def _void(s: Mapping[str, Any]) -> str:
    """Return the note of a scheduler's void runs, left out of every figure ("" when none was)."""
    return f"; void, left out: {_cell('; '.join(s['void']))}" if s.get("void") else ""


def _num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "—" if x is None else fmt.format(x)


def _runs(values: Sequence[float | None], fmt: Callable[[float | None], str] = _pct) -> str:
    """Return ' (a, b)': each run's figure, when there was more than one run."""
    return f" ({', '.join(fmt(v) for v in values)})" if len(values) > 1 else ""


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _breaks(breaks: Mapping[str, Mapping[str, Any]], below: Mapping[str, float]) -> str:
    """Return 'greedy L1, credit L2, ...': each scheduler's break level, or why there is none."""
    parts = []
    for scheduler, b in breaks.items():
        if b["level"]:
            parts.append(f"{scheduler} {b['level']}")
        elif b["pending"]:
            parts.append(f"{scheduler} not known yet ({b['pending']} to run)")
        elif b["ended"]:
            parts.append(f"{scheduler} none before its sweep ended ({b['ended']})")
        else:
            parts.append(f"{scheduler} none (at or above {below[scheduler]:.0%} at every level)")
    return ", ".join(parts)


def _sweep_section(sweep: Sweep, summary: Mapping[str, Any]) -> list[str]:
    """Return the section on the levels: how the level of the tables was chosen, and every level run."""
    schedulers = sweep.schedulers
    level = summary["level"]
    name = sweep.search_workflow
    if sweep.spec.search is None:
        intro = [
            "A grid: every level under every scheduler, each level's tables below."
            if summary.get("grid")
            else f"Load level of the tables: {level['name']} ({level['load']}), the last level of the sweep.",
            "",
            f"## Load levels (workflow {name})",
            "",
        ]
    else:
        thresholds = {s: sweep.threshold(s) for s in schedulers}
        same = len(set(thresholds.values())) == 1
        below = f"{level['knee_below']:.0%}" if same else "its threshold"
        first, others = schedulers[0], schedulers[1:]
        walk = (
            f" {_and(others)} walk from the knee, up while they meet it and down while they do not."
            if others
            else ""
        )
        intro = [
            f"Load level of the tables: {level['name']} ({level['load']}), the first level of the sweep "
            f"where {first}'s mean SLO attainment fell below {level['knee_below']:.0%} (the last level "
            "when it never did).",
            "",
            f"## Load sweep (workflow {name})",
            "",
            f"A scheduler's break level is the first level where its mean attainment on the {name} (one run "
            f"per level) falls below {below}"
            + ("" if same else f" ({', '.join(f'{s} {v:.0%}' for s, v in thresholds.items())})")
            + f". {first.capitalize()}'s is the knee, found from {sweep.levels[0].name} upward;{walk} "
            f"Break levels: {_breaks(summary['breaks'], thresholds)}.",
            "",
        ]
    lines = [
        *intro,
        "| level | load | scheduler | mean attainment | per application (alone at that level) |",
        "|---|---|---|---|---|",
    ]
    for row in summary["sweep"]:
        if row.get("void"):
            lines.append(
                f"| {row['level']} | {row['load']} | {row['scheduler']} | void "
                f"| {_cell('; '.join(row['void']))} |"
            )
            continue
        apps = ", ".join(
            f"{k} {_pct(v)}" + (f" ({_pct(row['alone'][k])})" if k in row["alone"] else "")
            for k, v in row["apps"].items()
        )
        if row.get("failed"):
            apps += f"; failed: {_cell(str(row['failed']))}"
        lines.append(
            f"| {row['level']} | {row['load']} | {row['scheduler']} "
            f"| {_pct(row['mean_attainment'])} | {apps} |"
        )
    return lines


def _not_run(s: Mapping[str, Any]) -> str:
    """Return the mean attainment cell of a scheduler with no run to count: why (failed, void), or that
    none has run."""
    if s.get("void"):
        return f"void: {_cell('; '.join(s['void']))}" + (
            f"; not run: {_cell(str(s['error']))}" if s.get("error") else ""
        )
    return f"not run: {_cell(str(s['error']))}" if s.get("error") else "not run yet"


def _cell(text: str) -> str:
    """Return text for one table cell: on one line (a preflight error lists its problems on several),
    its pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _slo_columns(tables: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Return (application, metric) for each metric an application's SLO names, over scheduler
    tables ({scheduler: summary}), in order of appearance."""
    return list(
        dict.fromkeys(
            (app, metric)
            for per in tables
            for s in per.values()
            for app, a in s.get("apps", {}).items()
            for metric in dict.fromkeys(parse_slo(text).metric for text in a["slo"])
        )
    )


def _latency(s: Mapping[str, Any], app: str, metric: str, q: str) -> float | None:
    value: float | None = ((s["apps"].get(app) or {}).get("latency_s", {}).get(metric) or {}).get(q)
    return value


def _overview(
    heading: str, key: str, tables: Mapping[str, Mapping[str, Any]], quantiles: Sequence[str], makespan: bool
) -> list[str]:
    """Return an overview table under ``heading``: one row per entry of ``tables`` ({label: {scheduler:
    summary}}, the label in column ``key``) and scheduler, with the mean attainment, SM activity while
    serving, the makespan (with ``makespan``) and the ``quantiles`` of each metric an application's SLO
    names."""
    columns = _slo_columns(list(tables.values()))
    figures = " / ".join(quantiles)
    lines = [
        "",
        heading,
        "",
        f"| {key} | scheduler | runs | mean attainment | SM activity serving | "
        + ("makespan (s) | " if makespan else "")
        + " | ".join(f"{app} {metric} {figures} (s)" for app, metric in columns)
        + " |",
        "|---|---|---|---|---|" + ("---|" if makespan else "") + "---|" * len(columns),
    ]
    for label, per in tables.items():
        for scheduler, s in per.items():
            if not s.get("runs"):
                lines.append(
                    f"| {label} | {scheduler} | 0 | {_not_run(s)} | |"
                    + (" |" if makespan else "")
                    + " |" * len(columns)
                )
                continue
            cells = [
                " / ".join(_num(_latency(s, app, metric, q), "{:.3f}") for q in quantiles)
                for app, metric in columns
            ]
            lines.append(
                f"| {label} | {scheduler} | {s['runs']} | {_pct(s['mean_attainment'])}"
                f"{_interval(s.get('mean_attainment_ci'))}{_void(s)} "
                f"| {_num(s['sm_activity'])} % | "
                + (f"{_num(s['makespan_s'])} | " if makespan else "")
                + " | ".join(cells)
                + " |"
            )
    return lines


def _grid_section(name: str, grid: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Return a grid's overview of one workflow: one row per level and scheduler with its mean
    attainment, SM activity while serving, and the p50 of each metric an application's SLO names."""
    heading = f"## Grid (workflow {name}): every level under every scheduler"
    return _overview(heading, "level", grid, ("p50",), makespan=False)


def _workflows_section(workflows: Mapping[str, Mapping[str, Any]], level: str) -> list[str]:
    """Return the workflows side by side at the tables' level (variants of one workflow): one row
    per workflow and scheduler with its mean attainment, SM activity while serving, makespan, and the
    p50 / p99 of each metric an application's SLO names."""
    heading = f"## The workflows side by side at level {level}"
    return _overview(heading, "workflow", workflows, ("p50", "p99"), makespan=True)


def _workflow_section(name: str, per: Mapping[str, Any], level: str | None = None) -> list[str]:
    """Return one workflow's tables (at ``level``, in a grid): per scheduler, then per application
    and scheduler."""
    lines = [
        "",
        f"## Workflow {name}" + (f" at level {level}" if level else ""),
        "",
        "| scheduler | runs | mean attainment | SM activity serving (whole run) | SM occupancy serving "
        "| fairness | slowdown fairness | makespan (s) | GPU energy (J) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for scheduler, s in per.items():
        if not s.get("runs"):
            lines.append(f"| {scheduler} | 0 | {_not_run(s)} | | | | | | |")
            continue
        runs = s["per_run"]
        occupancy = s["sm_occupancy"]
        lines.append(
            f"| {scheduler} | {s['runs']} | {_pct(s['mean_attainment'])}"
            f"{_interval(s.get('mean_attainment_ci'))}{_runs([r['mean_attainment'] for r in runs])}"
            f"{_void(s)} | {_num(s['sm_activity'])} % "
            f"({_num(s['sm_activity_run'])} %) | {_num(occupancy)}{'' if occupancy is None else ' %'} | "
            f"{_num(s['fairness'], '{:.2f}')} | "
            f"{_num(s.get('slowdown_fairness'), '{:.2f}')} | "
            f"{_num(s['makespan_s'])} | {_num(s.get('energy_j'), '{:.0f}')} |"
        )
    # What each scheduler ran with, from its runs' results; left out when every one ran without
    # parameters or shares (greedy alone).
    settings = {scheduler: _settings_text(s["settings"]) for scheduler, s in per.items() if s.get("settings")}
    if any(text != NO_PARAMETERS for text in settings.values()):
        lines += ["", "Scheduler settings as run (from each run's result):", ""]
        lines += [f"- {scheduler}: {text}" for scheduler, text in settings.items()]
    lines += [
        "",
        "| application | scheduler | SLO | attainment [95 % CI] (solo) | claim | attainment at SLO x "
        + " / ".join(f"{scale:g}" for scale in THRESHOLD_SCALES)
        + " | p50 / p99 (s) | p50 slowdown vs solo | GPU time % (solo) | quality |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for scheduler, s in per.items():
        for app, a in s["apps"].items():
            lat = "; ".join(
                f"{m} {_num(v['p50'], '{:.3f}')} / {_num(v['p99'], '{:.3f}')}"
                for m, v in a["latency_s"].items()
            )
            slow = "; ".join(f"{m} x{v}" for m, v in a.get("slowdown_vs_solo", {}).items())
            quality = "; ".join(
                f"{q} {format_quality(QualityFigure.model_validate(v))}"
                for q, v in a.get("quality", {}).items()
            )
            share = _num(a.get("gpu_time_share_pct"), "{:.1f}")
            if "solo_attainment" in a:
                share += f" ({_num(a.get('solo_gpu_time_share_pct'), '{:.1f}')})"
            lines.append(
                f"| {app} | {scheduler} | {', '.join(a['slo'])} | {_pct(a['slo_attainment'])}"
                f"{_interval(a.get('slo_attainment_ci'))}{_runs(a['slo_attainment_runs'])} "
                f"({_pct(a.get('solo_attainment'))}) | {_claim(a)} | {_curve(a)} | {lat} | {slow} "
                f"| {share} | {quality} |"
            )
    return lines


def _settings_text(groups: Sequence[Mapping[str, Any]]) -> str:
    """Return a cell's scheduler settings as run: one text when every run had the same, else the runs
    of each ("runs 1, 2: ...; run 3: ...")."""
    if len(groups) == 1:
        return _one_setting(groups[0])
    return "; ".join(
        f"run{'s' if len(g['runs']) > 1 else ''} {', '.join(map(str, g['runs']))}: {_one_setting(g)}"
        for g in groups
    )


def _one_setting(setting: Mapping[str, Any]) -> str:
    """Return one set of scheduler settings: the SM shares with their product checks, then the
    parameters."""
    parts = []
    if shares := format_shares(setting):
        parts.append(f"SM shares {shares}")
    params = setting.get("params")
    if params is None:
        parts.append("parameters not recorded")
    else:
        parts.append(
            ", ".join(f"{k} {'none' if v is None else v}" for k, v in params.items()) or NO_PARAMETERS
        )
    return "; ".join(parts)


def render_markdown(
    sweep: Sweep, summary: Mapping[str, Any], plots: Sequence[str], hand_written: str, command: str
) -> str:
    """Return the summary Markdown: the platform, the levels, one table per workflow, the names of the
    plots (drawn beside it, not kept in git), then the hand-written part as it was. ``command`` is how
    the file was written, shown in its head."""
    gpu = ", ".join(g.get("name", "?") for g in (summary.get("platform") or {}).get("gpus", [])) or "no GPU"
    lines = [
        f"# {sweep.spec.title or sweep.spec.name}",
        "",
        f"Platform: {gpu}. " + _sweep_section(sweep, summary)[0],
        "",
        f"Written by `{command}` from the result bundles; the figures are",
        "defined in docs/metrics.md, SM activity and SM occupancy here are means while the run serves",
        "requests (first counted request's start to the last one's end; SM activity over the whole run,",
        "model loading included, in parentheses). Several runs: means of the runs' figures, each run's in",
        "parentheses; an application's attainment, latencies and quality figures pool the requests of all",
        "runs. In brackets, 95 % intervals: Wilson's over an application's requests, Student's t over the",
        "runs of a mean attainment where runs repeat. An application's claim is what its interval says",
        "against the goal (the search threshold, else 90 %): met only when the whole interval reaches it;",
        '"too few requests" when the attainment reaches the goal on fewer requests than MLPerf LoadGen\'s',
        "early stopping needs for it at 99 % confidence. The attainment is also given at the SLO thresholds",
        "scaled 0.8x to 1.25x, so a verdict on a knife edge shows. A void run (a failed product check,",
        "outputs not finite) is left out of every figure, its reason listed.",
        *_sweep_section(sweep, summary)[1:],
    ]
    # Variants of one workflow (the same applications with SLOs: a sweep whose level is the workflow)
    # side by side; different workflows have nothing to line up.
    variants = {tuple(_slo_columns([per])) for per in summary["workflows"].values()}
    if len(summary["workflows"]) > 1 and len(variants) == 1:
        lines += _workflows_section(summary["workflows"], summary["level"]["name"])
    for name, per in summary["workflows"].items():
        if summary.get("grid"):
            lines += _grid_section(name, summary["grid"][name])
            for level_name, at_level in summary["grid"][name].items():
                lines += _workflow_section(name, at_level, level_name)
        else:
            lines += _workflow_section(name, per)
    if plots:
        lines += [
            "",
            "## Plots",
            "",
            "Drawn beside this file by the command above (not kept in git): "
            + ", ".join(f"`{p}`" for p in plots)
            + ".",
        ]
    return "\n".join(lines) + "\n\n" + HAND_WRITTEN_MARKER + "\n\n" + hand_written.lstrip("\n")
