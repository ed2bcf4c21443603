"""Nsight Compute (``ncu``): find it, run it over the profiler's one-shot mode, parse its raw CSV page.

The one-shot mode (``python -m cbkernels.profile --one-shot FILE``) launches each row's kernel exactly
once, a first call as an application makes it, with a tiny marker kernel before each row and no other
GPU work (its inputs are made on the CPU and copied): the marker kernels cut ncu's list of kernels into
one segment per row, and a row's kernel is the longest of its segment (cuDNN may launch helpers).
"""

from __future__ import annotations

import csv
import glob
import io
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARKER = "cb_profile_marker"
# The paper's checklist, named as Nsight Compute names them (ncu --query-metrics lists them all).
METRICS = {
    "time_us": "gpu__time_duration.sum",
    "regs_per_thread": "launch__registers_per_thread",
    "threads_per_block": "launch__block_size",
    "shared_static_bytes": "launch__shared_mem_per_block_static",
    "shared_dynamic_bytes": "launch__shared_mem_per_block_dynamic",
    "blocks_per_sm_by_regs": "launch__occupancy_limit_registers",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    # warps resident per active cycle over the maximum: achieved occupancy
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_gbps": "dram__bytes.sum.per_second",
    # global loads and stores through the LSU pipe (TMA copies bypass it: see l2_gbps)
    "global_load_gbps": "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum.per_second",
    "global_store_gbps": "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum.per_second",
    "l2_gbps": "lts__t_bytes.sum.per_second",
}
# ncu's unit spellings differ between versions and pages ("usecond" or "us", "Gbyte/second" or "GB/s").
TIME_UNITS = {
    "nsecond": 1e-3,
    "ns": 1e-3,
    "usecond": 1.0,
    "us": 1.0,
    "msecond": 1e3,
    "ms": 1e3,
    "second": 1e6,
}
SI = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
RATE = re.compile(r"(?P<prefix>[kKMGT]?)(byte|B)/(second|s)")
SIZE = re.compile(r"(?P<prefix>[kKMGT]?)(byte|B)")


class NcuError(Exception):
    """ncu could not profile (absent, refused the counters, timed out, printed no CSV)."""


@dataclass(frozen=True)
class KernelMetrics:
    """One profiled kernel launch: its name and the metrics (by the keys of ``METRICS``) in our units:
    microseconds, GB/s, bytes, percent, counts."""

    name: str
    values: dict[str, float | None]


def find_ncu() -> str | None:
    """Return the path of ``ncu`` (PATH, then CUDA's and Nsight Compute's usual folders), or None."""
    found = shutil.which("ncu")
    if found:
        return found
    candidates = [
        "/usr/local/cuda/bin/ncu",
        *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True),
    ]
    return next((c for c in candidates if os.access(c, os.X_OK)), None)


def ncu_command(ncu: str, target: Sequence[str], max_kernels: int) -> list[str]:
    """Return the ncu command line that profiles at most ``max_kernels`` launches of ``target``."""
    return [
        ncu, "--csv", "--page", "raw", "--metrics", ",".join(METRICS.values()),
        # leave the clocks as the application would see them (ncu locks them to base by default)
        "--clock-control", "none", "--target-processes", "all", "-c", str(max_kernels), *target,
    ]  # fmt: skip


def run_ncu(target: Sequence[str], max_kernels: int, timeout_s: float, cwd: Path, env: dict[str, str]) -> str:
    """Run ncu over ``target``; return its stdout. Raises NcuError with the reason when it fails."""
    ncu = find_ncu()
    if ncu is None:
        raise NcuError("ncu (Nsight Compute) not found on PATH, /usr/local/cuda/bin or /opt/nvidia")
    try:
        done = subprocess.run(
            ncu_command(ncu, target, max_kernels), capture_output=True, text=True, timeout=timeout_s,
            cwd=cwd, env=env, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise NcuError(f"ncu did not finish within {timeout_s:.0f} s") from None
    if done.returncode != 0 or '"ID"' not in done.stdout:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
        raise NcuError(f"ncu exited {done.returncode}: {' | '.join(tail)[:300]}")
    return done.stdout


def parse_csv(text: str) -> list[KernelMetrics]:
    """Return the kernels of ncu's ``--csv`` output, in launch order.

    Either page: ``--page raw`` (one row per kernel, a column per metric, the row under the header
    holding the units) or ``--page details`` (one row per kernel and metric: "Metric Name", "Metric
    Unit", "Metric Value"). Other lines (ncu's ``==PROF==`` messages, the program's output) are skipped;
    numbers may carry thousands separators; "n/a" and empty cells become None.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        raise NcuError("no ncu CSV table in the output")
    table = [line for line in lines[start:] if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(table))))
    header = rows[0]
    if "Metric Name" in header and "Metric Value" in header:
        return _parse_details(header, rows[1:])
    units, data = rows[1], rows[2:]
    if units and units[0]:  # a kernel's ID, not a units row: ncu printed no units
        data, units = rows[1:], [""] * len(header)
    unit_of = dict(zip(header, units, strict=False))
    kernels = []
    for row in data:
        cells = dict(zip(header, row, strict=False))
        values = {
            key: _convert(cells.get(metric), unit_of.get(metric, "")) for key, metric in METRICS.items()
        }
        kernels.append(KernelMetrics(cells.get("Kernel Name", "?"), values))
    return kernels


def _parse_details(header: list[str], rows: list[list[str]]) -> list[KernelMetrics]:
    by_id: dict[str, tuple[str, dict[str, str | None], dict[str, str]]] = {}
    for row in rows:
        cells = dict(zip(header, row, strict=False))
        _, raw, units = by_id.setdefault(cells.get("ID", ""), (cells.get("Kernel Name", "?"), {}, {}))
        raw[cells.get("Metric Name", "")] = cells.get("Metric Value")
        units[cells.get("Metric Name", "")] = cells.get("Metric Unit", "")
    return [
        KernelMetrics(name, {key: _convert(raw.get(m), units.get(m, "")) for key, m in METRICS.items()})
        for name, raw, units in by_id.values()
    ]


def _convert(cell: str | None, unit: str) -> float | None:
    if cell is None:
        return None
    text = cell.replace(",", "").strip()
    if not text or text.lower() == "n/a":
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value * _unit_scale(unit.strip())


def _unit_scale(unit: str) -> float:
    # To our units: microseconds for times, GB/s for rates, bytes for sizes; others as they are.
    if unit in TIME_UNITS:
        return TIME_UNITS[unit]
    match = RATE.fullmatch(unit)
    if match:
        return SI[match["prefix"]] / 1e9
    match = SIZE.fullmatch(unit)
    return SI[match["prefix"]] if match else 1.0


def split_by_marker(kernels: Sequence[KernelMetrics], rows: int) -> list[KernelMetrics | None]:
    """Return, for each of ``rows`` rows, the longest kernel between its marker and the next one."""
    segments: list[list[KernelMetrics]] = []
    for kernel in kernels:
        if MARKER in kernel.name:
            segments.append([])
        elif segments:
            segments[-1].append(kernel)
    picked: list[KernelMetrics | None] = []
    for i in range(rows):
        segment = segments[i] if i < len(segments) else []
        picked.append(max(segment, key=lambda k: k.values.get("time_us") or 0.0) if segment else None)
    return picked


def ncu_extras(kernel: KernelMetrics) -> dict[str, Any]:
    """Return a row's ncu columns: the kernel's name and each metric (None where ncu gave none)."""
    extras: dict[str, Any] = {"ncu_kernel": kernel.name[:160]}
    extras.update(
        {f"ncu_{k}" if k in ("time_us", "regs_per_thread") else k: v for k, v in kernel.values.items()}
    )
    return extras
