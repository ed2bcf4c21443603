"""Running a sweep's steps: each one a workflow run whose bundle goes into the state folder, as many as fit
in a time budget, so a sweep can run in pieces (a machine that allows only so long a command)."""

from __future__ import annotations

import shutil
import traceback
from pathlib import Path
from typing import Any, TextIO

from benchmarks.clock import now
from benchmarks.results import write_bundle
from benchmarks.runner import TIME_LIMIT_REASON, PreflightError, run_workflow
from benchmarks.schedulers import SchedulerError
from benchmarks.spec.load import from_dict
from benchmarks.spec.model import Workflow
from benchmarks.sweep.model import Sweep, only_node
from benchmarks.sweep.plan import pending
from benchmarks.sweep.state import State, Step, write_archive

CLIP = "clip-1.flac"  # the packaged clip the smoke profile cuts when a LiveCaptions unit names none


def smoke_clip(sweep: Sweep, state_dir: Path) -> str | None:
    """Return the path of the smoke profile's audio cut (``smoke.audio_s`` seconds of the packaged clip),
    writing it into the state folder once; None when the profile keeps the units' own audio."""
    smoke = sweep.spec.smoke
    if not sweep.smoke or smoke is None or smoke.audio_s is None:
        return None
    path = state_dir / f"clip-{smoke.audio_s:g}s.wav"
    if not path.is_file():
        import soundfile

        from benchmarks.apps.datasets import DATA_DIR

        samples, rate = soundfile.read(str(DATA_DIR / "audio" / CLIP))
        path.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(str(path), samples[: int(smoke.audio_s * rate)], rate)
    return str(path)


def workflow_of(sweep: Sweep, step: Step, audio: str | None = None) -> Workflow:
    """Return the validated workflow a step runs."""
    data = sweep.workflow_dict(step.workflow, sweep.level(step.level), audio)
    if step.node is not None:
        data = only_node(data, step.node)
    return from_dict(data)


def run_step(sweep: Sweep, state: State, step: Step, limit_s: float) -> dict[str, Any]:
    """Run one step, write its bundle under the state folder; return its state entry.

    A run cut by a ``limit_s`` below the sweep's own run limit (the time left in the budget) is no
    measurement: its bundle is deleted, nothing is recorded, the step stays pending and runs again in
    the next call; the entry returned says ``cut``.
    """
    bundle = state.dir / step.bundle
    started = now()
    entry: dict[str, Any] = {"scheduler": step.scheduler, "level": step.level}
    try:
        workflow = workflow_of(sweep, step, smoke_clip(sweep, state.dir))
        name, params = sweep.scheduler(step.scheduler)
        result = run_workflow(
            workflow,
            scheduler=name,
            scheduler_params=params,
            out_dir=bundle,
            time_limit_s=limit_s,
            kernel_trace=[n for n in sweep.spec.kernel_trace if n in workflow.nodes],
        )
        if limit_s < sweep.run_limit_s and result.reason == TIME_LIMIT_REASON.format(limit_s):
            shutil.rmtree(bundle, ignore_errors=True)
            entry.update(status="cut", error="cut by the time left in this call; it runs again in the next")
            entry["wall_s"] = round(now() - started, 1)
            return entry
        write_bundle(result, bundle)
        entry.update(bundle=step.bundle, status=str(result.status), mean_attainment=result.mean_attainment)
        failed = [f"{n.name}: {n.reason}" for n in result.failed_nodes()]
        if failed:
            entry["error"] = "; ".join(failed)
    except (PreflightError, SchedulerError) as exc:
        entry.update(status="not run", error=str(exc))
    except Exception as exc:
        # Any other failure of one step is recorded with its trace; the sweep goes on with the next.
        entry.update(status="not run", error=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc())
    entry["wall_s"] = round(now() - started, 1)
    state.put(step, entry)
    return entry


def prepare_models(workflow: Workflow) -> list[str]:
    """Write the random GGUF files a workflow's Chatbot units load, if not cached yet; return their names.

    Done before the step's run so that writing a file (a 3B model: 6.4 GB) never counts against the
    run's time limit, and a call that runs out of time keeps what it wrote.
    """
    from benchmarks.models.catalogue import random_twin
    from benchmarks.models.random_llama import random_gguf

    written = []
    for unit in workflow.applications.values():
        model = unit.model or ""
        twin = random_twin(model) if model.endswith("@random") else None
        # Every unit that loads a random Llama (a chat, a research agent), by its twin's name.
        if twin is not None and twin.family == "llama":
            random_gguf(twin)
            written.append(twin.name)
    return list(dict.fromkeys(written))


def prepare_all(sweep: Sweep) -> list[str]:
    """Write the random GGUF files of every workflow at every level; return their names."""
    names: set[str] = set()
    for name in sweep.base:
        for level in sweep.levels:
            names.update(prepare_models(from_dict(sweep.workflow_dict(name, level))))
    return sorted(names)


def run_sweep(
    sweep: Sweep, state: State, budget_s: float | None, log: TextIO, archive: Path | None = None
) -> int:
    """Run the pending steps that fit in ``budget_s`` (None: all); return how many are still pending.

    A step is started only when the longest step so far (``first_step_s`` before any) fits in what is
    left. With ``archive``, the state is archived there after every recorded step and at the end, so a
    call killed at its limit still gives back what it ran.
    """
    started = now()
    try:
        while True:
            steps = pending(sweep, state)
            if not steps:
                print("sweep complete: every step has run (--summarize next)", file=log)
                return 0
            step = steps[0]
            walls = [e["wall_s"] for e in state.entries.values() if e.get("bundle")]
            guess = max(walls) if walls else sweep.first_step_s
            left = None if budget_s is None else budget_s - (now() - started)
            if left is not None and guess > left:
                print(
                    f"stopping: {left:.0f} s left in this call, a step takes ~{guess:.0f} s; call again",
                    file=log,
                )
                return len(steps)
            began = now()
            models = prepare_models(workflow_of(sweep, step))
            if now() - began > 1:
                print(f"   models ready ({', '.join(models)}) in {now() - began:.0f} s", file=log, flush=True)
                continue  # the budget is checked again with the time that took
            print(f"== {step.key}", file=log, flush=True)
            limit = sweep.run_limit_s if left is None else min(sweep.run_limit_s, left)
            entry = run_step(sweep, state, step, limit)
            line = (
                f"   {entry['status']} in {entry['wall_s']} s, mean attainment {entry.get('mean_attainment')}"
            )
            print(line + (f"; {entry['error']}" if entry.get("error") else ""), file=log, flush=True)
            if entry["status"] == "cut":
                return len(steps)
            if archive is not None:
                write_archive(state.dir, archive)
    finally:
        if archive is not None and state.path.is_file():
            write_archive(state.dir, archive)
