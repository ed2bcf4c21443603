"""The task-list dialect: ``<workflow name>: {tasks: [{type, model, slo, depends_on}, ...]}``.

``task_list_to_native`` rewrites it into the native dialect before anything is built, keeping each
unit's place in the input (``Relocated``) so that its problems point at the task's lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmarks.spec.model import DEFAULT_LIMITS, Limits, Path_, suggest
from benchmarks.spec.yaml_text import Collector, kind_of, over_limit

# Top-level keys of a task-list workflow besides 'tasks'.
TASK_LIST_KEYS = ("description", "scheduler", "repeat", "seed", "start_together")
TASK_KEYS = ("name", "background", "depends_on", "depend_on")


def is_task_list(data: Mapping[str, Any]) -> bool:
    """Return whether a top-level mapping is in the task-list dialect (a value holds ``tasks``)."""
    return any(isinstance(v, Mapping) and "tasks" in v for v in data.values())


def task_list_to_native(
    data: Mapping[str, Any], errors: Collector, limits: Limits = DEFAULT_LIMITS
) -> dict[str, Any] | None:
    """Rewrite ``{wf: {tasks: [...]}}`` into the native dialect, keeping paths for line lookup."""
    names = list(data)
    if len(names) != 1:
        errors.add((), f"a task-list file must hold exactly one workflow; it holds {len(names)}: {names}")
        return None
    wf_name = names[0]
    body = data[wf_name]
    if not isinstance(body, Mapping):
        errors.add((wf_name,), f"workflow '{wf_name}' must be a mapping with 'tasks'")
        return None
    native: dict[str, Any] = {"name": wf_name}
    for key, value in body.items():
        if key == "tasks":
            continue
        if key in TASK_LIST_KEYS:
            native[key] = value
        else:
            errors.add(
                (wf_name, key),
                f"unknown key '{key}' in workflow '{wf_name}'"
                + suggest(str(key), ("tasks", *TASK_LIST_KEYS)),
            )
    tasks = body.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        errors.add((wf_name, "tasks"), "'tasks' must be a non-empty list of tasks")
        return None
    if len(tasks) > limits.max_nodes:
        errors.add((wf_name, "tasks"), over_limit("tasks (nodes)", len(tasks), limits.max_nodes))
        return None
    task_names: list[str] = []
    taken: set[str] = set()
    types: dict[str, list[str]] = {}
    for i, task in enumerate(tasks):
        path = (wf_name, "tasks", i)
        if not isinstance(task, Mapping):
            errors.add(path, f"task {i} must be a mapping with at least 'type', not {kind_of(task)}")
            task_names.append(f"task{i}")
            continue
        tname = task.get("name")
        ttype = task.get("type")
        base = str(tname) if tname is not None else (str(ttype).lower() if ttype is not None else f"task{i}")
        unique, k = base, 2
        while unique in taken:
            unique, k = f"{base}_{k}", k + 1
        task_names.append(unique)
        taken.add(unique)
        if isinstance(ttype, str):
            types.setdefault(ttype.strip().lower(), []).append(unique)
    workflows: dict[str, Any] = {}
    for i, task in enumerate(tasks):
        if not isinstance(task, Mapping):
            continue
        tname = task_names[i]
        unit = {k: v for k, v in task.items() if k not in TASK_KEYS}
        native[tname] = Relocated(unit, (wf_name, "tasks", i))
        deps_key = "depends_on" if "depends_on" in task else "depend_on"
        deps = task.get(deps_key, [])
        if isinstance(deps, str):
            deps = [deps]
        resolved: list[Any] = []
        if isinstance(deps, list):
            for j, dep in enumerate(deps):
                dpath = (wf_name, "tasks", i, deps_key, j)
                if isinstance(dep, str) and dep in task_names:
                    resolved.append(dep)
                elif isinstance(dep, str) and len(types.get(dep.strip().lower(), [])) == 1:
                    resolved.append(types[dep.strip().lower()][0])
                elif isinstance(dep, str) and dep.strip().lower() in types:
                    errors.add(
                        dpath,
                        f"'{dep}' matches several tasks of that type "
                        f"({', '.join(types[dep.strip().lower()])}); name the task instead",
                    )
                else:
                    errors.add(
                        dpath,
                        f"depends_on names '{dep}', which is neither a task name nor a "
                        f"task type here; known: {', '.join(task_names)}",
                    )
        else:
            errors.add((wf_name, "tasks", i, deps_key), "depends_on must be a list of task names or types")
        node: dict[str, Any] = {"uses": tname, "depend_on": resolved}
        if "background" in task:
            node["background"] = task["background"]
        workflows[tname] = node
    native["workflows"] = workflows
    return native


class Relocated(dict[str, Any]):
    """A unit mapping that came from elsewhere in the input (a task), so errors point there."""

    def __init__(self, data: Mapping[str, Any], origin: Path_) -> None:
        super().__init__(data)
        self.origin = origin
