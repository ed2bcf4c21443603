"""Synthetic: a configurable CPU spin or torch matmul load per step, for tests and calibration.

``fail_at_request`` with ``fail_mode`` injects a failure (exception, ``os._exit`` or a segfault) so
that users can check how the harness reports a crashing application.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any, Literal

from pydantic import Field

from benchmarks.apps.base import AppType, Driver, RequestRecord
from benchmarks.clock import now
from benchmarks.platform import accelerator
from benchmarks.spec.model import Application, AppOptions


class SyntheticOptions(AppOptions):
    load: Literal["cpu", "torch"] = Field("cpu", description="busy-spin on the CPU, or torch matmuls")
    steps: int = Field(5, ge=1, le=1_000_000, description="gated steps per request")
    step_ms: float = Field(
        10.0, ge=0, le=3_600_000, description="CPU load: milliseconds of spinning per step"
    )
    matrix_size: int = Field(256, ge=1, le=65536, description="torch load: side of the square matmul")
    load_time_s: float = Field(
        0.0, ge=0, le=86_400, description="seconds load() takes, to imitate a model load"
    )
    fail_at_request: int | None = Field(None, ge=0, description="request index at which to fail")
    fail_mode: Literal["exception", "exit", "segfault"] = "exception"


class SyntheticDriver(Driver):
    def load(self) -> dict[str, Any]:
        time.sleep(self.options.load_time_s)
        self._torch_state: tuple[Any, Any] | None = None
        if self.options.load == "torch":
            import torch

            chosen = accelerator(self.ctx.device)
            gen = torch.Generator(device="cpu").manual_seed(self.ctx.seed)
            n = self.options.matrix_size
            a = torch.randn(n, n, generator=gen).to(chosen.torch_device)
            self._torch_state = (torch, a)
            return {
                "model": "random",
                "accelerator": chosen.label,
                "config": {"matrix_size": n, "device": chosen.torch_device},
            }
        return {"model": None}

    def run_request(self, record: RequestRecord, payload: Any) -> None:
        opts = self.options
        if opts.fail_at_request is not None and record.index == opts.fail_at_request:
            self._fail(opts.fail_mode)
        steps: list[float] = []
        # A step runs from the end of the previous one to its own end, the gate's hold included.
        last = now()
        for _ in range(opts.steps):
            with self.ctx.gpu_step("step"):
                self._step()
            t = now()
            steps.append(t - last)
            last = t
        record.series["step"] = steps
        record.metrics["step"] = sum(steps) / len(steps)

    def _step(self) -> None:
        if self._torch_state is not None:
            _, a = self._torch_state
            (a @ a).sum().item()
            return
        deadline = now() + self.options.step_ms / 1000
        while now() < deadline:
            pass

    @staticmethod
    def _fail(mode: str) -> None:
        if mode == "exit":
            os._exit(3)
        if mode == "segfault":
            ctypes.string_at(0)
        raise RuntimeError("synthetic failure injected by fail_at_request")


def _uses_gpu(unit: Application) -> bool:
    return isinstance(unit.options, SyntheticOptions) and unit.options.load == "torch"


APP = AppType(
    name="Synthetic",
    aliases=("synthetic",),
    options=SyntheticOptions,
    slo_metrics=("e2e", "step"),
    default_slo=(),
    default_priority="medium",
    default_num_requests=5,
    driver="benchmarks.apps.synthetic:SyntheticDriver",
    description="CPU spin or torch matmul steps behind the scheduler gate; for tests and calibration.",
    uses_gpu=_uses_gpu,
)
