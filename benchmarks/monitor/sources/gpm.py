"""NVML GPM (GPU Performance Monitoring, Hopper and newer): SM activity, SM occupancy, tensor
activity and DRAM bandwidth utilisation, the signals DCGM calls SMACT/SMOCC/TENSO/DRAMA, without DCGM.

The driver refreshes the counters behind a GPM sample about every 100 ms (seen on an H200, driver
580): two samples taken closer together are usually identical, and the metrics between identical
samples are 0 (NaN for DRAM bandwidth), not the GPU's activity. So this source keeps an *anchor*
sample and reports the metrics between it and a new sample taken at least ``MIN_INTERVAL_S`` later;
when the pair turns out identical it keeps the anchor and tries again next tick. Rows therefore come
at most every 100 ms (about 10 Hz) whatever the monitor's rate, and each value is the average over
the interval since the previous row. Entity: ``gpu<N>``; values in percent (0-100).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
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
_DRAM = 3
MIN_INTERVAL_S = 0.1


def metric_values(metrics: Sequence[Any], count: int) -> list[float | None]:
    """Return the first ``count`` GPM metric values of a ``nvmlGpmMetricsGet`` answer.

    A metric whose own return code is not success, or whose value is not finite, is None.
    """
    out: list[float | None] = []
    for i in range(count):
        value = float(metrics[i].value)
        out.append(value if metrics[i].nvmlReturn == 0 and math.isfinite(value) else None)
    return out


def same_counters(values: Sequence[float | None], raw: Sequence[Any]) -> bool:
    """Return True when a metrics answer came from two identical samples (no counter refresh between).

    DRAM bandwidth utilisation divides by the time between the samples: 0/0 gives NaN exactly then.
    """
    return values[_DRAM] is None and raw[_DRAM].nvmlReturn == 0


@dataclass
class _Pair:
    anchor: Any
    spare: Any
    anchor_t: float


class GpmSource(Source):
    name = "gpm"
    description = "NVML GPM (Hopper+): SM activity, SM occupancy, tensor activity, DRAM bandwidth utilisation"
    columns = tuple(name for name, _ in METRICS)

    def __init__(self, nvml: Any = None) -> None:
        self._module = nvml
        self.nvml: Any = None
        self.gpus: list[Gpu] = []
        self._pairs: dict[int, _Pair] = {}

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
                pair = _Pair(n.nvmlGpmSampleAlloc(), n.nvmlGpmSampleAlloc(), float("-inf"))
                self._pairs[gpu.index] = pair
                n.nvmlGpmSampleGet(gpu.handle, pair.anchor)
        except n.NVMLError as exc:
            self.close()
            raise SourceUnavailable(f"GPM sampling failed: {nvml_error(exc)}") from exc

    def close(self) -> None:
        if not self.gpus:
            return
        for pair in self._pairs.values():
            for s in (pair.anchor, pair.spare):
                try:
                    self.nvml.nvmlGpmSampleFree(s)
                except self.nvml.NVMLError:
                    continue
        self._pairs = {}
        self.gpus = []
        self.nvml.nvmlShutdown()

    def sample(self, t: float, apps: AppProcesses) -> list[Row]:
        n = self.nvml
        rows: list[Row] = []
        for gpu in self.gpus:
            pair = self._pairs[gpu.index]
            if pair.anchor_t == float("-inf"):
                pair.anchor_t = t  # the anchor was taken in open(), just before the first tick
            if t - pair.anchor_t < MIN_INTERVAL_S:
                continue
            try:
                n.nvmlGpmSampleGet(gpu.handle, pair.spare)
                get = n.c_nvmlGpmMetricsGet_t()
                get.version = n.NVML_GPM_METRICS_GET_VERSION
                get.numMetrics = len(METRICS)
                get.sample1 = pair.anchor
                get.sample2 = pair.spare
                for i, (_, metric_id) in enumerate(METRICS):
                    get.metrics[i].metricId = metric_id
                n.nvmlGpmMetricsGet(get)
            except n.NVMLError:
                continue  # the anchor stays; the next tick measures from it
            raw = get.metrics
            values = metric_values(raw, len(METRICS))
            if same_counters(values, raw):
                continue
            pair.anchor, pair.spare, pair.anchor_t = pair.spare, pair.anchor, t
            rows.append((t, gpu.entity, *values))
        return rows
