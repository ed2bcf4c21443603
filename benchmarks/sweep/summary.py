"""A sweep's summary: JSON (``<name>.json``: platform and per-workflow tables; ``<name>-sweep.json``: the
level, the walks and the break levels) and Markdown tables, whose hand-written part is kept."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.apps import resolve_type
from benchmarks.metrics import (
    DEFAULT_ATTAINMENT_GOAL,
    application_metrics,
    attainment,
    estimate,
    quality_figures,
    slowdown_fairness,
)
from benchmarks.monitor.telemetry import TelemetryRecorder, active_span
from benchmarks.results import scheduler_settings, void_reasons
from benchmarks.spec.model import SLO
from benchmarks.sweep.markdown import HAND_WRITTEN_MARKER, render_markdown
from benchmarks.sweep.model import Level, Sweep
from benchmarks.sweep.plan import first_run, scheduler_walk, table_levels
from benchmarks.sweep.plots import attainment_plot, sm_activity_plot
from benchmarks.sweep.state import State, Step, SweepError

Run = tuple[dict[str, Any], Path]  # a result document and its bundle folder
Void = tuple[int, str, dict[str, Any]]  # a void run: its number (1-based), why, its result document


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _app_summary(
    runs: Sequence[Mapping[str, Any]],
    solo: Mapping[str, Any] | None,
    gpu_shares: Sequence[float | None],
    goal: float,
) -> dict[str, Any]:
    """Return one application's figures over its runs: requests pooled (latencies and quality figures,
    the attainment with its 95 % interval and its curve against the scaled SLO thresholds, and what
    they say of the claim "attainment >= ``goal``"), attainment of each run beside; its share of the
    GPU's time, the mean of its runs' (``gpu_shares``)."""
    first = runs[0]
    slos = [SLO.model_validate(s) for s in first["slo"]]
    requests = [r for app in runs for r in app["requests"]]
    requested = sum(app["requests_requested"] for app in runs)
    pooled = application_metrics(requests, slos, requested)
    app_type = resolve_type(first["type"])
    latency = {
        m: {"p50": s.get("p50"), "p99": s.get("p99")}
        for m, s in pooled["metrics"].items()
        if s.get("p50") is not None
    }
    out: dict[str, Any] = {
        "type": first["type"],
        "slo": [str(slo) for slo in slos],
        "slo_attainment": pooled["slo_attainment"],
        "slo_attainment_runs": [app["slo_attainment"] for app in runs],
        **_attainment_figures(requests, slos, requested, goal),
        "requests": pooled["requests_counted"],
        "latency_s": latency,
        # Pooled like the latencies (bundles written before results had quality figures get them too).
        "quality": quality_figures(requests, app_type.quality) if app_type else {},
        "gpu_time_share_pct": _mean(gpu_shares),
    }
    if solo is not None:
        out["solo_attainment"] = solo["slo_attainment"]
        out["solo_gpu_time_share_pct"] = solo.get("gpu_time_share_pct")
        out["slowdown_vs_solo"] = {
            m: round(v["p50"] / solo["metrics"][m]["p50"], 3)
            for m, v in latency.items()
            if (solo["metrics"].get(m) or {}).get("p50")
        }
    return out


def _attainment_figures(
    requests: Sequence[Mapping[str, Any]], slos: Sequence[SLO], requested: int, goal: float
) -> dict[str, Any]:
    """Return an application's pooled attainment's 95 % Wilson interval, its curve ({scale: attainment}),
    and its claim against ``goal``: the verdict of the interval, the requests due, and how many early
    stopping needs for the claim with these misses (``too_few`` when the attainment reaches the goal on
    fewer); nothing for an application without an SLO."""
    figure = attainment(requests, slos, requested)
    if figure is None:
        return {}
    return {
        "slo_attainment_ci": [figure.low, figure.high],
        "slo_attainment_curve": {f"{scale:g}": value for scale, value in figure.curve},
        "claim": {
            "goal": goal,
            "verdict": figure.claim(goal).value,
            "requests_due": figure.due,
            "requests_needed": figure.requests_needed(goal),
            "too_few": figure.too_few_for(goal),
        },
    }


def _run_figures(result: Mapping[str, Any], bundle: Path, solos: Mapping[str, Any]) -> dict[str, Any]:
    """Return one run's figures; SM activity while serving read back from its telemetry (bundles
    written before the result had ``telemetry.serving`` have the samples, not the figure); slowdown
    fairness against the applications' solo runs (``solos``, by node name)."""
    run = (result.get("telemetry") or {}).get("run") or {}
    span = active_span(result["applications"])
    recorder = TelemetryRecorder.load(bundle)
    serving = recorder.window(*span, 1) if span else {}
    return {
        "gpu_time_share": _gpu_shares(result, recorder),
        "bundle": bundle.name,
        "mean_attainment": result["mean_attainment"],
        "sm_activity": serving.get("sm_activity_mean_pct"),
        "sm_activity_run": run.get("sm_activity_mean_pct"),
        "sm_occupancy": serving.get("sm_occupancy_mean_pct"),
        "fairness": result["fairness"],
        "slowdown_fairness": slowdown_fairness(
            {a["name"]: a["throughput_rps"] for a in result["applications"]},
            {name: solo["throughput_rps"] for name, solo in solos.items()},
        ),
        "makespan_s": result["makespan_s"],
        "energy_j": run.get("gpu_energy_j"),
    }


def _gpu_shares(result: Mapping[str, Any], recorder: TelemetryRecorder) -> dict[str, float | None]:
    """Return each application's share of the GPU's time over its active time, read back from the
    bundle's telemetry (``TelemetryRecorder.gpu_time_share``; bundles written before results had the
    figure have the samples)."""
    out: dict[str, float | None] = {}
    for app in result["applications"]:
        own = active_span([app])
        out[app["name"]] = recorder.gpu_time_share(app["name"], *own) if own is not None else None
    return out


def _settings_groups(settings: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return the distinct settings of a cell's runs in order of appearance, each with the runs (1-based,
    as in ``per_run``) that ran with it."""
    groups: list[dict[str, Any]] = []
    for run, item in enumerate(settings, start=1):
        same = next((g for g in groups if {k: v for k, v in g.items() if k != "runs"} == item), None)
        if same is None:
            groups.append({"runs": [run], **item})
        else:
            same["runs"].append(run)
    return groups


def _void_texts(void: Sequence[Void]) -> list[str]:
    """Return why runs are void, runs of one reason together ("runs 1, 3: outputs not finite: ...")."""
    by_reason: dict[str, list[int]] = {}
    for repeat, reason, _ in void:
        by_reason.setdefault(reason, []).append(repeat)
    return [
        f"run{'s' if len(n) > 1 else ''} {', '.join(map(str, n))}: {reason}"
        for reason, n in by_reason.items()
    ]


def _scheduler_summary(
    runs: Sequence[Run], solos: Mapping[str, Any], errors: Sequence[str], void: Sequence[Void], goal: float
) -> dict[str, Any]:
    """Return a scheduler's figures on a workflow over its sound runs (``void``: the others, listed with
    why and left out of every figure): each run's, their means (the mean attainment with its 95 % t
    interval where runs repeat), and the applications pooled (their claims against ``goal``). Without a
    sound run, the settings the void runs ran with."""
    if not runs:
        return {
            "mean_attainment": None,
            "sm_activity": None,
            "sm_occupancy": None,
            "fairness": None,
            "slowdown_fairness": None,
            "makespan_s": None,
            "apps": {},
            "runs": 0,
            "error": "; ".join(errors) or None,
            **(
                {
                    "void": _void_texts(void),
                    "settings": _settings_groups([scheduler_settings(result) for _, _, result in void]),
                }
                if void
                else {}
            ),
        }
    per_run = [_run_figures(result, bundle, solos) for result, bundle in runs]
    out: dict[str, Any] = {
        key: _mean([r[key] for r in per_run])
        for key in (
            "mean_attainment",
            "sm_activity",
            "sm_activity_run",
            "sm_occupancy",
            "fairness",
            "slowdown_fairness",
            "makespan_s",
            "energy_j",
        )
    }
    out["runs"] = len(per_run)
    out["per_run"] = per_run
    spread = estimate([r["mean_attainment"] for r in per_run if r["mean_attainment"] is not None],
                      bounds=(0.0, 1.0), min_runs=2)  # fmt: skip
    if spread is not None and spread.low is not None and spread.high is not None:
        out["mean_attainment_ci"] = [spread.low, spread.high]
    out["settings"] = _settings_groups([scheduler_settings(result) for result, _ in runs])
    names = [a["name"] for a in runs[0][0]["applications"]]
    out["apps"] = {
        name: _app_summary(
            [a for result, _ in runs for a in result["applications"] if a["name"] == name],
            solos.get(name),
            [r["gpu_time_share"].get(name) for r in per_run],
            goal,
        )
        for name in names
    }
    if errors:
        out["error"] = "; ".join(errors)
    if void:
        out["void"] = _void_texts(void)
    return out


def scheduler_runs(
    sweep: Sweep, state: State, name: str, level: Level, scheduler: str
) -> tuple[list[Run], list[str], list[Void]]:
    """Return the sound finished runs of a workflow under a scheduler at a level (first, then repeats),
    the errors of those that failed, and the void ones with why (``run_void_reasons``)."""
    runs: list[Run] = []
    errors: list[str] = []
    void: list[Void] = []
    repeat = 1
    while True:
        step = first_run(sweep, name, level.name, scheduler, repeat)
        entry = state.get(step)
        if entry is None:
            return runs, errors, void
        result = state.result(step)
        if result is None or entry.get("error"):
            errors.append(f"run {repeat}: {entry.get('error') or entry.get('status')}")
        elif reasons := run_void_reasons(result):
            void.append((repeat, "; ".join(reasons), result))
        else:
            runs.append((result, state.bundle_dir(entry)))
        repeat += 1


def run_void_reasons(result: Mapping[str, Any]) -> list[str]:
    """Return why a run's figures are void (``benchmarks.results.void_reasons``); its applications'
    quality figures computed from their requests where the result has none (bundles written before
    results had them)."""
    applications = []
    for app in result.get("applications", []):
        app_type = resolve_type(app.get("type", ""))
        if "quality" not in app and app_type is not None:
            app = {**app, "quality": quality_figures(app.get("requests", []), app_type.quality)}
        applications.append(app)
    return void_reasons({**result, "applications": applications})


def _solos(sweep: Sweep, state: State, name: str, level: str) -> dict[str, Any]:
    """Return each node's application result alone at a level, for the nodes that ran alone there (a
    void solo run, ``run_void_reasons``, is no baseline)."""
    out = {}
    for node in sweep.base[name]["workflows"]:
        step = Step(name, "solo", level, sweep.schedulers[0], node)
        solo = state.result(step)
        if solo and solo["applications"] and not run_void_reasons(solo):
            app = solo["applications"][0]
            entry = state.get(step)
            bundle = state.bundle_dir(entry) if entry is not None else None
            share = _gpu_shares(solo, TelemetryRecorder.load(bundle)) if bundle is not None else {}
            out[node] = {**app, "gpu_time_share_pct": share.get(app["name"])}
    return out


def _goal(sweep: Sweep, scheduler: str) -> float:
    """Return the attainment a scheduler's applications are judged against: its search threshold, else
    ``DEFAULT_ATTAINMENT_GOAL``."""
    return sweep.threshold(scheduler) if sweep.spec.search is not None else DEFAULT_ATTAINMENT_GOAL


def summarize(sweep: Sweep, state: State) -> dict[str, Any]:
    """Return the summary: {"platform", "workflows": {name: {scheduler: {...}}}, "grid", "level",
    "sweep", "breaks"}; the workflows' tables are at the knee (with a search) or at the last level.
    A grid (no search, several levels, e.g. one level per unit option) has every level's tables in
    ``grid``: {name: {level: {scheduler: {...}}}}; otherwise ``grid`` is empty."""
    levels = table_levels(sweep, state)
    if levels is None:
        raise SweepError("the break-level search has not found the knee yet: run the sweep first")
    level = levels[-1]
    grid: dict[str, dict[str, Any]] = {name: {} for name in sweep.base}
    platform: dict[str, Any] | None = None
    for name in sweep.base:
        for lv in levels:
            solos = _solos(sweep, state, name, lv.name)
            per: dict[str, Any] = {}
            for scheduler in sweep.schedulers:
                runs, errors, void = scheduler_runs(sweep, state, name, lv, scheduler)
                platform = platform or (runs[0][0]["platform"] if runs else None)
                per[scheduler] = _scheduler_summary(runs, solos, errors, void, _goal(sweep, scheduler))
            grid[name][lv.name] = per
    workflows = {name: grid[name][level.name] for name in sweep.base}
    rows: list[dict[str, Any]] = []
    breaks: dict[str, Any] = {}
    for scheduler in sweep.schedulers:
        if sweep.spec.search is not None:
            walk = scheduler_walk(sweep, state, scheduler, level.name)
            measured = walk.measured
            breaks[scheduler] = {
                "level": walk.breaks_at.name if walk.breaks_at else None,
                "pending": walk.next.key if walk.next else None,
                "ended": f"{walk.failed[0].name}: {walk.failed[1]}" if walk.failed else None,
            }
        else:
            measured = [(lv, first_run(sweep, sweep.search_workflow, lv.name, scheduler)) for lv in levels]
        for lv, step in measured:
            result = state.result(step)
            if result is None:
                continue
            alone = {k: v["slo_attainment"] for k, v in _solos(sweep, state, step.workflow, lv.name).items()}
            rows.append(
                {
                    "level": lv.name,
                    "load": lv.load,
                    "scheduler": scheduler,
                    "mean_attainment": result["mean_attainment"],
                    "apps": {a["name"]: a["slo_attainment"] for a in result["applications"]},
                    "alone": alone,
                }
            )
            # An application that failed in this run: its attainment counts the unserved requests as
            # misses, and the workflow tables leave the run out (the key only where one did).
            if failed := (state.get(step) or {}).get("error"):
                rows[-1]["failed"] = failed
            # A void run (a failed product check, outputs not finite): the tables show why, not its figures.
            if reasons := run_void_reasons(result):
                rows[-1]["void"] = reasons
    below = sweep.threshold(sweep.schedulers[0]) if sweep.spec.search is not None else None
    return {
        "platform": platform,
        "workflows": workflows,
        "grid": grid if len(levels) > 1 else {},
        "level": {"name": level.name, "load": level.load, "knee_below": below},
        "sweep": rows,
        "breaks": breaks,
    }


def write_plots(
    sweep: Sweep, state: State, summary: Mapping[str, Any], folder: Path, stem: str, fmt: str = "png"
) -> list[Path]:
    """Draw the sweep's plots into ``folder`` as ``<stem>-attainment.<fmt>`` and ``<stem>-sm-activity.<fmt>``
    (the first run of the searched workflow under each scheduler at the table level); return the files."""
    level = sweep.level(summary["level"]["name"])
    timelines = {}
    for scheduler in sweep.schedulers:
        runs, _, _ = scheduler_runs(sweep, state, sweep.search_workflow, level, scheduler)
        if runs:
            result, bundle = runs[0]
            series, _ = TelemetryRecorder.load(bundle).sm_activity()
            if series is not None:
                timelines[scheduler] = (list(series.t), list(series.v), active_span(result["applications"]))
    folder.mkdir(parents=True, exist_ok=True)
    drawn = [
        attainment_plot(summary["workflows"], sweep.schedulers, folder / f"{stem}-attainment.{fmt}"),
        sm_activity_plot(timelines, folder / f"{stem}-sm-activity.{fmt}"),
    ]
    return [p for p in drawn if p is not None]


def write_summary(
    sweep: Sweep, state: State, json_path: Path, md_path: Path, command: str, plot_format: str = "png"
) -> tuple[dict[str, Any], list[Path]]:
    """Write the summary JSON (and ``<name>-sweep.json``), the plots beside the Markdown, and the
    Markdown, keeping its hand-written part. Returns the summary and the plot files written."""
    summary = summarize(sweep, state)
    hand_written = f"## How to run\n\n```\nconsumerbench sweep {sweep.path}\n```\n"
    if md_path.is_file() and HAND_WRITTEN_MARKER in md_path.read_text():
        text = md_path.read_text()
        hand_written = text[text.index(HAND_WRITTEN_MARKER) + len(HAND_WRITTEN_MARKER) :]
    json_path.parent.mkdir(parents=True, exist_ok=True)
    # A grid's every level; left out otherwise, so that the tables of earlier sweeps read as before.
    tables = {k: summary[k] for k in ("platform", "workflows", "grid") if k != "grid" or summary["grid"]}
    json_path.write_text(json.dumps(tables, indent=1) + "\n")
    sweep_path = json_path.with_name(f"{json_path.stem}-sweep.json")
    sweep_path.write_text(json.dumps({k: summary[k] for k in ("level", "sweep", "breaks")}, indent=1) + "\n")
    plots = write_plots(sweep, state, summary, md_path.parent, md_path.stem, plot_format)
    md_path.write_text(render_markdown(sweep, summary, [p.name for p in plots], hand_written, command))
    return summary, plots
