"""Loading a workflow: from YAML text or a mapping in any dialect into a validated ``Workflow``.

Dialects, all normalised into ``benchmarks.spec.model.Workflow``:

1. native ConsumerBench YAML: top-level application units plus ``workflows:`` (``uses``,
   ``depend_on``, ``background``), legacy type names and ``server_model``/``client_model`` accepted;
2. task-list YAML: ``<workflow name>: {tasks: [{type, model, slo: ["TTFT<1s"], depends_on: [...]}]}``
   (``benchmarks.spec.dialects``);
3. plain dicts (the web editor's forms and the REST API's JSON), in either shape.

The loader looks up the registries (application types and their keys, SLO metrics and defaults;
schedulers and their own checks of a workflow) and applies the input limits. Every problem is
collected and raised together as ``WorkflowValidationError``; each ``SpecError`` carries the YAML
path, the line (when the input was text) and a plain sentence. The DAG rules themselves are the
model's (``dag_problems``), reported here at their lines. A flaw in one place never hides
another: a duplicate key, an invalid option and an invalid common key of one unit are all reported;
only an input that cannot be read, or is over a size limit, stops at its first problem.

Callers add checks of their own through ``unit_checks`` (the file access policy, this machine's
devices and files): each is called with every unit that could be built and returns (path inside the
unit, message) pairs, reported at the unit's lines with the rest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from benchmarks.apps import APP_TYPES, AppType, resolve_type
from benchmarks.models import random_weights_name
from benchmarks.schedulers import SCHEDULERS, param_problems
from benchmarks.spec.dialects import Relocated, is_task_list, task_list_to_native
from benchmarks.spec.model import (
    DEFAULT_LIMITS,
    NAME_RE,
    SLO,
    WEIGHTS,
    Application,
    Arrival,
    Limits,
    Node,
    Path_,
    SpecError,
    Workflow,
    WorkflowValidationError,
    dag_problems,
    name_problem,
    parse_slo,
    requests_per_run,
    server_problems,
    suggest,
)
from benchmarks.spec.yaml_text import Collector, kind_of, over_limit, read_yaml_document

# A check of one built unit, given by the caller: (path inside the unit, message) per problem.
UnitCheck = Callable[[Application], Iterable[tuple[Path_, str]]]

LLM_SERVER = "LLMServer"  # the type a legacy server_model + client_model unit gets its server of
RESERVED_KEYS = (
    "name",
    "description",
    "scheduler",
    "repeat",
    "seed",
    "start_together",
    "weights",
    "workflows",
)
COMMON_UNIT_KEYS = (
    "type",
    "model",
    "server_model",
    "client_model",
    "server",
    "num_requests",
    "device",
    "mps",
    "slo",
    "priority",
    "arrival",
    "warmup_requests",
    "seed",
    "dataset",
    "concurrency",
    "memory_limit",
    "gpu_memory_limit_mb",
)
# "8GiB", "512 MiB", "8G", "8GB": binary units (as MPS reads them), the cap in MiB.
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT])(?:i?B)?\s*$", re.IGNORECASE)
_SIZE_MIB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
NODE_KEYS = ("uses", "depend_on", "depends_on", "background")


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------


def load_file(
    path: str | Path,
    name: str | None = None,
    limits: Limits | None = None,
    unit_checks: Sequence[UnitCheck] = (),
    weights: str | None = None,
) -> Workflow:
    """Load a workflow file in any dialect; the workflow is named after the file unless it says.

    ``weights`` (``real`` or ``random``), when given, overrides the workflow's ``weights:`` (the CLI's
    ``--weights``)."""
    path = Path(path)
    max_bytes = (limits or DEFAULT_LIMITS).max_bytes
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise WorkflowValidationError(
                [SpecError((), None, f"the file is {size} bytes, over the limit of {max_bytes} bytes")],
                str(path),
            )
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise WorkflowValidationError(
            [SpecError((), None, "the file is not UTF-8 text")], str(path)
        ) from None
    except OSError as exc:
        raise WorkflowValidationError(
            [SpecError((), None, f"cannot read the file: {exc.strerror}")], str(path)
        ) from None
    return load_yaml(
        text,
        name=name or path.stem,
        source=str(path),
        limits=limits,
        unit_checks=unit_checks,
        weights=weights,
    )


def load_yaml(
    text: str,
    name: str | None = None,
    source: str | None = None,
    limits: Limits | None = None,
    unit_checks: Sequence[UnitCheck] = (),
    weights: str | None = None,
) -> Workflow:
    """Load a workflow from YAML text in any dialect (``weights`` as for ``load_file``). Raises
    WorkflowValidationError."""
    document = read_yaml_document(text, source, limits)
    errors = Collector(document.lines)
    errors.errors.extend(document.problems)
    return _load(document.value, name, errors, source, limits or DEFAULT_LIMITS, unit_checks, weights)


def from_dict(
    data: Any,
    name: str | None = None,
    lines: Mapping[Path_, int] | None = None,
    source: str | None = None,
    limits: Limits | None = None,
    unit_checks: Sequence[UnitCheck] = (),
    weights: str | None = None,
) -> Workflow:
    """Normalise a native or task-list mapping into a ``Workflow``. Raises WorkflowValidationError.

    ``name`` names the workflow when the input itself has no ``name:``. ``limits`` (default:
    ``DEFAULT_LIMITS``) bounds nesting, values, units, nodes and requests per run. ``unit_checks``
    are the caller's checks of each unit, reported with every other problem. ``weights`` overrides
    the workflow's ``weights:`` when given.
    """
    return _load(data, name, Collector(lines), source, limits or DEFAULT_LIMITS, unit_checks, weights)


def _load(
    data: Any,
    name: str | None,
    errors: Collector,
    source: str | None,
    limits: Limits,
    unit_checks: Sequence[UnitCheck],
    weights: str | None = None,
) -> Workflow:
    shape_problem = _shape_problem(data, limits)
    if shape_problem:
        errors.add((), shape_problem)
        raise WorkflowValidationError(errors.errors, source)
    if not isinstance(data, Mapping):
        errors.add((), f"a workflow must be a mapping of application units, not {kind_of(data)}")
        raise WorkflowValidationError(errors.errors, source)
    bad_keys = [k for k in data if not isinstance(k, str)]
    for key in bad_keys:
        errors.add((), f"top-level key {key!r} must be a string")
    data = {k: v for k, v in data.items() if isinstance(k, str)}
    raw = task_list_to_native(data, errors, limits) if is_task_list(data) else data
    workflow = _build(raw, name, errors, limits, unit_checks, weights) if raw is not None else None
    if errors.errors or workflow is None:
        raise WorkflowValidationError(errors.errors, source)
    return workflow


def _shape_problem(data: Any, limits: Limits) -> str | None:
    """Return why a mapping given as data (not text) is too deep or too large, walking it iteratively."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    count = 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > limits.max_values:
            return f"the workflow holds more than {limits.max_values} values, over the limit"
        if depth > limits.max_depth:
            return f"the workflow nests deeper than {limits.max_depth} levels, over the limit"
        if isinstance(value, Mapping):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list | tuple):
            stack.extend((v, depth + 1) for v in value)
    return None


def _build(
    raw: Mapping[str, Any],
    name: str | None,
    errors: Collector,
    limits: Limits = DEFAULT_LIMITS,
    unit_checks: Sequence[UnitCheck] = (),
    weights: str | None = None,
) -> Workflow | None:
    wf_kwargs: dict[str, Any] = {"name": name or "workflow"}
    units_raw: dict[str, tuple[Mapping[str, Any], Path_]] = {}
    nodes_raw: Any = None
    for key, value in raw.items():
        if key == "workflows":
            nodes_raw = value
        elif key in RESERVED_KEYS:
            if isinstance(value, Mapping) and key != "scheduler":
                errors.add((key,), f"'{key}' is a reserved top-level key; rename this application unit")
            else:
                wf_kwargs[key] = value
        elif isinstance(value, Mapping):
            origin = value.origin if isinstance(value, Relocated) else (key,)
            units_raw[key] = (value, origin)
        else:
            errors.add(
                (key,),
                f"application unit '{key}' must be a mapping of keys (type, model, ...), "
                f"not {kind_of(value)}" + suggest(key, RESERVED_KEYS),
            )
    if not units_raw:
        errors.add((), "the workflow defines no application units")
    # Counted before anything is built, so an oversized input costs no more than reading it.
    if len(units_raw) > limits.max_units:
        errors.add((), over_limit("application units", len(units_raw), limits.max_units))
        return None
    if isinstance(nodes_raw, Mapping) and len(nodes_raw) > limits.max_nodes:
        errors.add(("workflows",), over_limit("nodes", len(nodes_raw), limits.max_nodes))
        return None
    if nodes_raw is None and len(units_raw) > limits.max_nodes:
        errors.add((), over_limit("nodes (one per unit)", len(units_raw), limits.max_nodes))
        return None
    bad_units: set[str] = set()
    for key, (unit, origin) in units_raw.items():
        task = isinstance(unit, Relocated)
        # Without 'workflows:' each unit is a node of its own name: an identifier, as tasks are.
        problem = name_problem(key, "task" if task else "unit", label=not task and nodes_raw is not None)
        if problem and not task and nodes_raw is None and name_problem(key, "unit", label=True) is None:
            problem += "; a unit is a node of its own name without 'workflows:': name the nodes there"
        if problem:
            errors.add((*origin, "name") if task else origin, problem)
            bad_units.add(key)
    if isinstance(nodes_raw, Mapping | None):
        nodes_raw = _legacy_servers(units_raw, nodes_raw, bad_units)
        if nodes_raw is not None and len(nodes_raw) > limits.max_nodes:
            errors.add(
                (), over_limit("nodes (with one per legacy model server)", len(nodes_raw), limits.max_nodes)
            )
            return None
    if weights is not None:
        wf_kwargs["weights"] = weights
    before_keys = len(errors.errors)
    wf_kwargs = _check_workflow_keys(wf_kwargs, errors)
    keys_stand = len(errors.errors) == before_keys and not bad_units

    applications: dict[str, Application] = {}
    for unit_name, (unit, origin) in units_raw.items():
        if unit_name in bad_units:
            continue  # reported above
        app = _build_unit(unit_name, unit, origin, errors)
        if app is not None and wf_kwargs.get("weights") == "random" and app.model:
            # Before the checks: the twin reads no file, so a machine without the weights passes.
            app = app.model_copy(update={"model": random_weights_name(app.model)})
        if app is not None:
            applications[unit_name] = app
            for check in unit_checks:
                for loc, message in check(app):
                    errors.add((*origin, *loc), message)

    before_nodes = len(errors.errors)
    nodes = _build_nodes(nodes_raw, units_raw, errors, bad_units)
    for loc, message in dag_problems(units_raw, nodes):
        # Without 'workflows:' each unit is a node of its own name, found at the unit.
        errors.add(loc if nodes_raw is not None else loc[1:], message)
    if len(errors.errors) == before_nodes:
        # A unit that could not be built is no server to check against (its own problem is reported).
        checkable = {
            k: a for k, a in applications.items() if a.server in applications or a.server not in units_raw
        }
        for loc, message in _server_problems(checkable, nodes):
            if loc[0] == "workflows":
                errors.add(loc if nodes_raw is not None else loc[1:], message)
            else:
                errors.add((*units_raw[str(loc[0])][1], *loc[1:]), message)
    whole_stands = keys_stand and len(errors.errors) == before_nodes and len(applications) == len(units_raw)
    if errors.errors and not whole_stands:
        return None
    if errors.errors:
        # Problems inside units only: built unvalidated, so that the checks of the whole workflow (its
        # requests per run, the scheduler's) still report with them; it is never returned.
        workflow = Workflow.model_construct(applications=applications, nodes=nodes, **wf_kwargs)
    else:
        try:
            workflow = Workflow(applications=applications, nodes=nodes, **wf_kwargs)
        except ValidationError as exc:
            _pydantic_errors(exc, (), errors)
            return None
    _check_total_requests(workflow, limits, errors, {u: origin for u, (_, origin) in units_raw.items()})
    for message in SCHEDULERS[workflow.scheduler].spec_problems(workflow):
        errors.add(("workflows",), message)
    return None if errors.errors else workflow


def _legacy_servers(
    units: dict[str, tuple[Mapping[str, Any], Path_]],
    nodes_raw: Mapping[str, Any] | None,
    bad_units: set[str],
) -> Mapping[str, Any] | None:
    """Give each Chatbot or DeepResearch unit written with the original format's ``server_model`` and
    ``client_model`` a model server of its own, as the original does: a ``<unit>_server`` LLMServer
    unit with the ``server_model`` on the unit's device, run by a background node ``<node>_server``,
    and the unit its client (``server:``, asking for ``client_model``). Changes ``units`` in place
    (the new unit's problems point at the client's lines); returns the nodes, made explicit if they
    were not. Other types keep ``server_model`` as their model.
    """
    added: dict[str, Any] = {}
    for key, (unit, origin) in list(units.items()):
        kind = unit.get("type")
        app = resolve_type(kind) if isinstance(kind, str) else None
        legacy = "server_model" in unit and "client_model" in unit and "server" not in unit
        if key in bad_units or app is None or not app.server_client or not legacy:
            continue
        name = _unused(f"{key}_server" if NAME_RE.fullmatch(key) else f"{key} server", units)
        # The server's slots hold the client's context window (its n_ctx, else its type's default).
        n_ctx = unit.get("n_ctx", app.options.model_fields["n_ctx"].default)
        server: dict[str, Any] = {"type": LLM_SERVER, "model": unit["server_model"], "n_ctx": n_ctx}
        if "device" in unit:
            server["device"] = unit["device"]
        units[name] = (Relocated(server, origin), origin)
        client = {k: v for k, v in unit.items() if k != "server_model"}
        if client.get("model") == unit["server_model"]:
            del client["model"]
        units[key] = (Relocated({**client, "server": name}, origin), origin)
        if nodes_raw is None:  # units are nodes of their own (identifier) names
            added[name] = {"uses": name, "background": True}
        else:
            node = _unused(
                re.sub(r"[^A-Za-z0-9_-]+", "_", key).strip("_") + "_server", {**nodes_raw, **added}
            )
            added[node] = {"uses": name, "background": True}
    if not added:
        return nodes_raw
    servers = {body["uses"] for body in added.values()}
    base = dict(nodes_raw) if nodes_raw is not None else {k: {"uses": k} for k in units if k not in servers}
    return {**base, **added}


def _unused(name: str, taken: Mapping[str, Any]) -> str:
    """Return ``name``, or ``name_2``, ``name_3``... the first that ``taken`` does not hold."""
    candidate, k = name, 2
    while candidate in taken:
        candidate, k = f"{name}_{k}", k + 1
    return candidate


def _server_problems(
    applications: Mapping[str, Application], nodes: Mapping[str, Node]
) -> list[tuple[Path_, str]]:
    """Return the model-server problems: the model's rules (``server_problems``) and that a unit's
    ``server`` names a unit of a server type (``AppType.serves``)."""
    problems: list[tuple[Path_, str]] = []
    for unit in applications.values():
        target = applications.get(unit.server or "")
        if target is not None and not APP_TYPES[target.type].serves:
            servers = ", ".join(a.name for a in APP_TYPES.values() if a.serves)
            problems.append(
                (
                    (unit.name, "server"),
                    f"unit '{unit.name}' names server '{target.name}', a {target.type} unit, which is "
                    f"not a model server (server types: {servers})",
                )
            )
    wrong = {str(loc[0]) for loc, _ in problems}
    return problems + server_problems({k: a for k, a in applications.items() if k not in wrong}, nodes)


def _check_total_requests(
    workflow: Workflow, limits: Limits, errors: Collector, origins: Mapping[str, Path_]
) -> None:
    per_node = requests_per_run(workflow)
    total = sum(per_node.values())
    if total <= limits.max_total_requests:
        return
    largest = max(per_node, key=lambda n: per_node[n])
    unit = workflow.nodes[largest].uses
    errors.add(
        (*origins.get(unit, (unit,)), "num_requests"),
        f"one run would issue {total:,} requests (over the nodes, (warmup_requests + num_requests) x "
        f"concurrency), over the limit of {limits.max_total_requests:,}; node '{largest}' (unit "
        f"'{unit}') alone issues {per_node[largest]:,}",
    )


def _check_workflow_keys(kwargs: dict[str, Any], errors: Collector) -> dict[str, Any]:
    out = dict(kwargs)
    if isinstance(out.get("scheduler"), Mapping):
        out.update(_scheduler_choice(out.pop("scheduler"), errors))
    for key, kind in (("name", str), ("description", str), ("scheduler", str)):
        if key in out and not isinstance(out[key], kind):
            errors.add((key,), f"'{key}' must be a string, not {kind_of(out[key])}")
            out.pop(key)
    for key in ("repeat", "seed"):
        if key in out and (not isinstance(out[key], int) or isinstance(out[key], bool)):
            errors.add((key,), f"'{key}' must be a whole number, not {kind_of(out[key])}")
            out.pop(key)
    if "start_together" in out and not isinstance(out["start_together"], bool):
        errors.add(
            ("start_together",),
            f"'start_together' must be true or false, not {kind_of(out['start_together'])}",
        )
        out.pop("start_together")
    if "weights" in out and out["weights"] not in WEIGHTS:
        errors.add(("weights",), f"'weights' must be one of {', '.join(WEIGHTS)}, not {out['weights']!r}")
        out.pop("weights")
    if out.get("repeat", 1) < 1:
        errors.add(("repeat",), "'repeat' must be at least 1")
    if "scheduler" in out and out["scheduler"] not in SCHEDULERS:
        errors.add(
            ("scheduler",) if "scheduler_params" not in out else ("scheduler", "name"),
            f"unknown scheduler '{out['scheduler']}'; known: {', '.join(SCHEDULERS)}"
            + suggest(str(out["scheduler"]), SCHEDULERS),
        )
    elif "scheduler_params" in out:
        for param, message in param_problems(out.get("scheduler", "greedy"), out["scheduler_params"]):
            errors.add(("scheduler", param), message)
    return out


def _scheduler_choice(value: Mapping[Any, Any], errors: Collector) -> dict[str, Any]:
    """Split ``scheduler: {name: credit, pressure_threshold: 0.4}`` into the workflow's ``scheduler``
    and ``scheduler_params`` (checked against the scheduler's parameters by the caller)."""
    name = value.get("name")
    if not isinstance(name, str):
        errors.add(
            ("scheduler", "name") if "name" in value else ("scheduler",),
            "'scheduler' as a mapping needs 'name', the scheduler's name "
            f"({', '.join(SCHEDULERS)}), e.g. {{name: credit, pressure_threshold: 0.4}}",
        )
        return {}
    params: dict[str, Any] = {}
    for key, param in value.items():
        if key == "name":
            continue
        if not isinstance(key, str):
            errors.add(("scheduler",), f"scheduler parameter {key!r} must be named by a string")
        elif param is not None and not isinstance(param, str | bool | int | float):
            errors.add(("scheduler", key), f"must be a number, string or true/false, not {kind_of(param)}")
        else:
            params[key] = param
    return {"scheduler": name, "scheduler_params": params}


def _build_unit(
    unit_name: str, unit: Mapping[str, Any], origin: Path_, errors: Collector
) -> Application | None:
    bad = [k for k in unit if not isinstance(k, str)]
    for key in bad:
        errors.add(origin, f"key {key!r} of unit '{unit_name}' must be a string")
    unit = {k: v for k, v in unit.items() if isinstance(k, str)}
    type_name = unit.get("type")
    if type_name is None:
        errors.add(origin, f"unit '{unit_name}' has no 'type'; known types: {', '.join(APP_TYPES)}")
        return None
    app = resolve_type(type_name) if isinstance(type_name, str) else None
    if app is None:
        errors.add(
            (*origin, "type"),
            f"unknown application type {type_name!r} in unit '{unit_name}'; "
            f"known types: {', '.join(APP_TYPES)}" + suggest(str(type_name), APP_TYPES),
        )
        return None
    option_keys = tuple(app.options.model_fields)
    known = COMMON_UNIT_KEYS + option_keys
    common: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for key, value in unit.items():
        if key in option_keys:
            options[key] = value
        elif key in COMMON_UNIT_KEYS:
            common[key] = value
        else:
            errors.add(
                (*origin, key),
                f"unknown key '{key}' in unit '{unit_name}' ({app.name})" + suggest(key, known),
            )
    if "server_model" in common:
        server = common.pop("server_model")
        if "model" in common and common["model"] != server:
            errors.add(
                (*origin, "server_model"),
                f"unit '{unit_name}' gives both 'model' and 'server_model' with different values; keep one",
            )
        common.setdefault("model", server)
    before = len(errors.errors)
    kwargs: dict[str, Any] = {
        "name": unit_name,
        "type": app.name,
        "num_requests": common.pop("num_requests", app.default_num_requests),
        "priority": common.pop("priority", app.default_priority),
    }
    if "server" in common:
        if not app.server_client:
            clients = ", ".join(a.name for a in APP_TYPES.values() if a.server_client)
            errors.add(
                (*origin, "server"),
                f"unit '{unit_name}' ({app.name}) cannot use a model server; the types that can: {clients}",
            )
        elif "model" in common:
            errors.add(
                (*origin, "model"),
                f"unit '{unit_name}' names a server, whose model it uses: remove 'model' (or 'server')",
            )
        common.pop("model", None)
        kwargs["model"] = None
    else:
        kwargs["model"] = common.pop("model", app.default_model)
    # The SLOs are parsed once the options are known: a type's default SLOs may depend on them.
    has_slo = "slo" in common
    slo_value = common.pop("slo", None)
    if "memory_limit" in common:
        limit = _memory_limit_mb(common.pop("memory_limit"), (*origin, "memory_limit"), errors)
        if "gpu_memory_limit_mb" in common:
            errors.add(
                (*origin, "memory_limit"),
                f"unit '{unit_name}' gives both 'memory_limit' and 'gpu_memory_limit_mb'; keep one",
            )
        elif limit is not None:
            common["gpu_memory_limit_mb"] = limit
    if "arrival" in common:
        kwargs["arrival"] = _parse_arrival(common.pop("arrival"), (*origin, "arrival"), errors)
    if isinstance(kwargs["priority"], str):
        kwargs["priority"] = kwargs["priority"].strip().lower()
    if isinstance(common.get("device"), str):
        common["device"] = common["device"].strip().lower()
    common.pop("type", None)
    kwargs.update(common)
    if app.needs_model and not kwargs["model"] and not common.get("server"):
        errors.add(origin, f"unit '{unit_name}' ({app.name}) needs 'model'")
    try:
        kwargs["options"] = app.options(**options)
    except ValidationError as exc:
        _pydantic_errors(exc, origin, errors, unit_name)
        # Unvalidated, so that the unit's common keys are still checked below.
        kwargs["options"] = app.options.model_construct(**options)
    slo_value = slo_value if has_slo else list(app.default_slos(kwargs["options"]))
    kwargs["slo"] = _parse_slo_field(slo_value, app, (*origin, "slo"), errors)
    try:
        built = Application(**kwargs)
    except ValidationError as exc:
        _pydantic_errors(exc, origin, errors, unit_name)
        return None
    return None if len(errors.errors) > before else built


def _memory_limit_mb(value: Any, path: Path_, errors: Collector) -> int | None:
    """Return a unit's ``memory_limit`` (``"8GiB"``, ``"512MiB"``, ``"8G"``) in MiB, rounded up; report
    anything else at ``path`` and return None."""
    match = _SIZE_RE.match(value) if isinstance(value, str) else None
    if match is None:
        errors.add(
            path,
            f"'memory_limit' must be a size such as '8GiB' or '512MiB' (or give 'gpu_memory_limit_mb'), "
            f"not {value!r}",
        )
        return None
    mib = math.ceil(float(match.group(1)) * _SIZE_MIB[match.group(2).upper()])
    if mib < 1:
        errors.add(path, f"'memory_limit' must be at least 1 MiB (got {value!r})")
        return None
    return mib


def _parse_slo_field(value: Any, app: AppType, path: Path_, errors: Collector) -> tuple[SLO, ...]:
    if value is None:
        return ()
    items: list[tuple[Path_, str]] = []
    if isinstance(value, str):
        items = [(path, value)]
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, str):
                items.append(((*path, i), item))
            else:
                errors.add((*path, i), f"an SLO must be a string such as 'TTFT<1s', not {kind_of(item)}")
    elif isinstance(value, Mapping):
        for metric, threshold in value.items():
            if isinstance(threshold, bool) or not isinstance(threshold, int | float | str):
                errors.add((*path, str(metric)), f"SLO threshold for '{metric}' must be a duration like 1s")
                continue
            items.append(((*path, str(metric)), f"{metric}<={threshold}"))
    else:
        errors.add(path, f"'slo' must be a list of expressions such as ['TTFT<1s'], not {kind_of(value)}")
    slos: list[SLO] = []
    seen: set[str] = set()
    for item_path, text in items:
        try:
            slo = parse_slo(text)
        except ValueError as exc:
            errors.add(item_path, str(exc))
            continue
        if slo.metric not in app.slo_metrics:
            errors.add(
                item_path,
                f"{app.name} has no SLO metric '{slo.metric}'; it has: "
                f"{', '.join(app.slo_metrics)}" + suggest(slo.metric, app.slo_metrics),
            )
            continue
        if slo.metric in seen:
            errors.add(item_path, f"two SLOs on '{slo.metric}'; keep one")
            continue
        seen.add(slo.metric)
        slos.append(slo)
    return tuple(slos)


def _parse_arrival(value: Any, path: Path_, errors: Collector) -> Any:
    if isinstance(value, str):
        value = {"kind": value.strip().lower()}
    if not isinstance(value, Mapping):
        errors.add(
            path, f"'arrival' must be a mapping such as {{kind: poisson, rate: 2}}, not {kind_of(value)}"
        )
        return Arrival()
    known = tuple(Arrival.model_fields)
    for key in value:
        if key not in known:
            errors.add((*path, str(key)), f"unknown key '{key}' in arrival" + suggest(str(key), known))
    try:
        return Arrival(**{k: v for k, v in value.items() if k in known})
    except ValidationError as exc:
        _pydantic_errors(exc, path, errors)
        return Arrival()


def _pydantic_errors(exc: ValidationError, origin: Path_, errors: Collector, unit: str | None = None) -> None:
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if p != "options")
        where = f" in unit '{unit}'" if unit else ""
        field = ".".join(str(p) for p in loc) or "value"
        message = err["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        got = err.get("input")
        shown = (
            ""
            if isinstance(got, Mapping) or err["type"] in ("missing", "extra_forbidden")
            else f" (got {got!r})"
        )
        errors.add((*origin, *loc), f"'{field}'{where}: {message}{shown}")


def _build_nodes(
    nodes_raw: Any,
    units: Mapping[str, tuple[Mapping[str, Any], Path_]],
    errors: Collector,
    bad_units: set[str],
) -> dict[str, Node]:
    implicit = nodes_raw is None
    if nodes_raw is None:
        nodes_raw = {name: {"uses": name} for name in units}
    if not isinstance(nodes_raw, Mapping):
        errors.add(("workflows",), f"'workflows' must be a mapping of node names, not {kind_of(nodes_raw)}")
        return {}
    nodes: dict[str, Node] = {}
    for node_name, body in nodes_raw.items():
        path: Path_ = (str(node_name),) if implicit else ("workflows", str(node_name))
        if not isinstance(node_name, str):
            errors.add(("workflows",), f"node name {node_name!r} must be a string")
            continue
        problem = name_problem(node_name, "node")
        if problem and node_name not in bad_units:  # a unit's name problem is reported at the unit
            errors.add(path, problem)
        if body is None:
            body = {}
        if not isinstance(body, Mapping):
            errors.add(path, f"node '{node_name}' must be a mapping with 'uses', not {kind_of(body)}")
            continue
        for key in body:
            if key not in NODE_KEYS:
                errors.add(
                    (*path, str(key)),
                    f"unknown key '{key}' in node '{node_name}'"
                    + suggest(str(key), ("uses", "depend_on", "background")),
                )
        uses = body.get("uses", node_name if node_name in units else None)
        if uses is None:
            errors.add(path, f"node '{node_name}' has no 'uses' (the application unit it runs)")
            continue
        if not isinstance(uses, str):
            errors.add((*path, "uses"), f"'uses' must name an application unit, not {kind_of(uses)}")
            continue
        deps_key = "depends_on" if "depends_on" in body else "depend_on"
        deps = body.get(deps_key) or []
        if isinstance(deps, str):
            deps = [deps]
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            errors.add((*path, deps_key), f"'{deps_key}' of node '{node_name}' must be a list of node names")
            deps = []
        background = body.get("background", False)
        if not isinstance(background, bool):
            errors.add((*path, "background"), f"'background' must be true or false, not {background!r}")
            background = False
        # A node with a bad name is kept unvalidated so that its edges are still checked; the
        # workflow is not built while any error stands.
        nodes[node_name] = (Node.model_construct if problem else Node)(
            name=node_name, uses=uses, depend_on=tuple(dict.fromkeys(deps)), background=background
        )
    if not nodes and units:
        errors.add(("workflows",), "'workflows' defines no nodes")
    return nodes
