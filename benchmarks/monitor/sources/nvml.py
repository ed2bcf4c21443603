"""NVML (nvidia-ml-py): per GPU utilisation, memory, power, energy counter, clocks, temperature;
per application GPU memory and SM utilisation.

Entities: ``gpu<N>`` (NVML index) and ``app:<node>`` (the application's processes, summed over the
visible GPUs). ``energy_j`` is NVML's total-energy counter (since the driver loaded): energy over an
interval is the difference of two readings, not an integral of the noisy power reading.
The energy counter and the ``app:`` rows are read every 2 s and on a run's last tick (costly calls, see
ENERGY_INTERVAL_S); ``energy_j`` is empty in between. A reading the GPU does not support
(NotSupported) is left empty and not asked for again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from benchmarks.monitor.base import AppProcesses, Row, Source, SourceUnavailable, app_entity
from benchmarks.monitor.sources.nvml_common import Gpu, init_gpus, load_nvml

# NVML error codes after which a reading is dropped for good: NOT_SUPPORTED, NO_PERMISSION,
# FUNCTION_NOT_FOUND (an older driver).
_GIVE_UP = (3, 4, 13)
# GPU_IS_LOST: the device fell off the bus; no later reading can succeed.
_GPU_LOST = 15
# NOT_FOUND from the per-process utilisation: no process ran a kernel since the timestamp asked.
_NOT_FOUND = 6
# Costly readings are taken at most once per interval, and once more on a run's last tick. Measured on
# an H200 (driver 580, in a VM, docs/results/monitor-h200.md): the energy counter costs 5-6.5 ms a call
# and per-process utilisation ~2.7 ms, against ~0.1 ms for the other readings. The energy counter
# loses nothing by being read slowly (a window's energy interpolates between readings, and the last
# tick reads it at the run's end); per-process utilisation returns every sample the driver took since
# the previous call, so reading it less often loses none.
ENERGY_INTERVAL_S = 2.0
ATTRIBUTION_INTERVAL_S = 2.0


class NvmlSource(Source):
    name = "nvml"
    description = (
        "NVML: GPU utilisation, memory, power, energy counter, clocks, temperature; per-app GPU memory"
    )
    columns = (
        "util_gpu_pct",
        "util_mem_pct",
        "mem_used_bytes",
        "mem_total_bytes",
        "power_w",
        "energy_j",
        "sm_clock_mhz",
        "mem_clock_mhz",
        "temp_c",
        "gpu_mem_bytes",
        "sm_util_pct",
        "processes",
    )

    def __init__(
        self,
        nvml: Any = None,
        energy_interval_s: float = ENERGY_INTERVAL_S,
        attribution_interval_s: float = ATTRIBUTION_INTERVAL_S,
    ) -> None:
        self.energy_interval_s = energy_interval_s
        self.attribution_interval_s = attribution_interval_s
        self._module = nvml
        self.nvml: Any = None
        self.gpus: list[Gpu] = []
        self._dropped: set[tuple[int, str]] = set()
        self._last_util_ts: dict[int, int] = {}
        # Applications NVML has attributed a kernel to (its utilisation samples named their process).
        self._attributed: set[str] = set()
        self._attributed_at = float("-inf")
        self._energy_at = float("-inf")

    def open(self, hz: float) -> None:
        self.nvml = load_nvml(self._module)
        self.gpus = init_gpus(self.nvml)
        for gpu in self.gpus:
            # Only samples newer than this are reported, so an application never gets a stale reading.
            self._last_util_ts[gpu.index] = 0

    def close(self) -> None:
        if self.gpus:
            self.nvml.nvmlShutdown()
            self.gpus = []

    def _read(self, gpu: Gpu, what: str, call: Callable[..., Any], *args: Any) -> Any:
        """Return ``call(*args)``, or None when it fails; a reading the GPU lacks is not asked for again."""
        if (gpu.index, what) in self._dropped:
            return None
        try:
            return call(*args)
        except self.nvml.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code == _GPU_LOST:
                raise SourceUnavailable(f"GPU {gpu.index} ({gpu.name}) is lost: {exc}") from exc
            if code in _GIVE_UP:
                self._dropped.add((gpu.index, what))
            return None

    def read_all_next(self) -> None:
        self._attributed_at = self._energy_at = float("-inf")

    def sample(self, t: float, apps: AppProcesses) -> list[Row]:
        n = self.nvml
        rows: list[Row] = []
        app_mem: dict[str, int] = defaultdict(int)
        app_procs: dict[str, int] = defaultdict(int)
        app_sm: dict[str, float] = defaultdict(float)
        attribute = bool(apps) and t - self._attributed_at >= self.attribution_interval_s
        if attribute:
            self._attributed_at = t
        energy = t - self._energy_at >= self.energy_interval_s
        if energy:
            self._energy_at = t
        for gpu in self.gpus:
            h = gpu.handle
            util = self._read(gpu, "util", n.nvmlDeviceGetUtilizationRates, h)
            mem = self._read(gpu, "mem", n.nvmlDeviceGetMemoryInfo, h)
            power_mw = self._read(gpu, "power", n.nvmlDeviceGetPowerUsage, h)
            energy_mj = (
                self._read(gpu, "energy", n.nvmlDeviceGetTotalEnergyConsumption, h) if energy else None
            )
            sm_clock = self._read(gpu, "sm_clock", n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM)
            mem_clock = self._read(gpu, "mem_clock", n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM)
            temp = self._read(gpu, "temp", n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU)
            rows.append(
                (
                    t,
                    gpu.entity,
                    None if util is None else util.gpu,
                    None if util is None else util.memory,
                    None if mem is None else mem.used,
                    None if mem is None else mem.total,
                    None if power_mw is None else power_mw / 1000,
                    None if energy_mj is None else energy_mj / 1000,
                    sm_clock,
                    mem_clock,
                    temp,
                    None,
                    None,
                    None,
                )
            )
            if attribute:
                self._attribute(gpu, apps, app_mem, app_procs, app_sm)
        for node in sorted(set(app_mem) | set(app_sm)):
            rows.append(
                (
                    t,
                    app_entity(node),
                    *([None] * 9),
                    app_mem.get(node),
                    app_sm.get(node),
                    app_procs.get(node, 0),
                )
            )
        return rows

    def _attribute(
        self,
        gpu: Gpu,
        apps: AppProcesses,
        app_mem: dict[str, int],
        app_procs: dict[str, int],
        app_sm: dict[str, float],
    ) -> None:
        """Add this GPU's per-process memory and SM utilisation to the applications owning the processes."""
        n, h = self.nvml, gpu.handle
        seen: set[int] = set()
        for what, call in (
            ("compute_procs", n.nvmlDeviceGetComputeRunningProcesses),
            ("graphics_procs", n.nvmlDeviceGetGraphicsRunningProcesses),
        ):
            for proc in self._read(gpu, what, call, h) or []:
                node = apps.node_of(int(proc.pid))
                # A process with a CUDA and a graphics context is listed twice with the same memory.
                if node is None or proc.pid in seen:
                    continue
                seen.add(proc.pid)
                app_procs[node] += 1
                app_mem[node] += int(proc.usedGpuMemory or 0)
        last = self._last_util_ts[gpu.index]

        def utilization(handle: Any, since: int) -> Any:
            try:
                return n.nvmlDeviceGetProcessUtilization(handle, since)
            except n.NVMLError as exc:
                if getattr(exc, "value", None) == _NOT_FOUND:
                    return []
                raise

        samples = self._read(gpu, "proc_util", utilization, h, last)
        if samples is not None:
            # The driver lists only the processes that ran a kernel since ``last``: the others' 0 %.
            # Only for an application NVML has attributed a kernel to before: an MPS client never gets
            # one (its work is the MPS server's), and its share stays unknown, not 0.
            for node, count in app_procs.items():
                if count and node in self._attributed:
                    app_sm[node] += 0.0
        newest: dict[int, Any] = {}
        for s in samples or []:
            if s.timeStamp > last and (s.pid not in newest or s.timeStamp > newest[s.pid].timeStamp):
                newest[s.pid] = s
        for pid, s in newest.items():
            node = apps.node_of(int(pid))
            if node is not None:
                app_sm[node] += float(s.smUtil)
                self._attributed.add(node)
        if newest:
            self._last_util_ts[gpu.index] = max(s.timeStamp for s in newest.values())
