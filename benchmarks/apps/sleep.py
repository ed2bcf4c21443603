"""Sleep: no model; each request sleeps ``sleep_time`` seconds (the original SleepApplication)."""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field

from benchmarks.apps.base import AppType, Driver, RequestRecord
from benchmarks.spec.model import Application, AppOptions


class SleepOptions(AppOptions):
    sleep_time: float = Field(1.0, ge=0, le=86_400, description="seconds each request sleeps")


class SleepDriver(Driver):
    def load(self) -> dict[str, Any]:
        return {"model": None}

    def run_request(self, record: RequestRecord, payload: Any) -> None:
        with self.ctx.gpu_step("sleep"):
            time.sleep(self.options.sleep_time)


def _uses_gpu(unit: Application) -> bool:
    return False


APP = AppType(
    name="Sleep",
    aliases=("sleep", "SleepApplication"),
    options=SleepOptions,
    slo_metrics=("e2e",),
    default_slo=(),
    default_priority="low",
    default_num_requests=1,
    driver="benchmarks.apps.sleep:SleepDriver",
    description="Sleeps sleep_time seconds per request; for tests and DAG calibration.",
    uses_gpu=_uses_gpu,
)
