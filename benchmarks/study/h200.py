"""Issue 7's scheduler study on one GPU: each application alone, the mix under each scheduler, a load sweep.

For workflow (a) ``workflows/mix.yml`` (Chatbot + ImageGen + LiveCaptions at once) the study raises the
load level by level under greedy (``LEVELS``: more chat sessions, more image generators, caption
streams, higher resolution) until greedy's mean SLO attainment falls below ``KNEE`` (the
knee; the last level when it never does). At the knee it runs each application alone (its solo
baseline) and the mix under credit and partition. Workflow (b) ``workflows/content-creation.yml`` (the
content-creation DAG) runs at the same level: each node alone, then the DAG under every scheduler.
Then credit and partition find their own break levels on the mix (the first level where a scheduler's
mean attainment falls below ``KNEE``) by walking from the knee, up while they meet it and down while
they do not; each application runs alone at a break level above the knee (whether the load itself,
not the sharing, is too much there).

The study is a list of steps whose results are kept in ``<state>/state.json`` with one result bundle per
step, so it runs in pieces: ``run --budget-s S`` runs the pending steps that fit in S seconds and stops
(the device allows 10 minutes a command; calling it again continues). ``prepare`` writes the random
GGUF files the steps load beforehand (device.sh runs it while llama.cpp compiles). ``summarize`` writes
the summary (``schedulers-h200.json`` in issue 7's shape, and ``schedulers-h200.md``). ``archive
--archive P`` writes the state and the bundles (no images) to the tar.gz P, as ``run --archive P`` does
after every step. ``--cpu-smoke``
runs the same pipeline on this machine's CPU with the tiny models (llama-tiny, sd3-tiny, whisper-tiny;
a 4 s clip) so that a GPU session meets only GPU problems:

    python -m benchmarks.study.h200 run --cpu-smoke --state results/study-smoke
    python -m benchmarks.study.h200 summarize --cpu-smoke --state results/study-smoke
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
import tarfile
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.clock import now
from benchmarks.results import write_bundle
from benchmarks.spec import Workflow, from_dict, load_file, to_dict

STUDY_DIR = Path(__file__).resolve().parent
WORKFLOWS: dict[str, Path] = {
    "mix": STUDY_DIR / "workflows" / "mix.yml",
    "content-creation": STUDY_DIR / "workflows" / "content-creation.yml",
}
SCHEDULERS = ("greedy", "credit", "partition")
REPEAT_ORDER = (("greedy", "credit"), ("partition",))
# Greedy "misses" once the mean attainment of the mix falls below this: the original ConsumerBench's
# greedy figure was 0.62, partition 0.85; 0.9 is where users start to notice.
KNEE = 0.9

# Load levels, each a set of overrides per application type (applied to every unit of that type).
# All on the 3B chat model: a level adds concurrent users, not a larger model (the 8B GGUF alone takes
# minutes of a 30-minute device session to write). GPU memory bounds them: a chat session holds its own
# 6.4 GB model, an SD 3.5 medium pipeline ~7 GB at 1280x1280, a Whisper large-v3-turbo stream 1.6 GB;
# L3 needs ~90 GB of the H200's 141.
Overrides = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Level:
    name: str
    description: str
    overrides: Overrides = field(default_factory=dict)


LEVELS: tuple[Level, ...] = (
    Level("L0", "one user of each application"),
    Level(
        "L1",
        "4 chat sessions, 2 image generators",
        {"Chatbot": {"concurrency": 4}, "ImageGen": {"concurrency": 2}},
    ),
    Level(
        "L2",
        "6 chat sessions, 3 image generators, 2 caption streams",
        {"Chatbot": {"concurrency": 6}, "ImageGen": {"concurrency": 3}, "LiveCaptions": {"concurrency": 2}},
    ),
    Level(
        "L3",
        "8 chat sessions, 4 image generators at 1280x1280, 3 caption streams",
        {
            "Chatbot": {"concurrency": 8},
            "ImageGen": {"concurrency": 4, "height": 1280, "width": 1280},
            "LiveCaptions": {"concurrency": 3},
        },
    ),
)
SMOKE_LEVELS: tuple[Level, ...] = (
    Level("L0", "one user of each application"),
    Level("L1", "2 chat sessions", {"Chatbot": {"concurrency": 2}}),
)
# --cpu-smoke: the same workflows with the tiny models, on the CPU, a few requests each.
SMOKE: Overrides = {
    "*": {"device": "cpu"},
    "Chatbot": {
        "model": "llama-tiny@random",
        "num_requests": 2,
        "max_tokens": 8,
        "arrival": {"kind": "closed"},
    },
    "ImageGen": {"model": "sd3-tiny@random", "num_requests": 2, "steps": 2, "height": 64, "width": 64},
    "LiveCaptions": {"model": "whisper-tiny@random", "num_requests": 1, "max_new_tokens": 4},
}
RUN_LIMIT_S = {"gpu": 300.0, "smoke": 90.0}  # one run past this is cut (and recorded as failed)
FIRST_GUESS_S = {"gpu": 150.0, "smoke": 20.0}  # a step's cost before any was measured


# --------------------------------------------------------------------------------------------------
# Building the workflows of each step
# --------------------------------------------------------------------------------------------------


def apply_overrides(data: dict[str, Any], overrides: Overrides) -> dict[str, Any]:
    """Return a copy of a canonical workflow dict with per-type overrides applied to its units."""
    out = copy.deepcopy(data)
    for unit in _units(out).values():
        for key in ("*", unit["type"]):
            for name, value in overrides.get(key, {}).items():
                unit[name] = copy.deepcopy(value)
    return out


def _units(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in data.items() if isinstance(v, dict) and "type" in v}


def only_node(data: dict[str, Any], node: str) -> dict[str, Any]:
    """Return a copy of a workflow dict holding one node (without its dependencies) and its unit."""
    out = copy.deepcopy(data)
    spec = out["workflows"][node]
    for name in list(_units(out)):
        if name != spec["uses"]:
            del out[name]
    out["workflows"] = {node: {"uses": spec["uses"]}}
    out["name"] = f"{data['name']}-solo-{node}"
    return out


@dataclass
class Study:
    """The study's configuration: GPU scale, or the CPU smoke profile with its own state folder."""

    state_dir: Path
    smoke: bool = False
    repeats: int = 1  # runs of each workflow under each scheduler at the knee

    @property
    def profile(self) -> str:
        return "smoke" if self.smoke else "gpu"

    @property
    def levels(self) -> tuple[Level, ...]:
        return SMOKE_LEVELS if self.smoke else LEVELS

    def workflow_dict(self, name: str, level: Level) -> dict[str, Any]:
        """Return the canonical dict of a study workflow at a load level (smoke overrides applied)."""
        data = to_dict(load_file(WORKFLOWS[name]))
        if self.smoke:
            data = apply_overrides(data, SMOKE)
            clip = self.smoke_clip()
            for unit in _units(data).values():
                if unit["type"] == "LiveCaptions":
                    unit["audio"] = str(clip)
        out = apply_overrides(data, level.overrides)
        # More sessions share the unit's requests (ceil), so a level adds concurrent users, not work
        # per user, and a run stays within the device's per-command time.
        for name, unit in _units(out).items():
            given = level.overrides.get(unit["type"], {})
            if unit.get("concurrency", 1) > 1 and "num_requests" not in given:
                unit["num_requests"] = -(-_units(data)[name]["num_requests"] // unit["concurrency"])
        return out

    def smoke_clip(self) -> Path:
        """Return a 4 s cut of a shipped clip (captions stream at wall-clock pace: 4 s, not 12)."""
        import soundfile

        from benchmarks.apps.datasets import DATA_DIR

        path = self.state_dir / "clip-4s.wav"
        if not path.is_file():
            samples, rate = soundfile.read(str(DATA_DIR / "audio" / "clip-1.flac"))
            path.parent.mkdir(parents=True, exist_ok=True)
            soundfile.write(str(path), samples[: 4 * rate], rate)
        return path


# --------------------------------------------------------------------------------------------------
# Steps and state
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One run of the study: a workflow (or one of its nodes alone) at a level under a scheduler."""

    workflow: str
    kind: str  # "sweep" (the mix at a level, finding a break), "solo" (one node alone), "mix" (all nodes)
    level: str
    scheduler: str
    node: str | None = None
    repeat: int = 1  # the n-th run of the same step (repeats after the first: --repeats)

    @property
    def key(self) -> str:
        parts = (self.workflow, self.kind, self.level, self.node or self.scheduler)
        return "/".join(parts) + (f"/r{self.repeat}" if self.repeat > 1 else "")


class State:
    """``state.json``: every finished step's summary (bundle path, wall time, error), kept between calls."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.path = directory / "state.json"
        self.data: dict[str, Any] = (
            json.loads(self.path.read_text()) if self.path.is_file() else {"steps": {}}
        )

    def get(self, step: Step) -> dict[str, Any] | None:
        entry: dict[str, Any] | None = self.data["steps"].get(step.key)
        return entry

    def put(self, step: Step, entry: dict[str, Any]) -> None:
        self.data["steps"][step.key] = entry
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.replace(self.path)

    def result(self, step: Step) -> dict[str, Any] | None:
        """Return the result document of a finished step, or None (not run, or failed before running)."""
        entry = self.get(step)
        if not entry or not entry.get("bundle"):
            return None
        result: dict[str, Any] = json.loads((self.dir / entry["bundle"] / "result.json").read_text())
        return result


class StudyError(RuntimeError):
    """The study cannot go on (its first load level failed): nothing would be comparable."""


def sweep_step(scheduler: str, level: str, knee_level: str) -> Step:
    """Return the run of the mix under a scheduler at a level in that scheduler's sweep: at greedy's knee,
    the other schedulers' first run of the mix (one run serves both)."""
    if scheduler != "greedy" and level == knee_level:
        return Step("mix", "mix", level, scheduler)
    return Step("mix", "sweep", level, scheduler)


@dataclass
class Sweep:
    """One scheduler's sweep of the mix's levels so far."""

    measured: list[tuple[Level, Step]]  # the levels run, lowest first
    next: Step | None = None  # the step to run next; None when the sweep has ended
    breaks_at: Level | None = None  # the first level whose mean attainment fell below KNEE
    failed: tuple[Level, str] | None = None  # the level that could not run or had a failed application, why


def scheduler_sweep(study: Study, state: State, scheduler: str, knee_level: str) -> Sweep:
    """Walk a scheduler's sweep one level at a time from greedy's knee (greedy's own from the first
    level): upward while it meets ``KNEE`` (its break level is the first that does not), downward while
    it does not (its break level is the lowest that does not; attainment is taken to fall as the load
    grows). A level that failed (a broken measurement, not an SLO miss) ends the walk."""
    sweep = Sweep([])
    # Greedy's walk is the sweep that finds the knee: from the first level up.
    start = 0 if scheduler == "greedy" else _index(study, knee_level)

    def measure(index: int) -> float | None:
        """Return the level's mean attainment; None when the walk stops there (pending or failed)."""
        level = study.levels[index]
        step = sweep_step(scheduler, level.name, knee_level)
        entry = state.get(step)
        if entry is None:
            sweep.next = step
            return None
        result = state.result(step)
        attainment = result.get("mean_attainment") if result else None
        if result is None or attainment is None or entry.get("error"):
            sweep.failed = (level, entry.get("error") or "no attainment")
            return None
        sweep.measured.insert(0 if index < start else len(sweep.measured), (level, step))
        return float(attainment)

    at_knee = measure(start)
    if at_knee is None:
        return sweep
    if at_knee >= KNEE:
        for index in range(start + 1, len(study.levels)):
            attainment = measure(index)
            if attainment is None:
                return sweep
            if attainment < KNEE:
                sweep.breaks_at = study.levels[index]
                return sweep
        return sweep
    for index in range(start - 1, -1, -1):
        attainment = measure(index)
        if attainment is None:
            return sweep
        if attainment >= KNEE:
            sweep.breaks_at = study.levels[index + 1]
            return sweep
    sweep.breaks_at = study.levels[0]
    return sweep


def _index(study: Study, level: str) -> int:
    return [lv.name for lv in study.levels].index(level)


def knee(study: Study, state: State) -> Level | None:
    """Return the knee of the load sweep, or None while the sweep goes on.

    The knee is the first level where greedy's mean attainment falls below ``KNEE``; a level that could
    not run, or where an application failed (out of memory, a crash), ends the sweep at the level before
    it: a failed application is a broken measurement, not an SLO miss. Raises StudyError when the first
    level itself failed. The last level when none misses.
    """
    sweep = scheduler_sweep(study, state, "greedy", study.levels[0].name)
    if sweep.next is not None:
        return None
    if sweep.failed is not None and not sweep.measured:
        level, reason = sweep.failed
        raise StudyError(f"the first sweep level {level.name} failed: {reason}")
    if sweep.breaks_at is not None:
        return sweep.breaks_at
    return sweep.measured[-1][0] if sweep.failed is not None else study.levels[-1]


def plan(study: Study, state: State) -> Iterator[Step]:
    """Yield the study's steps in order, up to the first sweep step not run yet while the knee is unknown."""
    found = knee(study, state)
    for level in study.levels:
        step = Step("mix", "sweep", level.name, "greedy")
        if state.get(step) is None:
            if found is None:
                yield step
            break
        yield step
    if found is None:
        return
    for name in WORKFLOWS:
        nodes = to_dict(load_file(WORKFLOWS[name]))["workflows"]
        for node in nodes:
            yield Step(name, "solo", found.name, "greedy", node)
        for scheduler in SCHEDULERS:
            if name == "mix" and scheduler == "greedy":
                continue  # the sweep ran it at this level
            yield Step(name, "mix", found.name, scheduler)
    # The other schedulers' break levels (greedy's is the knee), each application alone at those above it.
    above: list[Level] = []
    for scheduler in SCHEDULERS[1:]:
        sweep = scheduler_sweep(study, state, scheduler, found.name)
        for step in [step for _, step in sweep.measured] + ([sweep.next] if sweep.next else []):
            if step.level != found.name:  # the knee's run is the mix step above
                yield step
        broke = sweep.breaks_at
        if broke and _index(study, broke.name) > _index(study, found.name) and broke not in above:
            above.append(broke)
    for level in above:
        for node in to_dict(load_file(WORKFLOWS["mix"]))["workflows"]:
            yield Step("mix", "solo", level.name, "greedy", node)
    # Repeats come last, so that a study short of device time still has every figure once; greedy and
    # credit (the comparison the study is for) before partition.
    for repeat in range(2, study.repeats + 1):
        for group in REPEAT_ORDER:
            for name in WORKFLOWS:
                for scheduler in group:
                    yield Step(name, "mix", found.name, scheduler, repeat=repeat)


def workflow_of(study: Study, step: Step) -> Workflow:
    """Return the validated workflow a step runs."""
    level = next(lv for lv in study.levels if lv.name == step.level)
    data = study.workflow_dict(step.workflow, level)
    if step.node is not None:
        data = only_node(data, step.node)
    return from_dict(data)


def run_step(study: Study, state: State, step: Step, limit_s: float) -> dict[str, Any]:
    """Run one step, write its bundle under the state folder; return its state entry.

    A run cut by a ``limit_s`` below the study's own ``RUN_LIMIT_S`` (the time left in the device call)
    is no measurement: its bundle is deleted, nothing is recorded, the step stays pending and runs again
    in the next call; the entry returned says ``cut``.
    """
    from benchmarks.runner import TIME_LIMIT_REASON, PreflightError, run_workflow
    from benchmarks.schedulers.base import SchedulerError

    bundle = Path(step.key.replace("/", "-"))
    started = now()
    entry: dict[str, Any] = {"scheduler": step.scheduler, "level": step.level}
    try:
        workflow = workflow_of(study, step)
        result = run_workflow(
            workflow, scheduler=step.scheduler, out_dir=state.dir / bundle, time_limit_s=limit_s
        )
        if limit_s < RUN_LIMIT_S[study.profile] and result.reason == TIME_LIMIT_REASON.format(limit_s):
            shutil.rmtree(state.dir / bundle, ignore_errors=True)
            entry.update(status="cut", error="cut by the time left in this call; it runs again in the next")
            entry["wall_s"] = round(now() - started, 1)
            return entry
        write_bundle(result, state.dir / bundle)
        entry.update(bundle=str(bundle), status=str(result.status), mean_attainment=result.mean_attainment)
        failed = [f"{n.name}: {n.reason}" for n in result.failed_nodes()]
        if failed:
            entry["error"] = "; ".join(failed)
    except (PreflightError, SchedulerError) as exc:
        entry.update(status="not run", error=str(exc))
    except Exception as exc:
        entry.update(status="not run", error=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc())
    entry["wall_s"] = round(now() - started, 1)
    state.put(step, entry)
    return entry


def prepare_models(workflow: Workflow) -> list[str]:
    """Write the random GGUF files a workflow's Chatbot units load, if not cached yet; return their names.

    Done before the step's run so that writing a file (the 3B model: 6.4 GB, 11 s on the CI machine,
    longer on a slow disk) never counts against the run's time limit, and a call that runs out of time
    keeps what it wrote.
    """
    from benchmarks.models import RANDOM, random_gguf

    written = []
    for unit in workflow.applications.values():
        name = (unit.model or "").removesuffix("@random")
        if unit.type == "Chatbot" and (unit.model or "").endswith("@random") and name in RANDOM:
            random_gguf(RANDOM[name])
            written.append(name)
    return written


def prepare_all(study: Study) -> list[str]:
    """Write the random GGUF files of every workflow at every level (device.sh: during the llama build)."""
    names: set[str] = set()
    for name in WORKFLOWS:
        for level in study.levels:
            names.update(prepare_models(from_dict(study.workflow_dict(name, level))))
    return sorted(names)


def write_archive(state_dir: Path, path: Path) -> None:
    """Write the state and the bundles, without images, as one tar.gz (top folder: the state folder's name).

    Written beside and renamed, so a reader never sees half an archive; the device gives back at most
    8 files, and result.json keeps the images' paths.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(state_dir, arcname=state_dir.name, filter=lambda i: None if i.name.endswith(".png") else i)
    tmp.replace(path)


def run_study(study: Study, budget_s: float, log: Any = None, archive: Path | None = None) -> int:
    """Run the pending steps that fit in ``budget_s``; return how many steps are still pending.

    With ``archive``, the state is archived there after every recorded step (a call killed at its
    limit still gives back what it ran).
    """
    log = log or sys.stdout
    state = State(study.state_dir)
    started = now()
    while True:
        pending = [s for s in plan(study, state) if state.get(s) is None]
        if not pending:
            print("study complete: every step has run (summarize next)", file=log)
            return 0
        step = pending[0]
        walls = [e["wall_s"] for e in state.data["steps"].values() if e.get("bundle")]
        guess = max(walls) if walls else FIRST_GUESS_S[study.profile]
        left = budget_s - (now() - started)
        if guess > left:
            print(
                f"stopping: {left:.0f} s left in this call, a step takes ~{guess:.0f} s; call again", file=log
            )
            return len(pending)
        began = now()
        models = prepare_models(workflow_of(study, step))
        if now() - began > 1:
            print(f"   models ready ({', '.join(models)}) in {now() - began:.0f} s", file=log, flush=True)
            continue  # the budget is checked again with the time that took
        print(f"== {step.key}", file=log, flush=True)
        entry = run_step(study, state, step, min(RUN_LIMIT_S[study.profile], left))
        line = f"   {entry['status']} in {entry['wall_s']} s, mean attainment {entry.get('mean_attainment')}"
        print(line + (f"; {entry['error']}" if entry.get("error") else ""), file=log, flush=True)
        if entry["status"] == "cut":
            return len(pending)
        if archive is not None:
            write_archive(study.state_dir, archive)


# --------------------------------------------------------------------------------------------------
# Summary: docs/results/schedulers-h200.json and .md
# --------------------------------------------------------------------------------------------------


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _app_summary(runs: Sequence[Mapping[str, Any]], solo: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return one application's figures over its runs: requests pooled, attainment of each run beside."""
    from benchmarks.metrics import application_metrics
    from benchmarks.results import slo_of_v1
    from benchmarks.spec import SLO

    first = runs[0]
    # The archive holds schema 1 bundles (SLO strings), later runs schema 2 ({metric, op, threshold_s}).
    slos = [SLO.model_validate(slo_of_v1(s)) for s in first["slo"]]
    pooled = application_metrics([r for app in runs for r in app["requests"]], slos)
    latency = {
        m: {"p50": s.get("p50"), "p99": s.get("p99")}
        for m, s in pooled["metrics"].items()
        if s.get("p50") is not None
    }
    out: dict[str, Any] = {
        "type": first["type"],
        "slo": [str(s) for s in slos],
        "slo_attainment": pooled["slo_attainment"],
        "slo_attainment_runs": [app["slo_attainment"] for app in runs],
        "requests": pooled["requests_counted"],
        "latency_s": latency,
    }
    if solo is not None:
        out["solo_attainment"] = solo["slo_attainment"]
        out["slowdown_vs_solo"] = {
            m: round(v["p50"] / solo["metrics"][m]["p50"], 3)
            for m, v in latency.items()
            if solo["metrics"].get(m, {}).get("p50")
        }
    return out


def _run_figures(result: Mapping[str, Any], bundle: Path) -> dict[str, Any]:
    """Return one run's figures; SM activity while serving read back from its telemetry (bundles
    written before the result had ``telemetry.serving`` have the samples, not the figure)."""
    from benchmarks.monitor.telemetry import TelemetryRecorder, active_span

    run = (result.get("telemetry") or {}).get("run") or {}
    span = active_span(result["applications"])
    serving = TelemetryRecorder.load(bundle).window(*span, 1) if span else {}
    return {
        "bundle": bundle.name,
        "mean_attainment": result["mean_attainment"],
        "sm_activity": serving.get("sm_activity_mean_pct"),
        "sm_activity_run": run.get("sm_activity_mean_pct"),
        "fairness": result["fairness"],
        "makespan_s": result["makespan_s"],
        "energy_j": run.get("gpu_energy_j"),
    }


def _scheduler_summary(
    runs: Sequence[tuple[Mapping[str, Any], Path]], solos: Mapping[str, Any], errors: Sequence[str]
) -> dict[str, Any]:
    """Return a scheduler's figures on a workflow: each run's, their means, and the applications pooled."""
    if not runs:
        return {
            "mean_attainment": None,
            "sm_activity": None,
            "fairness": None,
            "makespan_s": None,
            "apps": {},
            "runs": 0,
            "error": "; ".join(errors) or None,
        }
    per_run = [_run_figures(result, bundle) for result, bundle in runs]
    out: dict[str, Any] = {
        key: _mean([r[key] for r in per_run])
        for key in ("mean_attainment", "sm_activity", "sm_activity_run", "fairness", "makespan_s", "energy_j")
    }
    out["runs"] = len(per_run)
    out["per_run"] = per_run
    names = [a["name"] for a in runs[0][0]["applications"]]
    out["apps"] = {
        name: _app_summary(
            [a for result, _ in runs for a in result["applications"] if a["name"] == name], solos.get(name)
        )
        for name in names
    }
    if errors:
        out["error"] = "; ".join(errors)
    return out


def scheduler_runs(
    study: Study, state: State, name: str, level: Level, scheduler: str
) -> tuple[list[tuple[dict[str, Any], Path]], list[str]]:
    """Return the finished runs of a workflow under a scheduler at a level (first, then repeats) and
    the errors of those that failed."""
    runs: list[tuple[dict[str, Any], Path]] = []
    errors: list[str] = []
    repeat = 1
    while True:
        kind = "sweep" if name == "mix" and scheduler == "greedy" and repeat == 1 else "mix"
        step = Step(name, kind, level.name, scheduler, repeat=repeat)
        entry = state.get(step)
        if entry is None:
            return runs, errors
        result = state.result(step)
        if result is not None and not entry.get("error"):
            runs.append((result, state.dir / entry["bundle"]))
        else:
            errors.append(f"run {repeat}: {entry.get('error') or entry.get('status')}")
        repeat += 1


def summarize(study: Study) -> dict[str, Any]:
    """Return the summary: {"platform", "workflows": {name: {scheduler: {...}}}, "level", "sweep"}."""
    state = State(study.state_dir)
    level = knee(study, state)
    if level is None:
        raise SystemExit("the load sweep has not finished: run the study first")
    workflows: dict[str, Any] = {}
    platform: dict[str, Any] | None = None
    for name in WORKFLOWS:
        solos: dict[str, Any] = {}
        for node in to_dict(load_file(WORKFLOWS[name]))["workflows"]:
            solo = state.result(Step(name, "solo", level.name, "greedy", node))
            if solo and solo["applications"]:
                solos[node] = solo["applications"][0]
        per: dict[str, Any] = {}
        for scheduler in SCHEDULERS:
            runs, errors = scheduler_runs(study, state, name, level, scheduler)
            platform = platform or (runs[0][0]["platform"] if runs else None)
            per[scheduler] = _scheduler_summary(runs, solos, errors)
        workflows[name] = per
    sweep: list[dict[str, Any]] = []
    breaks: dict[str, Any] = {}
    mix_nodes = to_dict(load_file(WORKFLOWS["mix"]))["workflows"]
    for scheduler in SCHEDULERS:
        walk = scheduler_sweep(study, state, scheduler, level.name)
        for lv, step in walk.measured:
            result = state.result(step) or {}
            alone = {}
            for node in mix_nodes:
                solo = state.result(Step("mix", "solo", lv.name, "greedy", node))
                if solo and solo["applications"]:
                    alone[node] = solo["applications"][0]["slo_attainment"]
            sweep.append(
                {
                    "level": lv.name,
                    "load": lv.description,
                    "scheduler": scheduler,
                    "mean_attainment": result["mean_attainment"],
                    "apps": {a["name"]: a["slo_attainment"] for a in result["applications"]},
                    "alone": alone,
                }
            )
        breaks[scheduler] = {
            "level": walk.breaks_at.name if walk.breaks_at else None,
            "pending": walk.next.key if walk.next else None,
            "ended": f"{walk.failed[0].name}: {walk.failed[1]}" if walk.failed else None,
        }
    return {
        "platform": platform,
        "workflows": workflows,
        "level": {"name": level.name, "load": level.description, "knee_below": KNEE},
        "sweep": sweep,
        "breaks": breaks,
    }


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f} %"


def _num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "—" if x is None else fmt.format(x)


def _runs(values: Sequence[float | None], fmt: Any = _pct) -> str:
    """Return ' (a, b)': each run's figure, when there was more than one run."""
    return f" ({', '.join(fmt(v) for v in values)})" if len(values) > 1 else ""


def _breaks(breaks: Mapping[str, Mapping[str, Any]], below: float) -> str:
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
            parts.append(f"{scheduler} none (at or above {below:.0%} at every level)")
    return ", ".join(parts)


def render_markdown(summary: Mapping[str, Any], plots: Sequence[str], hand_written: str) -> str:
    """Return ``schedulers-h200.md``: the platform, the sweep, one table per workflow, the plots, then
    the hand-written part (analysis, how it was run) as it was."""
    gpu = ", ".join(g.get("name", "?") for g in (summary.get("platform") or {}).get("gpus", [])) or "no GPU"
    lines = [
        "# Schedulers on one GPU: the H200 study (issue 7)",
        "",
        f"Platform: {gpu}. Load level of the tables: {summary['level']['name']} "
        f"({summary['level']['load']}), the first level of the sweep where greedy's mean SLO attainment "
        f"fell below {summary['level']['knee_below']:.0%} (the last level when it never did).",
        "",
        "Written by `python -m benchmarks.study.h200 summarize` from the result bundles; the figures are",
        "defined in docs/metrics.md, SM activity here is the mean while the run serves requests (first",
        "counted request's start to the last one's end; the whole run, model loading included, in",
        "parentheses). Several runs: means of the runs' figures, each run's in parentheses; an",
        "application's attainment and latencies pool the requests of all runs.",
        "",
        "## Load sweep (workflow mix)",
        "",
        "A scheduler's break level is the first level where its mean attainment on the mix (one run per",
        f"level) falls below {summary['level']['knee_below']:.0%}. Greedy's is the knee, found from L0 "
        "upward; credit and partition walk from the knee, up while they meet it and down while they do not. "
        f"Break levels: {_breaks(summary['breaks'], summary['level']['knee_below'])}.",
        "",
        "| level | load | scheduler | mean attainment | per application (alone at that level) |",
        "|---|---|---|---|---|",
    ]
    for row in summary["sweep"]:
        apps = ", ".join(
            f"{k} {_pct(v)}" + (f" ({_pct(row['alone'][k])})" if k in row["alone"] else "")
            for k, v in row["apps"].items()
        )
        lines.append(
            f"| {row['level']} | {row['load']} | {row['scheduler']} "
            f"| {_pct(row['mean_attainment'])} | {apps} |"
        )
    for name, per in summary["workflows"].items():
        lines += [
            "",
            f"## Workflow {name}",
            "",
            "| scheduler | runs | mean attainment | SM activity serving (whole run) | fairness "
            "| makespan (s) | GPU energy (J) |",
            "|---|---|---|---|---|---|---|",
        ]
        for scheduler, s in per.items():
            if not s.get("runs"):
                lines.append(f"| {scheduler} | 0 | not run: {s.get('error')} | | | | |")
                continue
            runs = s["per_run"]
            lines.append(
                f"| {scheduler} | {s['runs']} | {_pct(s['mean_attainment'])}"
                f"{_runs([r['mean_attainment'] for r in runs])} | {_num(s['sm_activity'])} % "
                f"({_num(s['sm_activity_run'])} %) | {_num(s['fairness'], '{:.2f}')} | "
                f"{_num(s['makespan_s'])} | {_num(s.get('energy_j'), '{:.0f}')} |"
            )
        lines += [
            "",
            "| application | scheduler | SLO | attainment (solo) | p50 / p99 (s) | p50 slowdown vs solo |",
            "|---|---|---|---|---|---|",
        ]
        for scheduler, s in per.items():
            for app, a in s["apps"].items():
                lat = "; ".join(
                    f"{m} {_num(v['p50'], '{:.3f}')} / {_num(v['p99'], '{:.3f}')}"
                    for m, v in a["latency_s"].items()
                )
                slow = "; ".join(f"{m} x{v}" for m, v in a.get("slowdown_vs_solo", {}).items())
                lines.append(
                    f"| {app} | {scheduler} | {', '.join(a['slo'])} | {_pct(a['slo_attainment'])}"
                    f"{_runs(a['slo_attainment_runs'])} ({_pct(a.get('solo_attainment'))}) | {lat} | {slow} |"
                )
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    return "\n".join(lines) + "\n\n" + HAND_WRITTEN_MARKER + "\n\n" + hand_written.lstrip("\n")


# Everything below this line of schedulers-h200.md is written by hand; ``summarize`` keeps it.
HAND_WRITTEN_MARKER = "<!-- Written by hand below this line: summarize keeps it as it is. -->"


def write_plots(study: Study, summary: Mapping[str, Any], md_path: Path) -> list[str]:
    """Write the study's SVG plots beside the Markdown; return their file names."""
    from benchmarks.monitor.telemetry import TelemetryRecorder, active_span
    from benchmarks.study.plots import attainment_svg, sm_activity_svg

    state = State(study.state_dir)
    level = next(lv for lv in study.levels if lv.name == summary["level"]["name"])
    timelines = {}
    for scheduler in SCHEDULERS:
        runs, _ = scheduler_runs(study, state, "mix", level, scheduler)
        if runs:
            result, bundle = runs[0]
            series, _ = TelemetryRecorder.load(bundle).sm_activity()
            if series is not None:
                timelines[scheduler] = (list(series.t), list(series.v), active_span(result["applications"]))
    plots = {
        f"{md_path.stem}-attainment.svg": attainment_svg(summary["workflows"], SCHEDULERS),
        f"{md_path.stem}-sm-activity.svg": sm_activity_svg(timelines) if timelines else None,
    }
    written = []
    for name, svg in plots.items():
        if svg is not None:
            (md_path.parent / name).write_text(svg + "\n")
            written.append(name)
    return written


def write_summary(study: Study, json_path: Path, md_path: Path) -> dict[str, Any]:
    """Write the summary JSON (and ``<name>-sweep.json``), the plots and the Markdown, keeping its
    hand-written part (the default: how to run the study). Returns the whole summary."""
    summary = summarize(study)
    hand_written = (
        "## How to run\n\nOn the GPU machine, once per call until it says so:"
        " bash benchmarks/study/device.sh\n"
    )
    if md_path.is_file() and HAND_WRITTEN_MARKER in md_path.read_text():
        text = md_path.read_text()
        hand_written = text[text.index(HAND_WRITTEN_MARKER) + len(HAND_WRITTEN_MARKER) :]
    json_path.parent.mkdir(parents=True, exist_ok=True)
    # Issue 7's shape exactly; the sweep that chose the level goes beside it.
    json_path.write_text(json.dumps({k: summary[k] for k in ("platform", "workflows")}, indent=1) + "\n")
    sweep_path = json_path.with_name(f"{json_path.stem}-sweep.json")
    sweep_path.write_text(json.dumps({k: summary[k] for k in ("level", "sweep", "breaks")}, indent=1) + "\n")
    md_path.parent.mkdir(parents=True, exist_ok=True)
    md_path.write_text(render_markdown(summary, write_plots(study, summary, md_path), hand_written))
    return summary


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study command line; return the exit status (0: done, 3: steps still pending)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.study.h200", description=__doc__.splitlines()[0]
    )
    parser.add_argument("command", choices=("run", "summarize", "plan", "prepare", "archive"))
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny models on this CPU, end to end")
    parser.add_argument("--state", type=Path, help="state and bundles (default results/h200-study/<profile>)")
    parser.add_argument("--budget-s", type=float, default=510.0, help="run: stop before exceeding this")
    parser.add_argument(
        "--repeats", type=int, default=1, help="run/plan: runs of each workflow under each scheduler (>= 1)"
    )
    parser.add_argument(
        "--archive", type=Path, help="run: archive the state here after each step; archive: where to"
    )
    parser.add_argument("--json", type=Path, help="summarize: summary JSON (default docs/results/...)")
    parser.add_argument("--md", type=Path, help="summarize: summary Markdown (default docs/results/...)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    study = Study(
        args.state or Path("results/h200-study") / ("smoke" if args.cpu_smoke else "gpu"),
        args.cpu_smoke,
        args.repeats,
    )
    try:
        return _command(args, study)
    except StudyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _command(args: argparse.Namespace, study: Study) -> int:
    if args.command == "plan":
        state = State(study.state_dir)
        for step in plan(study, state):
            entry = state.get(step)
            print(f"{step.key}: {entry['status'] if entry else 'pending'}")
        return 0
    if args.command == "prepare":
        for name in prepare_all(study):
            print(f"{name}@random ready")
        return 0
    if args.command == "archive":
        if args.archive is None:
            raise StudyError("archive needs --archive PATH")
        write_archive(study.state_dir, args.archive)
        return 0
    if args.command == "run":
        t = time.monotonic()
        pending = run_study(study, args.budget_s, archive=args.archive)
        print(f"({time.monotonic() - t:.0f} s in this call)")
        return 3 if pending else 0
    default = Path("docs/results") if not args.cpu_smoke else study.state_dir
    summary = write_summary(
        study, args.json or default / "schedulers-h200.json", args.md or default / "schedulers-h200.md"
    )
    print(json.dumps({k: summary[k] for k in ("level", "breaks")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
