"""Helpers of the sweep tests: the H200 sweep file, and finished steps recorded without running them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.metrics import application_metrics
from benchmarks.results import SCHEMA_VERSION, ResultDocument, write_bundle
from benchmarks.spec.model import parse_slo
from benchmarks.sweep.model import Sweep, load_sweep
from benchmarks.sweep.state import State, Step

ROOT = Path(__file__).resolve().parents[3]
H200 = ROOT / "studies" / "h200" / "mix.yml"


def h200(repeats: int = 1, smoke: bool = False) -> Sweep:
    """Return the H200 study's sweep, with its repeats set."""
    sweep = load_sweep(H200, smoke=smoke)
    sweep.spec = sweep.spec.model_copy(update={"repeats": repeats})
    return sweep


def record(
    state: State,
    step: Step,
    ttfts: list[float],
    error: str | None = None,
    gpm: bool = True,
    tokens_out: int | None = None,
    scheduler: dict[str, Any] | None = None,
) -> None:
    """Record a finished run whose chat made one request per TTFT (SLO 0.5 s), 1 s apart, from t = 2 s on,
    each of ``tokens_out`` tokens when given; its GPM telemetry reads 0 % before t = 2 s (loading) and
    80 % after. ``scheduler``: what the result records of its scheduler beside its name."""
    requests = [
        {
            "index": i,
            "status": "ok",
            "warmup": False,
            "arrival": 2.0 + i,
            "start": 2.0 + i,
            "end": 2.5 + i,
            "slo_met": ttft <= 0.5,
            "metrics": {"ttft": ttft},
            "info": {} if tokens_out is None else {"tokens_out": tokens_out},
            "series": {},
            "error": None,
        }
        for i, ttft in enumerate(ttfts)
    ]
    figures = application_metrics(requests, [parse_slo("ttft<=0.5s")])
    app: dict[str, Any] = {
        "name": "chat",
        "unit": "chat",
        "type": "Chatbot",
        "device": "gpu",
        "priority": "high",
        "model": "llama-tiny@random",
        "loaded": {},
        "slo": [parse_slo("ttft<=0.5s").model_dump()],
        "load_time_s": 1.0,
        "requests_total": len(ttfts),
        "requests_requested": len(ttfts),
        "requests_counted": figures["requests_counted"],
        "requests_met": figures["requests_met"],
        "slo_attainment": figures["slo_attainment"],
        "metrics": figures["metrics"],
        "normalized_latency": {},
        "throughput_rps": 1.0,
        "requests": requests,
    }
    window = {
        "sm_activity_mean_pct": 40.0,
        "sm_activity_source": "gpm",
        "sm_occupancy_mean_pct": None,
        "gpu_energy_j": 100.0,
        "gpu_energy_per_request_j": None,
        "cpu_energy_j": None,
        "cpu_energy_per_request_j": None,
    }
    result = ResultDocument.model_validate(
        {
            "schema_version": SCHEMA_VERSION,
            "status": "completed",
            "reason": None,
            "workflow": {},
            "scheduler": {"name": step.scheduler, **(scheduler or {})},
            "platform": {"gpus": [{"name": "NVIDIA H200"}]},
            "repeat_index": 1,
            "started_at_unix": 0.0,
            "clock": {},
            "makespan_s": 2.5 + len(ttfts),
            "critical_path": ["chat"],
            "mean_attainment": app["slo_attainment"],
            "fairness": 1.0,
            "requests_requested": len(ttfts),
            "requests_served": figures["requests_counted"],
            "nodes": [
                {
                    "name": "chat",
                    "uses": "chat",
                    "background": False,
                    "device": "gpu",
                    "status": "succeeded",
                    "started_at": 0.0,
                    "finished_at": 2.5 + len(ttfts),
                    "load_time_s": 1.0,
                    "reason": None,
                }
            ],
            "applications": [app],
            "telemetry": {
                "hz": 2.0,
                "ticks": 30,
                "missed_ticks": 0,
                "monitor_cpu_s": None,
                "error": None,
                "sources": {},
                "run": {**window, "gpu_memory_peak_bytes": None},
                "applications": {},
            },
        }
    )
    bundle = state.dir / step.bundle
    write_bundle(result, bundle)
    if gpm:
        rows = "".join(f"{t / 2},gpu0,{0.0 if t < 4 else 80.0},\n" for t in range(30))
        (bundle / "telemetry").mkdir(exist_ok=True)
        (bundle / "telemetry" / "gpm.csv").write_text("t,entity,sm_activity_pct,sm_occupancy_pct\n" + rows)
    entry: dict[str, Any] = {"bundle": step.bundle, "status": "completed", "wall_s": 1.0}
    state.put(step, entry | ({"error": error} if error else {}))


def attained(state: State, step: Step, attainment: float) -> None:
    """Record a finished run whose mean attainment is ``attainment`` (20 requests, that share on time)."""
    met = round(20 * attainment)
    record(state, step, [0.1] * met + [0.9] * (20 - met))


def not_run(state: State, step: Step, error: str) -> None:
    """Record a step that could not run (no bundle), with its reason."""
    state.put(step, {"status": "not run", "error": error, "wall_s": 0.1})
