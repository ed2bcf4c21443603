"""Live progress of a run, folded from the runner's events into the dict stored on ``Run.progress``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmarks import spec as engine_spec


def initial_progress(workflow: engine_spec.Workflow) -> dict[str, Any]:
    """Return the progress of a run that has not started: every node pending, no request done."""
    totals = engine_spec.requests_per_run(workflow)
    return {
        "t": 0.0,
        "nodes": {
            name: {
                "status": "pending",
                "done": 0,
                "total": totals[name],
                "type": workflow.unit_of(name).type,
                "background": node.background,
                "last": {},
                "reason": None,
            }
            for name, node in workflow.nodes.items()
        },
        "telemetry_samples": 0,
    }


class RunProgress:
    """Folds runner events (node status, loads, finished requests, telemetry batches) into progress."""

    def __init__(self, workflow: engine_spec.Workflow) -> None:
        self.state = initial_progress(workflow)
        self.changed = False

    def on_event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("kind")
        t = event.get("t")
        if isinstance(t, int | float):
            self.state["t"] = max(float(self.state["t"]), float(t))
        node = self.state["nodes"].get(event.get("node"))
        if kind == "node_status" and node is not None:
            node["status"] = event.get("status", node["status"])
            node["reason"] = event.get("reason")
        elif kind == "load_start" and node is not None:
            node["status"] = "loading"
        elif kind == "load_end" and node is not None:
            node["status"] = "running"
        elif kind == "request_end" and node is not None:
            record = event.get("record") or {}
            node["done"] += 1
            node["last"] = {
                k: v for k, v in (record.get("metrics") or {}).items() if isinstance(v, int | float)
            }
        elif kind == "telemetry":
            rows = event.get("rows")
            self.state["telemetry_samples"] += len(rows) if isinstance(rows, list) else 0
        elif kind == "telemetry_sources":
            self.state["telemetry_sources"] = event.get("sources")
        else:
            return
        self.changed = True
