"""Live progress of a run, folded from the runner's events (the one reducer of the CLI and the web).

The state is plain JSON (the web stores it on ``Run.progress``; the run page's script and the API
read it) and holds counters per node, never records, so its size does not grow with a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from benchmarks.spec.model import Workflow, server_clients
from benchmarks.status import NodeStatus, RequestStatus


class NodeProgress(TypedDict):
    """One node's progress: its status, requests served (counted: finished normally, not warm-up) of
    the ``total`` the workflow asked for (warm-up left out; a stream's chunks once it has loaded), the
    last request's metrics; a model server's node serves no requests of its own (``total`` 0) and
    names the client nodes it ``serves``."""

    status: NodeStatus
    done: int
    total: int
    type: str
    background: bool
    last: dict[str, float]
    reason: str | None
    serves: list[str]


class ProgressState(TypedDict, total=False):
    """A run's progress: ``t`` (seconds since run start of the latest event), the nodes in workflow
    order, the telemetry samples received and, once the monitor reported them, its sources."""

    t: float
    nodes: dict[str, NodeProgress]
    telemetry_samples: int
    telemetry_sources: Any


def initial_progress(workflow: Workflow) -> ProgressState:
    """Return the progress of a run that has not started: every node pending, no request done."""
    serves = server_clients(workflow.applications, workflow.nodes)
    return {
        "t": 0.0,
        "nodes": {
            name: {
                "status": NodeStatus.PENDING,
                "done": 0,
                "total": 0
                if name in serves
                else workflow.unit_of(name).num_requests * workflow.unit_of(name).concurrency,
                "type": workflow.unit_of(name).type,
                "background": node.background,
                "last": {},
                "reason": None,
                "serves": list(serves.get(name, ())),
            }
            for name, node in workflow.nodes.items()
        },
        "telemetry_samples": 0,
    }


class RunProgress:
    """Folds runner events (node status, loads, finished requests, telemetry batches) into ``state``.

    ``changed`` turns true with every event that changed the state; the owner clears it once it has
    shown or stored the state.
    """

    def __init__(self, workflow: Workflow) -> None:
        self.state = initial_progress(workflow)
        self.changed = False

    def on_event(self, event: Mapping[str, Any]) -> bool:
        """Fold one event in; return whether it was a progress event (unknown kinds are ignored)."""
        kind = event.get("kind")
        t = event.get("t")
        if isinstance(t, int | float):
            self.state["t"] = max(float(self.state["t"]), float(t))
        node = self.state["nodes"].get(event.get("node"))  # type: ignore[arg-type]
        if kind == "node_status" and node is not None:
            status = NodeStatus(event.get("status", node["status"]))
            # A started process first loads its model (load_end marks it running).
            node["status"] = NodeStatus.LOADING if status is NodeStatus.RUNNING else status
            node["reason"] = event.get("reason")
            if isinstance(event.get("requested"), int):  # stopped by design: asked only what it began
                node["total"] = event["requested"]
        elif kind == "load_start" and node is not None:
            node["status"] = NodeStatus.LOADING
        elif kind == "load_end" and node is not None:
            node["status"] = NodeStatus.RUNNING
            if isinstance(event.get("planned"), int):
                node["total"] = event["planned"]
        elif kind == "request_end" and node is not None:
            record = event.get("record") or {}
            if record.get("status") == RequestStatus.OK and not record.get("warmup"):
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
            return False
        self.changed = True
        return True
