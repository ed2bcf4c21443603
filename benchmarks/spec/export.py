"""Export: the canonical native-dialect mapping and YAML of a workflow (every default explicit).

``load_yaml(dump_yaml(w)) == w`` holds (``benchmarks.spec.load``).
"""

from __future__ import annotations

from typing import Any

import yaml

from benchmarks.spec.model import Application, Workflow


def unit_to_dict(app: Application) -> dict[str, Any]:
    """Return one unit in canonical native form (common keys, then the type's own keys)."""
    out: dict[str, Any] = {"type": app.type, "model": app.model}
    if app.client_model is not None:
        out["client_model"] = app.client_model
    if app.server is not None:
        out["server"] = app.server
        del out["model"]
    out["num_requests"] = app.num_requests
    out["device"] = app.device
    if app.mps is not None:
        out["mps"] = app.mps
    out["priority"] = app.priority
    out["slo"] = [str(s) for s in app.slo]
    out["arrival"] = app.arrival.model_dump(exclude_none=True, exclude_defaults=False)
    out["warmup_requests"] = app.warmup_requests
    out["concurrency"] = app.concurrency
    for key in ("seed", "dataset", "gpu_memory_limit_mb"):
        if getattr(app, key) is not None:
            out[key] = getattr(app, key)
    out.update(app.options.model_dump(mode="json"))
    return out


def to_dict(workflow: Workflow) -> dict[str, Any]:
    """Return the canonical native-dialect mapping of a workflow (every default explicit)."""
    out: dict[str, Any] = {"name": workflow.name}
    if workflow.description:
        out["description"] = workflow.description
    # A bare name while the scheduler has no parameters set, so that older readers load it as before.
    out["scheduler"] = (
        {"name": workflow.scheduler, **workflow.scheduler_params}
        if workflow.scheduler_params
        else workflow.scheduler
    )
    out["repeat"] = workflow.repeat
    out["seed"] = workflow.seed
    out["start_together"] = workflow.start_together
    if workflow.weights != "real":
        # Only when set, so that older readers load the export as before (the models say @random too).
        out["weights"] = workflow.weights
    for name, app in workflow.applications.items():
        out[name] = unit_to_dict(app)
    nodes: dict[str, Any] = {}
    for name, node in workflow.nodes.items():
        entry: dict[str, Any] = {"uses": node.uses}
        if node.depend_on:
            entry["depend_on"] = list(node.depend_on)
        if node.background:
            entry["background"] = True
        nodes[name] = entry
    out["workflows"] = nodes
    return out


def dump_yaml(workflow: Workflow) -> str:
    """Return canonical YAML for a workflow; ``load_yaml`` of it gives back an equal workflow."""
    return yaml.safe_dump(to_dict(workflow), sort_keys=False, allow_unicode=True, width=100)
