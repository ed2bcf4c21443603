"""GPU check of the system monitor: a torch matmul load while the monitor samples at 50 Hz.

Usage: PYTHONPATH=. python3 benchmarks/perf/monitor_gpu_check.py --out DIR [--record FIXTURE.json]

Phases: idle, then a bf16 matmul loop in its own process (watched like an application), then idle.
Checks: GPM SM activity above 80 % under load, power above idle, the NVML energy counter never
decreasing and growing under load, the load's GPU memory attributed to its process, the sample rate
within 10 % of the asked rate. Prints a table (also written to DIR/monitor-check.md) and exits 1 if
a check failed. ``--record`` also saves every NVML/GPM call and answer of a short sampling run
under load, the fixture that tests/benchmarks/monitor replays on machines without a GPU.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing as mp
import shlex
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from benchmarks import clock
from benchmarks.monitor.process import MonitorProcess
from benchmarks.monitor.sampler import Sampler
from benchmarks.monitor.sources.gpm import GpmSource
from benchmarks.monitor.sources.nvml import NvmlSource
from benchmarks.monitor.telemetry import Series, TelemetryRecorder
from benchmarks.table import markdown_table, text_table

SOURCES = ["psutil", "nvml", "gpm", "dcgm", "rapl"]
SM_ACTIVITY_MIN = 80.0
POWER_RATIO_MIN = 1.2
RATE_TOLERANCE = 0.10


def matmul_load(conn: Connection, seconds: float, n: int, device: str) -> None:
    """Run bf16 n x n matmuls for ``seconds``; report ("start", t) after warm-up and ("end", t, matmuls)."""
    import torch

    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(3):
        a @ b
    sync()
    conn.send(("start", clock.now()))
    end, count = clock.now() + seconds, 0
    while clock.now() < end:
        for _ in range(10):
            a @ b
        sync()
        count += 10
    conn.send(("end", clock.now(), count))
    conn.close()


def start_load(seconds: float, n: int, device: str) -> tuple[mp.process.BaseProcess, Connection]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=matmul_load, args=(child, seconds, n, device), name="cb-matmul", daemon=True)
    proc.start()
    child.close()
    return proc, parent


def wait_for(conn: Connection, kind: str, timeout: float, between: Callable[[], None]) -> tuple[Any, ...]:
    deadline = clock.now() + timeout
    while clock.now() < deadline:
        if conn.poll(0.05):
            try:
                message: tuple[Any, ...] = conn.recv()
            except EOFError:
                raise RuntimeError(f"the load process exited before reporting '{kind}'") from None
            if message[0] == kind:
                return message
        between()
    raise TimeoutError(f"the load process did not report '{kind}' within {timeout:g} s")


# --------------------------------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------------------------------


def run_check(
    hz: float, idle_s: float, load_s: float, n: int, device: str, out: Path
) -> tuple[list[list[str]], bool]:
    t0 = clock.now()
    monitor = MonitorProcess(hz, SOURCES)
    recorder = TelemetryRecorder(hz, out)
    monitor.start(t0)

    def pump() -> None:
        for message in monitor.poll():
            recorder.on_message(message)

    deadline = clock.now() + 60
    while not recorder.sources and clock.now() < deadline:
        pump()
        time.sleep(0.05)
    idle_from = clock.now() - t0
    end_idle = clock.now() + idle_s
    while clock.now() < end_idle:
        pump()
        time.sleep(0.05)
    idle_to = clock.now() - t0
    proc, conn = start_load(load_s, n, device)
    assert proc.pid is not None
    monitor.watch("matmul", proc.pid)
    load_from = wait_for(conn, "start", 120, pump)[1] - t0
    _, end_t, matmuls = wait_for(conn, "end", load_s + 60, pump)
    load_to = end_t - t0
    proc.join(10)
    tail = clock.now() + 1.0
    while clock.now() < tail:
        pump()
        time.sleep(0.05)
    for message in monitor.stop():
        recorder.on_message(message)
    recorder.close()

    def one(source: str, entity: str, column: str) -> Series:
        return recorder.series.get((source, entity, column)) or Series()

    # Skip the first half second of load: clocks and power ramp up after the first kernels.
    a, b = load_from + 0.5, load_to - 0.1
    sm, occ = one("gpm", "gpu0", "sm_activity_pct"), one("gpm", "gpu0", "sm_occupancy_pct")
    tensor, dram = one("gpm", "gpu0", "tensor_activity_pct"), one("gpm", "gpu0", "dram_bw_util_pct")
    util, power = one("nvml", "gpu0", "util_gpu_pct"), one("nvml", "gpu0", "power_w")
    energy, app_mem = one("nvml", "gpu0", "energy_j"), one("nvml", "app:matmul", "gpu_mem_bytes")
    sm_load, sm_idle = sm.mean(a, b), sm.mean(idle_from, idle_to)
    p_load, p_idle = power.mean(a, b), power.mean(idle_from, idle_to)
    e_load, e_idle = energy.delta(load_from, load_to), energy.delta(idle_from, idle_to)
    monotonic = all(y >= x for x, y in zip(energy.v, energy.v[1:], strict=False)) and len(energy.v) > 1
    # The counter's energy against the integral of the power samples over the same interval.
    integral = sum(
        (t1 - t0_) * p
        for t0_, t1, p in zip(power.t, power.t[1:], power.v, strict=False)
        if load_from <= t0_ and t1 <= load_to
    )
    ticks, duration = recorder.stats.get("ticks", 0), recorder.stats.get("duration_s") or 0.0
    rate = ticks / duration if duration else 0.0
    gpm_rows = recorder.samples.get("gpm", 0)
    flops = 2 * n**3 * matmuls / (load_to - load_from)

    def f(v: float | None, fmt: str = "{:.1f}") -> str:
        return "-" if v is None else fmt.format(v)

    rows: list[list[str]] = [["check", "idle", "under load", "criterion", "result"]]
    ok = True

    def row(name: str, idle: str, load: str, criterion: str, passed: bool | None) -> None:
        nonlocal ok
        ok = ok and passed is not False
        rows.append([name, idle, load, criterion, "info" if passed is None else "PASS" if passed else "FAIL"])

    row(
        "SM activity, GPM (%)",
        f(sm_idle),
        f(sm_load),
        f"> {SM_ACTIVITY_MIN:g} under load",
        sm_load is not None and sm_load > SM_ACTIVITY_MIN,
    )
    for name, series in (
        ("SM occupancy, GPM (%)", occ),
        ("tensor activity, GPM (%)", tensor),
        ("DRAM bandwidth, GPM (%)", dram),
        ("GPU utilisation, NVML (%)", util),
    ):
        row(name, f(series.mean(idle_from, idle_to)), f(series.mean(a, b)), "", None)
    row(
        "power, NVML (W)",
        f(p_idle),
        f(p_load),
        f"load > {POWER_RATIO_MIN:g} x idle",
        p_load is not None and p_idle is not None and p_load > POWER_RATIO_MIN * p_idle,
    )
    row(
        "energy counter growth (J)",
        f(e_idle),
        f(e_load),
        "never decreases; grows under load",
        monotonic and e_load is not None and e_load > 0,
    )
    row(
        "energy counter / integral of power",
        "",
        f(e_load / integral if e_load and integral else None, "{:.3f}"),
        "",
        None,
    )
    peak = app_mem.max()
    row(
        "GPU memory of the load process (MiB)",
        "",
        f(None if peak is None else peak / 2**20, "{:.0f}"),
        "> 0 (attributed to its PID)",
        peak is not None and peak > 0,
    )
    row(
        "sample rate (Hz)",
        "",
        f"{rate:.2f} ({ticks} ticks; GPM rows at {gpm_rows / duration if duration else 0:.1f} Hz)",
        f"{hz:g} +/- {RATE_TOLERANCE:.0%}",
        abs(rate - hz) <= RATE_TOLERANCE * hz,
    )
    row(
        "monitor CPU (% of one core)",
        "",
        f((recorder.stats.get("cpu_s") or 0) / duration * 100 if duration else None),
        "",
        None,
    )
    rss = one("psutil", "app:matmul", "rss_bytes").max()
    row("RSS of the load process (MiB)", "", f(None if rss is None else rss / 2**20, "{:.0f}"), "", None)
    row("matmul rate (TFLOP/s)", "", f(flops / 1e12), "", None)
    for name, status in recorder.sources.items():
        row(
            f"source {name}",
            "",
            status["status"] + (f": {status['reason']}" if status.get("reason") else ""),
            "",
            None,
        )
    return rows, ok


# --------------------------------------------------------------------------------------------------
# Recording NVML for the tests
# --------------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, int | float | str) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, ctypes.Structure):
        return {name: _plain(getattr(value, name)) for name, *_ in value._fields_}
    if hasattr(value, "__dict__"):
        return {k: _plain(v) for k, v in vars(value).items()}
    return repr(value)


class RecordingNvml:
    """Wraps pynvml: every ``nvml*`` call and its answer (or NVML error code) is appended to ``calls``."""

    def __init__(self, module: Any) -> None:
        self._module = module
        self.calls: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._module, name)
        if not (name.startswith("nvml") and callable(attr)):
            return attr

        def call(*args: Any) -> Any:
            began = time.perf_counter()
            try:
                result = attr(*args)
            except self._module.NVMLError as exc:
                self.calls.append({"fn": name, "error": exc.value, "us": _us(began)})
                raise
            if name == "nvmlGpmMetricsGet":
                recorded: Any = [
                    [m.metricId, m.nvmlReturn, m.value] for m in result.metrics[: result.numMetrics]
                ]
            elif name in ("nvmlDeviceGetHandleByIndex", "nvmlGpmSampleAlloc", "nvmlGpmSampleGet"):
                recorded = None  # opaque pointers
            else:
                recorded = _plain(result)
            self.calls.append({"fn": name, "result": recorded, "us": _us(began)})
            return result

        return call


def _us(began: float) -> float:
    return round((time.perf_counter() - began) * 1e6, 1)


def call_costs(calls: list[dict[str, Any]]) -> list[list[str]]:
    """Return a table of the mean time of each recorded NVML call, costliest in total first."""
    times: dict[str, list[float]] = {}
    for c in calls:
        times.setdefault(c["fn"], []).append(c["us"])
    rows = [["NVML call", "calls", "mean us"]]
    ordered = sorted(times.items(), key=lambda kv: -sum(kv[1]))
    rows += [[fn, str(len(v)), f"{sum(v) / len(v):.1f}"] for fn, v in ordered]
    return rows


def record_fixture(path: Path, hz: float, ticks: int, n: int, device: str) -> list[list[str]]:
    """Record NVML and GPM sampling ``ticks`` ticks under load into ``path``; return the call-cost table."""
    import pynvml

    proc, conn = start_load(ticks / hz + 5, n, device)
    assert proc.pid is not None
    wait_for(conn, "start", 120, lambda: None)
    nvml = RecordingNvml(pynvml)
    sampler = Sampler(hz, instances=[NvmlSource(nvml), GpmSource(nvml)])
    sampler.apps.watch("matmul", proc.pid)
    statuses = sampler.open()
    start = clock.now()
    tick_t = []
    for k in range(ticks):
        now = clock.now()
        tick_t.append(now - sampler.t0)
        sampler.tick(now)
        time.sleep(max(0.0, start + (k + 1) / hz - clock.now()))
    batches = sampler.take_batches()
    sampler.close()
    proc.kill()
    proc.join(5)
    driver = pynvml.nvmlSystemGetDriverVersion() if _init(pynvml) else None
    path.write_text(
        json.dumps(
            {
                "recorded_with": "benchmarks/perf/monitor_gpu_check.py --record",
                "driver": driver,
                "hz": hz,
                "tick_t": tick_t,
                "apps": {"matmul": proc.pid},
                "statuses": {k: v.describe() for k, v in statuses.items()},
                "calls": nvml.calls,
                "rows": {b["source"]: {"columns": b["columns"], "rows": b["rows"]} for b in batches},
            },
            indent=None,
        )
    )
    return call_costs(nvml.calls)


def _init(pynvml: Any) -> bool:
    try:
        pynvml.nvmlInit()
        return True
    except pynvml.NVMLError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for telemetry CSVs and the table")
    parser.add_argument("--hz", type=float, default=50.0)
    parser.add_argument("--idle", type=float, default=3.0, help="seconds of idle before the load")
    parser.add_argument("--load", type=float, default=8.0, help="seconds of matmul load")
    parser.add_argument("--size", type=int, default=8192, help="side of the square bf16 matrices")
    parser.add_argument("--device", default="cuda", help="torch device of the load (cpu: a dry run)")
    parser.add_argument("--record", type=Path, help="also write an NVML/GPM recording to this file")
    parser.add_argument("--record-ticks", type=int, default=40)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows, ok = run_check(args.hz, args.idle, args.load, args.size, args.device, args.out)
    print(text_table(rows, align="<" * len(rows[0])))
    command = "PYTHONPATH=. python3 " + " ".join(shlex.quote(a) for a in sys.argv)
    (args.out / "monitor-check.md").write_text(f"```\n{command}\n```\n\n{markdown_table(rows)}\n")
    if args.record:
        costs = record_fixture(args.record, args.hz, args.record_ticks, args.size, args.device)
        print(f"recording: {args.record}")
        print(markdown_table(costs))
    print("all checks passed" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
