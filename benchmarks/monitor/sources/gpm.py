"""NVML GPM (GPU Performance Monitoring, Hopper and newer): SM activity, SM occupancy, tensor
activity and DRAM bandwidth utilisation, the signals DCGM calls SMACT/SMOCC/TENSO/DRAMA, without DCGM.

Each tick takes a GPM sample and reports the metrics between it and the previous tick's sample, so a
value is the average over one sampling period. Entity: ``gpu<N>``; values in percent (0-100).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

from benchmarks.monitor.base import AppProcesses, Row, Source, SourceUnavailable
from benchmarks.monitor.sources.nvml_common import Gpu, init_gpus, load_nvml, nvml_error

# NVML_GPM_METRIC_* ids, in column order.
METRICS = (
    ("sm_activity_pct", 2),  # SM_UTIL: share of SMs busy
    ("sm_occupancy_pct", 3),  # SM_OCCUPANCY: active warps vs the theoretical maximum
    ("tensor_activity_pct", 5),  # ANY_TENSOR_UTIL
    ("dram_bw_util_pct", 10),  # DRAM_BW_UTIL
)


def metric_values(metrics: Sequence[Any], count: int) -> list[float | None]:
    """Return the first ``count`` GPM metric values of a ``nvmlGpmMetricsGet`` answer.

    A metric whose own return code is not success is None, not the (meaningless) value beside it.
    """
    return [float(metrics[i].value) if metrics[i].nvmlReturn == 0 else None for i in range(count)]


class GpmSource(Source):
    name = "gpm"
    description = "NVML GPM (Hopper+): SM activity, SM occupancy, tensor activity, DRAM bandwidth utilisation"
    columns = tuple(name for name, _ in METRICS)

    def __init__(self, nvml: ModuleType | None = None) -> None:
        self._module = nvml
        self.nvml: Any = None
        self.gpus: list[Gpu] = []
        self._samples: dict[int, list[Any]] = {}

    def open(self, hz: float) -> None:
        n = self.nvml = load_nvml(self._module)
        gpus = init_gpus(n)
        unsupported = []
        for gpu in gpus:
            try:
                supported = bool(n.nvmlGpmQueryDeviceSupport(gpu.handle).isSupportedDevice)
            except (n.NVMLError, AttributeError) as exc:
                unsupported.append(f"{gpu.name}: {nvml_error(exc)}")
                continue
            if supported:
                self.gpus.append(gpu)
            else:
                unsupported.append(f"{gpu.name}: not supported")
        if not self.gpus:
            n.nvmlShutdown()
            raise SourceUnavailable(
                "GPM needs a Hopper or newer GPU and driver >= 520 (" + "; ".join(unsupported) + ")"
            )
        try:
            for gpu in self.gpus:
                previous, current = n.nvmlGpmSampleAlloc(), n.nvmlGpmSampleAlloc()
                self._samples[gpu.index] = [previous, current]
                n.nvmlGpmSampleGet(gpu.handle, previous)
        except n.NVMLError as exc:
            self.close()
            raise SourceUnavailable(f"GPM sampling failed: {nvml_error(exc)}") from exc

    def close(self) -> None:
        if not self.gpus:
            return
        for pair in self._samples.values():
            for s in pair:
                try:
                    self.nvml.nvmlGpmSampleFree(s)
                except self.nvml.NVMLError:
                    continue
        self._samples = {}
        self.gpus = []
        self.nvml.nvmlShutdown()

    def sample(self, t: float, apps: AppProcesses) -> list[Row]:
        n = self.nvml
        rows: list[Row] = []
        for gpu in self.gpus:
            pair = self._samples[gpu.index]
            previous, current = pair
            try:
                n.nvmlGpmSampleGet(gpu.handle, current)
                get = n.c_nvmlGpmMetricsGet_t()
                get.version = n.NVML_GPM_METRICS_GET_VERSION
                get.numMetrics = len(METRICS)
                get.sample1 = previous
                get.sample2 = current
                for i, (_, metric_id) in enumerate(METRICS):
                    get.metrics[i].metricId = metric_id
                n.nvmlGpmMetricsGet(get)
            except n.NVMLError:
                # One failed read loses one interval; the next tick measures from the sample that worked.
                continue
            pair.reverse()
            rows.append((t, gpu.entity, *metric_values(get.metrics, len(METRICS))))
        return rows
