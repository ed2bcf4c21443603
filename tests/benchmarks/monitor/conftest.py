"""Replaying NVML/GPM answers recorded on a real H200 (benchmarks/perf/monitor_gpu_check.py --record).

``ReplayNvml`` stands in for the pynvml module on machines without a GPU: each ``nvml*`` call returns
the next answer recorded for that function (or raises the recorded NVML error), so the NVML and GPM
sources run their real code on real driver output. Everything else (constants, the ctypes structures,
the error classes) is the real pynvml.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def _namespace(value: Any) -> Any:
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _namespace(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_namespace(v) for v in value]
    return value


class ReplayNvml:
    def __init__(self, calls: list[dict[str, Any]]) -> None:
        self.queues: dict[str, deque[dict[str, Any]]] = {}
        for call in calls:
            self.queues.setdefault(call["fn"], deque()).append(call)
        self.made: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("nvml"):
            return getattr(pynvml, name)
        return lambda *args: self._answer(name, args)

    def _answer(self, name: str, args: tuple[Any, ...]) -> Any:
        queue = self.queues.get(name)
        assert queue, f"the recording has no (more) answers to {name}"
        call = queue.popleft()
        self.made.append(name)
        if "error" in call:
            raise pynvml.NVMLError(call["error"])
        result = call["result"]
        if name == "nvmlGpmMetricsGet":
            get = args[0]
            for i, (metric_id, ret, value) in enumerate(result):
                assert get.metrics[i].metricId == metric_id, (
                    "the source asked for other metrics than recorded"
                )
                get.metrics[i].nvmlReturn = ret
                get.metrics[i].value = value
            return get
        if name == "nvmlGpmSampleAlloc":
            return pynvml.c_nvmlGpmSample_t()
        if name == "nvmlDeviceGetHandleByIndex":
            return f"handle-{args[0]}"
        return _namespace(result)

    def left(self) -> dict[str, int]:
        """Return how many recorded answers each function still has."""
        return {fn: len(q) for fn, q in self.queues.items() if q}


@pytest.fixture
def h200_recording() -> dict[str, Any]:
    recording: dict[str, Any] = json.loads((FIXTURES / "nvml_gpm_h200.json").read_text())
    return recording
