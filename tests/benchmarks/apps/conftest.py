"""Helpers for the application tests: build a unit from YAML and run its driver in this process.

Drivers run here exactly as in their own process (``load``, ``run``, ``close``); the gate is a real
``Gate`` that counts the steps of each kind and checks that steps never nest or leak.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from benchmarks.apps import app_type, driver_class
from benchmarks.apps.base import AppContext, Driver
from benchmarks.spec.load import load_yaml
from benchmarks.spec.model import Application


class CountingGate:
    """Counts gated steps by kind; fails if a step starts while another is open."""

    def __init__(self) -> None:
        self.steps: Counter[str] = Counter()
        self.open: str | None = None

    def acquire(self, app: str, kind: str) -> float:
        assert self.open is None, f"step '{kind}' started while '{self.open}' was still open"
        self.open = kind
        self.steps[kind] += 1
        return 0.0

    def release(self, app: str, kind: str) -> None:
        assert self.open == kind, f"released '{kind}' but '{self.open}' was open"
        self.open = None


@dataclass
class DriverRun:
    driver: Driver
    gate: CountingGate
    loaded: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def records(self) -> list[dict[str, Any]]:
        return [fields["record"] for kind, fields in self.events if kind == "request_end"]


def unit_from_yaml(text: str) -> Application:
    """Return the single application unit of a one-unit workflow."""
    workflow = load_yaml(text, name="t")
    (unit,) = workflow.applications.values()
    return unit


@pytest.fixture
def make_unit() -> Callable[[str], Application]:
    """Return ``unit_from_yaml`` (test modules here are not a package, so they take it as a fixture)."""
    return unit_from_yaml


@pytest.fixture
def run_driver(tmp_path: Path) -> Callable[..., DriverRun]:
    """Return a function that loads and runs a unit's driver here and returns what it reported."""

    def run(
        text: str, stop: Callable[[], bool] = lambda: False, seed: int = 0, device: str = "cpu"
    ) -> DriverRun:
        unit = unit_from_yaml(text)
        gate = CountingGate()
        events: list[tuple[str, dict[str, Any]]] = []
        ctx = AppContext(
            node="node",
            emit=lambda kind, **f: events.append((kind, f)),
            gate=gate,
            stop_requested=stop,
            device=device,
            out_dir=tmp_path / "artifacts",
            seed=seed,
        )
        driver = driver_class(app_type(unit))(unit, ctx)
        try:
            loaded = driver.load()
            driver.run()
        finally:
            driver.close()
        assert gate.open is None, "a gated step was left open"
        return DriverRun(driver, gate, loaded, events)

    return run
