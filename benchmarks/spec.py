"""The canonical workflow specification and its three input dialects.

Dialects, all normalised into ``Workflow``:

1. native ConsumerBench YAML: top-level application units plus ``workflows:`` (``uses``,
   ``depend_on``, ``background``), legacy type names and ``server_model``/``client_model`` accepted;
2. task-list YAML: ``<workflow name>: {tasks: [{type, model, slo: ["TTFT<1s"], depends_on: [...]}]}``;
3. plain dicts (the web editor's forms and the REST API's JSON), in either shape.

Every problem in an input is collected and raised together as ``WorkflowValidationError``; each
``SpecError`` carries the YAML path, the line (when the input was text) and a plain sentence.
``dump_yaml`` writes canonical YAML (the native dialect with every default made explicit) and
``load_yaml(dump_yaml(w)) == w`` holds.
"""

from __future__ import annotations

import difflib
import graphlib
import heapq
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from benchmarks.apps import APP_TYPES, AppType, resolve_type
from benchmarks.apps.base import AppOptions
from benchmarks.files import DATA_FILE, DATA_FILE_OR_FOLDER, MODEL

MAX_FILE_BYTES = 1024 * 1024
# Bounds the work of alias expansion ("billion laughs") and of hostile nesting.
MAX_YAML_NODES = 200_000
MAX_YAML_DEPTH = 64


@dataclass(frozen=True)
class Limits:
    """Upper bounds on one workflow input, checked while it is loaded (docs/workflow-format.md).

    The one home of the input limits: the CLI uses these defaults, the web application passes its
    settings (CB_MAX_*). Each bound protects a resource: parse time and memory (bytes, depth,
    values), OS processes (nodes: one per node), and the worker's time and disk (requests per run).
    """

    max_bytes: int = MAX_FILE_BYTES
    max_depth: int = MAX_YAML_DEPTH
    max_values: int = MAX_YAML_NODES
    # A consumer device runs a handful of applications; 64 processes is already far beyond that, and
    # the web editor renders every node as a card (with every other node as a dependency choice).
    max_units: int = 64
    max_nodes: int = 64
    # Sum over the nodes of (warmup_requests + num_requests) x concurrency: one run's requests.
    max_total_requests: int = 100_000


DEFAULT_LIMITS = Limits()

RESERVED_KEYS = ("name", "description", "scheduler", "repeat", "seed", "start_together", "workflows")
# Top-level keys of a task-list workflow besides 'tasks'.
TASK_LIST_KEYS = ("description", "scheduler", "repeat", "seed", "start_together")
COMMON_UNIT_KEYS = (
    "type",
    "model",
    "server_model",
    "client_model",
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
)
NODE_KEYS = ("uses", "depend_on", "depends_on", "background")
TASK_KEYS = ("name", "background", "depends_on", "depend_on")
PRIORITIES = ("high", "medium", "low")
# Node names become file and folder names of a run's result bundle (one CSV per node, a folder of
# artifacts): identifiers only, so that no name can leave the run folder or be rewritten into
# another's file name. The leading letter or digit keeps names from reading as options (-x) or
# hidden files. Unit names are identifiers too (task names are both), except that the native
# dialect also accepts the original ConsumerBench's unit labels such as "Brainstorm (chatbot)"
# (spaces and "( ) ." besides): a unit name is never a path component.
NAME_MAX_CHARS = 64
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
NAME_PATTERN = rf"^{NAME_RE.pattern}$"
UNIT_LABEL_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9 _().-]*[A-Za-z0-9_().-])?")
UNIT_LABEL_PATTERN = rf"^{UNIT_LABEL_RE.pattern}$"
DEVICES = ("auto", "gpu", "cpu")


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class SpecError:
    """One problem in a workflow input: where (YAML path as a tuple of keys and indexes, line) and what.

    ``loc`` is the structured path (``("workflows", "outline", "depend_on", 1)``, ``()`` for the whole
    input); ``path`` renders it as text (``workflows.outline.depend_on[1]``) for people and JSON.
    """

    loc: Path_
    line: int | None
    message: str

    @property
    def path(self) -> str:
        """The location as text, e.g. ``workflows.outline.depend_on[1]`` (empty for the whole input)."""
        return format_path(self.loc)

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.path or '<top>'}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """Return the error as a JSON-ready dict."""
        return {"path": self.path, "line": self.line, "message": self.message}


class WorkflowValidationError(ValueError):
    """Every problem found in one workflow input, reported together."""

    def __init__(self, errors: list[SpecError], source: str | None = None) -> None:
        self.errors = sorted(errors, key=lambda e: (e.line if e.line is not None else 1 << 30, e.path))
        self.source = source
        head = f"{source}: " if source else ""
        lines = "\n".join(f"  {e}" for e in self.errors)
        super().__init__(f"{head}{len(self.errors)} problem(s) in the workflow:\n{lines}")

    def to_json(self) -> list[dict[str, Any]]:
        """Return the errors as a list of ``{path, line, message}`` dicts."""
        return [e.to_dict() for e in self.errors]



def format_path(path: Path_) -> str:
    """Render a path like ``workflows.outline.depend_on[1]`` (keys with spaces or dots quoted)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = part if re.fullmatch(r"[A-Za-z0-9_\-]+", part) else json.dumps(part, ensure_ascii=False)
            out += f".{text}" if out else text
    return out


class _Collector:
    """Accumulates errors, resolving each path to the line the YAML loader recorded for it."""

    def __init__(self, lines: Mapping[Path_, int] | None) -> None:
        self.lines = lines or {}
        self.errors: list[SpecError] = []

    def line_of(self, path: Path_) -> int | None:
        while True:
            if path in self.lines:
                return self.lines[path]
            if not path:
                return None
            path = path[:-1]

    def add(self, path: Path_, message: str) -> None:
        self.errors.append(SpecError(path, self.line_of(path), message))


# --------------------------------------------------------------------------------------------------
# SLOs and arrival processes
# --------------------------------------------------------------------------------------------------

_SLO_RE = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|<)\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us)?\s*$"
)
_UNIT_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6, None: 1.0}


class SLO(BaseModel):
    """A latency objective on one metric: ``ttft<=1s`` means the request's TTFT is at most 1 s."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    metric: str
    op: Literal["<", "<="] = "<="
    threshold_s: float = Field(gt=0)

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.threshold_s!r}s"

    def met(self, value: float) -> bool:
        """Return whether a measured value (seconds) meets the objective."""
        return value < self.threshold_s if self.op == "<" else value <= self.threshold_s


def parse_slo(text: str) -> SLO:
    """Parse ``"TTFT<1s"``, ``"tpot<=250ms"`` or ``"chunk<2"`` (seconds) into an ``SLO``.

    Raises ValueError with a sentence that says what is wrong.
    """
    match = _SLO_RE.match(text)
    if not match:
        raise ValueError(
            f"malformed SLO expression {text!r}: expected METRIC<VALUE or METRIC<=VALUE with an "
            "optional unit s, ms or us, e.g. 'TTFT<1s' or 'tpot<=250ms'"
        )
    metric, op, number, unit = match.groups()
    value = float(number) * _UNIT_SCALE[unit]
    if not value > 0 or not math.isfinite(value):
        raise ValueError(f"SLO threshold in {text!r} must be a positive number of seconds")
    return SLO(metric=metric.lower(), op="<" if op == "<" else "<=", threshold_s=value)


class Arrival(BaseModel):
    """How requests arrive: a closed loop with think time, a fixed rate, Poisson, or a trace file."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    kind: Literal["closed", "fixed", "poisson", "trace"] = "closed"
    think_time_s: float = Field(0.0, ge=0, le=86_400)
    rate: float | None = Field(None, gt=0, le=1_000_000, description="requests per second (fixed, poisson)")
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1)
    trace: Annotated[str | None, DATA_FILE] = Field(
        None, description="file with one arrival time (s) per line"
    )

    @model_validator(mode="after")
    def _check_kind(self) -> Arrival:
        if self.kind in ("fixed", "poisson") and self.rate is None:
            raise ValueError(f"arrival kind '{self.kind}' needs 'rate' (requests per second)")
        if self.kind == "trace" and not self.trace:
            raise ValueError("arrival kind 'trace' needs 'trace' (a file of arrival times)")
        if self.kind != "closed" and self.think_time_s:
            raise ValueError("'think_time_s' applies only to the closed loop")
        if self.kind in ("closed", "trace") and self.rate is not None:
            raise ValueError(f"'rate' does not apply to arrival kind '{self.kind}'")
        return self


# --------------------------------------------------------------------------------------------------
# The canonical model
# --------------------------------------------------------------------------------------------------


class Application(BaseModel):
    """One application unit: its type, model, request count, placement, SLOs and options."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    name: str = Field(pattern=UNIT_LABEL_PATTERN, max_length=NAME_MAX_CHARS)
    type: str
    model: Annotated[str | None, MODEL] = None
    client_model: str | None = None
    num_requests: int = Field(ge=1, le=10_000_000)
    device: Literal["auto", "gpu", "cpu"] = "auto"
    mps: int | None = Field(None, ge=0, le=100)
    slo: tuple[SLO, ...] = ()
    priority: Literal["high", "medium", "low"]
    arrival: Arrival = Arrival()
    warmup_requests: int = Field(0, ge=0, le=1_000_000)
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1)
    dataset: Annotated[str | None, DATA_FILE_OR_FOLDER] = None
    concurrency: int = Field(1, ge=1, le=64, description="concurrent sessions (users) of this application")
    options: AppOptions

    @property
    def app_type(self) -> AppType:
        """Return the registered application type."""
        return APP_TYPES[self.type]


class Node(BaseModel):
    """One node of the DAG: an instance of a unit, with its dependencies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, max_length=NAME_MAX_CHARS)
    uses: str
    depend_on: tuple[str, ...] = ()
    background: bool = False


class Workflow(BaseModel):
    """A validated workflow: units, DAG nodes, default scheduler, repetitions, seed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = ""
    scheduler: str = "greedy"
    repeat: int = Field(1, ge=1, le=1000)
    seed: int = Field(0, ge=-(2**63), le=2**63 - 1)
    # Nodes that start at the same point of the DAG begin their requests together, once every one of
    # them has loaded, instead of each as soon as its own model is loaded.
    start_together: bool = False
    applications: dict[str, Application]
    nodes: dict[str, Node]

    def unit_of(self, node: str) -> Application:
        """Return the application unit a node uses."""
        return self.applications[self.nodes[node].uses]

    def topological_order(self) -> list[str]:
        """Return node names so that every node comes after its dependencies.

        Stable: among the nodes whose dependencies are met, the one defined first comes first.
        Raises ValueError naming the nodes of a dependency cycle or an unknown dependency (possible
        only for a Workflow built in Python: the loaders report both).
        """
        index = {name: i for i, name in enumerate(self.nodes)}
        for node in self.nodes.values():
            unknown = [d for d in node.depend_on if d not in index]
            if unknown:
                raise ValueError(f"node '{node.name}' depends on unknown node(s): {', '.join(unknown)}")
        sorter = graphlib.TopologicalSorter({n: node.depend_on for n, node in self.nodes.items()})
        try:
            sorter.prepare()
        except graphlib.CycleError as exc:
            cycle = list(reversed(exc.args[1]))
            raise ValueError("dependency cycle: " + " -> ".join(cycle)) from None
        ready = [index[n] for n in sorter.get_ready()]
        heapq.heapify(ready)
        names = list(self.nodes)
        order: list[str] = []
        while ready:
            name = names[heapq.heappop(ready)]
            order.append(name)
            sorter.done(name)
            for n in sorter.get_ready():
                heapq.heappush(ready, index[n])
        return order


# --------------------------------------------------------------------------------------------------
# YAML with line numbers
# --------------------------------------------------------------------------------------------------


class _YamlWalker:
    """Turns a composed YAML node tree into Python values, recording the line of every path."""

    def __init__(self, errors: _Collector, limits: Limits = DEFAULT_LIMITS) -> None:
        self.errors = errors
        self.limits = limits
        self.lines: dict[Path_, int] = {}
        self.constructor = yaml.SafeLoader("")
        self.count = 0
        self.stack: set[int] = set()

    def walk(self, node: yaml.Node, path: Path_) -> Any:
        self.count += 1
        if self.count > self.limits.max_values:
            raise _Abort(f"the document expands to more than {self.limits.max_values} values (alias bomb?)")
        if len(path) > self.limits.max_depth:
            raise _Abort(f"the document nests deeper than {self.limits.max_depth} levels")
        self.lines.setdefault(path, node.start_mark.line + 1)
        if id(node) in self.stack:
            raise _Abort(f"line {node.start_mark.line + 1}: recursive YAML alias")
        if isinstance(node, yaml.ScalarNode):
            return self.constructor.construct_object(node, deep=True)
        self.stack.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.walk(item, (*path, i)) for i, item in enumerate(node.value)]
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            raise _Abort(f"line {node.start_mark.line + 1}: unsupported YAML node")
        finally:
            self.stack.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> dict[str, Any]:
        out: dict[str, Any] = {}
        merged: list[dict[str, Any]] = []
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                value = self.walk(value_node, path)
                merged.extend(value if isinstance(value, list) else [value])
                continue
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                self.errors.errors.append(
                    SpecError(path, line, "mapping keys must be plain strings")
                )
                continue
            key = self.constructor.construct_object(key_node)
            if not isinstance(key, str):
                key = str(key)
            if key in out:
                self.errors.errors.append(
                    SpecError((*path, key), line, f"duplicate key '{key}'")
                )
                continue
            self.lines[(*path, key)] = line
            out[key] = self.walk(value_node, (*path, key))
        for extra in merged:
            if not isinstance(extra, dict):
                raise _Abort(f"line {node.start_mark.line + 1}: a YAML merge key needs a mapping")
            for key, value in extra.items():
                out.setdefault(key, value)
        return out


class _Abort(Exception):
    """Stops parsing of a document that cannot be read at all."""


def _bounded_loader(max_depth: int) -> type[yaml.SafeLoader]:
    """Return a SafeLoader whose composer refuses nesting deeper than ``max_depth``.

    PyYAML composes nested collections recursively: the bound stops a deep document long before
    Python's recursion limit (the parser itself is a state machine and needs no bound).
    """

    class BoundedLoader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.depth += 1
            try:
                if self.depth > max_depth + 1:
                    mark = self.peek_event().start_mark
                    raise _Abort(f"line {mark.line + 1}: the document nests deeper than {max_depth} levels")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return BoundedLoader


def parse_yaml_text(
    text: str, source: str | None = None, limits: Limits | None = None
) -> tuple[Any, dict[Path_, int]]:
    """Parse YAML text; return the value and a map from path to line. Raises WorkflowValidationError.

    ``limits`` (default: ``DEFAULT_LIMITS``) bounds the size, nesting and number of values.
    """
    limits = limits or DEFAULT_LIMITS
    errors = _Collector(None)
    if len(text.encode("utf-8", "surrogatepass")) > limits.max_bytes:
        errors.add((), f"the workflow is larger than the limit of {limits.max_bytes} bytes")
        raise WorkflowValidationError(errors.errors, source)
    try:
        node = yaml.compose(text, Loader=_bounded_loader(limits.max_depth))
    except _Abort as exc:
        raise WorkflowValidationError([SpecError((), None, str(exc))], source) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise WorkflowValidationError([SpecError((), line, f"not valid YAML: {problem}")], source) from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise WorkflowValidationError([SpecError((), None, f"not valid YAML: {exc}")], source) from None
    if node is None:
        raise WorkflowValidationError([SpecError((), None, "the file is empty")], source)
    walker = _YamlWalker(errors, limits)
    try:
        value = walker.walk(node, ())
    except _Abort as exc:
        raise WorkflowValidationError([SpecError((), None, str(exc))], source) from None
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        raise WorkflowValidationError([SpecError((), line, f"not valid YAML: {exc}")], source) from None
    if errors.errors:
        raise WorkflowValidationError(errors.errors, source)
    return value, walker.lines


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------


def load_file(path: str | Path, name: str | None = None, limits: Limits | None = None) -> Workflow:
    """Load a workflow file in any dialect; the workflow is named after the file unless it says."""
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
    return load_yaml(text, name=name or path.stem, source=str(path), limits=limits)


def load_yaml(
    text: str, name: str | None = None, source: str | None = None, limits: Limits | None = None
) -> Workflow:
    """Load a workflow from YAML text in any dialect. Raises WorkflowValidationError."""
    data, lines = parse_yaml_text(text, source, limits)
    return from_dict(data, name=name, lines=lines, source=source, limits=limits)


def from_dict(
    data: Any,
    name: str | None = None,
    lines: Mapping[Path_, int] | None = None,
    source: str | None = None,
    limits: Limits | None = None,
) -> Workflow:
    """Normalise a native or task-list mapping into a ``Workflow``. Raises WorkflowValidationError.

    ``name`` names the workflow when the input itself has no ``name:``. ``limits`` (default:
    ``DEFAULT_LIMITS``) bounds nesting, values, units, nodes and requests per run.
    """
    limits = limits or DEFAULT_LIMITS
    errors = _Collector(lines)
    shape_problem = _shape_problem(data, limits)
    if shape_problem:
        errors.add((), shape_problem)
        raise WorkflowValidationError(errors.errors, source)
    if not isinstance(data, Mapping):
        errors.add((), f"a workflow must be a mapping of application units, not {_kind(data)}")
        raise WorkflowValidationError(errors.errors, source)
    bad_keys = [k for k in data if not isinstance(k, str)]
    for key in bad_keys:
        errors.add((), f"top-level key {key!r} must be a string")
    data = {k: v for k, v in data.items() if isinstance(k, str)}
    raw = _task_list_to_native(data, errors, limits) if _is_task_list(data) else data
    workflow = _build(raw, name, errors, limits) if raw is not None else None
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


def _kind(value: Any) -> str:
    if value is None:
        return "empty"
    return {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), f"a {type(value).__name__}"
    )


def _suggest(word: str, choices: Iterable[str]) -> str:
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{match[0]}'?)" if match else ""


def _is_task_list(data: Mapping[str, Any]) -> bool:
    return any(isinstance(v, Mapping) and "tasks" in v for v in data.values())


def _task_list_to_native(
    data: Mapping[str, Any], errors: _Collector, limits: Limits = DEFAULT_LIMITS
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
                + _suggest(str(key), ("tasks", *TASK_LIST_KEYS)),
            )
    tasks = body.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        errors.add((wf_name, "tasks"), "'tasks' must be a non-empty list of tasks")
        return None
    if len(tasks) > limits.max_nodes:
        errors.add((wf_name, "tasks"), _over("tasks (nodes)", len(tasks), limits.max_nodes))
        return None
    task_names: list[str] = []
    taken: set[str] = set()
    types: dict[str, list[str]] = {}
    for i, task in enumerate(tasks):
        path = (wf_name, "tasks", i)
        if not isinstance(task, Mapping):
            errors.add(path, f"task {i} must be a mapping with at least 'type', not {_kind(task)}")
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
        native[tname] = _Relocated(unit, (wf_name, "tasks", i))
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


class _Relocated(dict[str, Any]):
    """A unit mapping that came from elsewhere in the input (a task), so errors point there."""

    def __init__(self, data: Mapping[str, Any], origin: Path_) -> None:
        super().__init__(data)
        self.origin = origin


def _over(what: str, count: int, limit: int) -> str:
    return f"the workflow has {count} {what}, over the limit of {limit}"


def _build(
    raw: Mapping[str, Any], name: str | None, errors: _Collector, limits: Limits = DEFAULT_LIMITS
) -> Workflow | None:
    wf_kwargs: dict[str, Any] = {"name": name or "workflow"}
    units_raw: dict[str, tuple[Mapping[str, Any], Path_]] = {}
    nodes_raw: Any = None
    for key, value in raw.items():
        if key == "workflows":
            nodes_raw = value
        elif key in RESERVED_KEYS:
            if isinstance(value, Mapping):
                errors.add((key,), f"'{key}' is a reserved top-level key; rename this application unit")
            else:
                wf_kwargs[key] = value
        elif isinstance(value, Mapping):
            origin = value.origin if isinstance(value, _Relocated) else (key,)
            units_raw[key] = (value, origin)
        else:
            errors.add(
                (key,),
                f"application unit '{key}' must be a mapping of keys (type, model, ...), "
                f"not {_kind(value)}" + _suggest(key, RESERVED_KEYS),
            )
    if not units_raw:
        errors.add((), "the workflow defines no application units")
    # Counted before anything is built, so an oversized input costs no more than reading it.
    if len(units_raw) > limits.max_units:
        errors.add((), _over("application units", len(units_raw), limits.max_units))
        return None
    if isinstance(nodes_raw, Mapping) and len(nodes_raw) > limits.max_nodes:
        errors.add(("workflows",), _over("nodes", len(nodes_raw), limits.max_nodes))
        return None
    if nodes_raw is None and len(units_raw) > limits.max_nodes:
        errors.add((), _over("nodes (one per unit)", len(units_raw), limits.max_nodes))
        return None
    bad_units: set[str] = set()
    for key, (unit, origin) in units_raw.items():
        task = isinstance(unit, _Relocated)
        # Without 'workflows:' each unit is a node of its own name: an identifier, as tasks are.
        problem = name_problem(key, "task" if task else "unit", label=not task and nodes_raw is not None)
        if problem and not task and nodes_raw is None and name_problem(key, "unit", label=True) is None:
            problem += "; a unit is a node of its own name without 'workflows:': name the nodes there"
        if problem:
            errors.add((*origin, "name") if task else origin, problem)
            bad_units.add(key)
    wf_kwargs = _check_workflow_keys(wf_kwargs, errors)

    applications: dict[str, Application] = {}
    for unit_name, (unit, origin) in units_raw.items():
        if unit_name in bad_units:
            continue  # reported above
        app = _build_unit(unit_name, unit, origin, errors)
        if app is not None:
            applications[unit_name] = app

    nodes = _build_nodes(nodes_raw, units_raw, errors, bad_units)
    _check_graph(nodes, units_raw, errors)
    if errors.errors:
        return None
    try:
        workflow = Workflow(applications=applications, nodes=nodes, **wf_kwargs)
    except ValidationError as exc:
        _pydantic_errors(exc, (), errors)
        return None
    _check_total_requests(workflow, limits, errors, {u: origin for u, (_, origin) in units_raw.items()})
    if workflow.scheduler == "partition":
        for message in partition_share_problems(workflow):
            errors.add(("workflows",), message)
    return None if errors.errors else workflow


def name_problem(name: str, what: str, label: bool = False) -> str | None:
    """Return why ``name`` cannot name a node or unit (a sentence), or None when it is an identifier
    (or, with ``label``, a native unit label such as ``Brainstorm (chatbot)``)."""
    if (UNIT_LABEL_RE if label else NAME_RE).fullmatch(name) and len(name) <= NAME_MAX_CHARS:
        return None
    cut = NAME_MAX_CHARS + 8
    shown = json.dumps(name if len(name) <= cut else name[:cut] + "...", ensure_ascii=False)
    if label:
        return (
            f"unit name {shown} is not an identifier or label: use letters, digits, spaces and "
            f"'_ - ( ) .', starting with a letter or digit, at most {NAME_MAX_CHARS} characters"
        )
    return (
        f"{what} name {shown} is not an identifier: use letters, digits, '_' and '-', starting with a "
        f"letter or digit, at most {NAME_MAX_CHARS} characters"
    )


def requests_per_run(workflow: Workflow) -> dict[str, int]:
    """Return the requests each node issues in one run: (warmup_requests + num_requests) x concurrency."""
    out = {}
    for name in workflow.nodes:
        unit = workflow.unit_of(name)
        out[name] = (unit.warmup_requests + unit.num_requests) * unit.concurrency
    return out


def _check_total_requests(
    workflow: Workflow, limits: Limits, errors: _Collector, origins: Mapping[str, Path_]
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


def _check_workflow_keys(kwargs: dict[str, Any], errors: _Collector) -> dict[str, Any]:
    from benchmarks.schedulers import SCHEDULERS

    out = dict(kwargs)
    for key, kind in (("name", str), ("description", str), ("scheduler", str)):
        if key in out and not isinstance(out[key], kind):
            errors.add((key,), f"'{key}' must be a string, not {_kind(out[key])}")
            out.pop(key)
    for key in ("repeat", "seed"):
        if key in out and (not isinstance(out[key], int) or isinstance(out[key], bool)):
            errors.add((key,), f"'{key}' must be a whole number, not {_kind(out[key])}")
            out.pop(key)
    if "start_together" in out and not isinstance(out["start_together"], bool):
        errors.add(
            ("start_together",), f"'start_together' must be true or false, not {_kind(out['start_together'])}"
        )
        out.pop("start_together")
    if out.get("repeat", 1) < 1:
        errors.add(("repeat",), "'repeat' must be at least 1")
    if "scheduler" in out and out["scheduler"] not in SCHEDULERS:
        errors.add(("scheduler",), f"unknown scheduler '{out['scheduler']}'; known: {', '.join(SCHEDULERS)}")
    if "name" in out and not str(out["name"]).strip():
        errors.add(("name",), "'name' must not be empty")
    return out


def _build_unit(
    unit_name: str, unit: Mapping[str, Any], origin: Path_, errors: _Collector
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
            f"known types: {', '.join(APP_TYPES)}" + _suggest(str(type_name), APP_TYPES),
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
                f"unknown key '{key}' in unit '{unit_name}' ({app.name})" + _suggest(key, known),
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
    kwargs["model"] = common.pop("model", app.default_model)
    kwargs["slo"] = _parse_slo_field(common.pop("slo", list(app.default_slo)), app, (*origin, "slo"), errors)
    if "arrival" in common:
        kwargs["arrival"] = _parse_arrival(common.pop("arrival"), (*origin, "arrival"), errors)
    if isinstance(kwargs["priority"], str):
        kwargs["priority"] = kwargs["priority"].strip().lower()
    if isinstance(common.get("device"), str):
        common["device"] = common["device"].strip().lower()
    common.pop("type", None)
    kwargs.update(common)
    if app.needs_model and not kwargs["model"]:
        errors.add(origin, f"unit '{unit_name}' ({app.name}) needs 'model'")
    try:
        kwargs["options"] = app.options(**options)
    except ValidationError as exc:
        _pydantic_errors(exc, origin, errors, unit_name)
        return None
    if len(errors.errors) > before:
        return None
    try:
        return Application(**kwargs)
    except ValidationError as exc:
        _pydantic_errors(exc, origin, errors, unit_name)
        return None


def _parse_slo_field(value: Any, app: AppType, path: Path_, errors: _Collector) -> tuple[SLO, ...]:
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
                errors.add((*path, i), f"an SLO must be a string such as 'TTFT<1s', not {_kind(item)}")
    elif isinstance(value, Mapping):
        for metric, threshold in value.items():
            if isinstance(threshold, bool) or not isinstance(threshold, int | float | str):
                errors.add((*path, str(metric)), f"SLO threshold for '{metric}' must be a duration like 1s")
                continue
            items.append(((*path, str(metric)), f"{metric}<={threshold}"))
    else:
        errors.add(path, f"'slo' must be a list of expressions such as ['TTFT<1s'], not {_kind(value)}")
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
                f"{', '.join(app.slo_metrics)}" + _suggest(slo.metric, app.slo_metrics),
            )
            continue
        if slo.metric in seen:
            errors.add(item_path, f"two SLOs on '{slo.metric}'; keep one")
            continue
        seen.add(slo.metric)
        slos.append(slo)
    return tuple(slos)


def _parse_arrival(value: Any, path: Path_, errors: _Collector) -> Any:
    if isinstance(value, str):
        value = {"kind": value.strip().lower()}
    if not isinstance(value, Mapping):
        errors.add(
            path, f"'arrival' must be a mapping such as {{kind: poisson, rate: 2}}, not {_kind(value)}"
        )
        return Arrival()
    known = tuple(Arrival.model_fields)
    for key in value:
        if key not in known:
            errors.add((*path, str(key)), f"unknown key '{key}' in arrival" + _suggest(str(key), known))
    try:
        return Arrival(**{k: v for k, v in value.items() if k in known})
    except ValidationError as exc:
        _pydantic_errors(exc, path, errors)
        return Arrival()


def _pydantic_errors(
    exc: ValidationError, origin: Path_, errors: _Collector, unit: str | None = None
) -> None:
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
    errors: _Collector,
    bad_units: set[str],
) -> dict[str, Node]:
    implicit = nodes_raw is None
    if nodes_raw is None:
        nodes_raw = {name: {"uses": name} for name in units}
    if not isinstance(nodes_raw, Mapping):
        errors.add(("workflows",), f"'workflows' must be a mapping of node names, not {_kind(nodes_raw)}")
        return {}
    nodes: dict[str, Node] = {}
    seen: dict[str, str] = {}
    for node_name, body in nodes_raw.items():
        path: Path_ = (str(node_name),) if implicit else ("workflows", str(node_name))
        if not isinstance(node_name, str):
            errors.add(("workflows",), f"node name {node_name!r} must be a string")
            continue
        problem = name_problem(node_name, "node")
        if problem and node_name not in bad_units:  # a unit's name problem is reported at the unit
            errors.add(path, problem)
        folded = node_name.lower()
        if folded in seen and problem is None:
            errors.add(
                path,
                f"node names '{seen[folded]}' and '{node_name}' differ only in case; they would share "
                "a file in the result bundle on a case-insensitive disk",
            )
        seen.setdefault(folded, node_name)
        if body is None:
            body = {}
        if not isinstance(body, Mapping):
            errors.add(path, f"node '{node_name}' must be a mapping with 'uses', not {_kind(body)}")
            continue
        for key in body:
            if key not in NODE_KEYS:
                errors.add(
                    (*path, str(key)),
                    f"unknown key '{key}' in node '{node_name}'"
                    + _suggest(str(key), ("uses", "depend_on", "background")),
                )
        uses = body.get("uses", node_name if node_name in units else None)
        if uses is None:
            errors.add(path, f"node '{node_name}' has no 'uses' (the application unit it runs)")
            continue
        if not isinstance(uses, str):
            errors.add((*path, "uses"), f"'uses' must name an application unit, not {_kind(uses)}")
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


def _check_graph(
    nodes: Mapping[str, Node], units: Mapping[str, tuple[Mapping[str, Any], Path_]], errors: _Collector
) -> None:
    for node in nodes.values():
        path: Path_ = ("workflows", node.name)
        if node.uses not in units:
            errors.add(
                (*path, "uses"),
                f"node '{node.name}' uses '{node.uses}', which is not an application "
                f"unit here" + _suggest(node.uses, units),
            )
        for i, dep in enumerate(node.depend_on):
            if dep == node.name:
                errors.add((*path, "depend_on", i), f"node '{node.name}' depends on itself")
            elif dep not in nodes:
                errors.add(
                    (*path, "depend_on", i),
                    f"node '{node.name}' depends on '{dep}', which is not a node here" + _suggest(dep, nodes),
                )
    for cycle in _cycles(nodes):
        errors.add(
            ("workflows", cycle[0], "depend_on"), "dependency cycle: " + " -> ".join([*cycle, cycle[0]])
        )


def _cycles(nodes: Mapping[str, Node]) -> list[list[str]]:
    """Return one cycle per strongly connected component that has one (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    counter = 0

    def edges(n: str) -> list[str]:
        return [d for d in nodes[n].depend_on if d in nodes and d != n]

    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(edges(root)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(edges(w))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    cycles.append(_cycle_path(component, edges))
    return cycles


def _cycle_path(component: list[str], edges: Any) -> list[str]:
    members = set(component)
    start = min(component)
    path, seen, current = [start], {start}, start
    while True:
        nxt = min(d for d in edges(current) if d in members)
        if nxt in seen:
            return path[path.index(nxt) :]
        path.append(nxt)
        seen.add(nxt)
        current = nxt


# --------------------------------------------------------------------------------------------------
# Checks that depend on the scheduler or the machine
# --------------------------------------------------------------------------------------------------


def _runs_after(workflow: Workflow) -> dict[str, set[str]]:
    """Return, for every node, the nodes it reaches through foreground dependencies only: the nodes
    that have finished before it starts (a background dependency runs on beside its dependents)."""
    after: dict[str, set[str]] = {n: set() for n in workflow.nodes}
    for name in workflow.topological_order():
        for dep in workflow.nodes[name].depend_on:
            if not workflow.nodes[dep].background:
                after[name] |= {dep} | after[dep]
    return after


def concurrent_sets_max(workflow: Workflow, weight: Mapping[str, int]) -> tuple[int, list[str]]:
    """Return the largest total weight of nodes that can run at the same time, and those nodes.

    Two nodes cannot overlap when one reaches the other through foreground nodes only: a background
    node keeps running after its dependents start, so it overlaps with them. That relation is a
    partial order, so the answer is a maximum-weight antichain. By Dilworth's theorem applied to each
    node copied ``weight`` times it is the total weight minus a maximum flow from the earlier to the
    later copies; the nodes are read off the minimum cut (polynomial: one max-flow on 2n+2 vertices).
    """
    import networkx as nx  # imported here: only the partition check needs it

    names = [n for n in workflow.nodes if weight.get(n, 0) > 0]
    if not names:
        return 0, []
    after = _runs_after(workflow)
    graph = nx.DiGraph()
    for n in names:
        graph.add_edge("source", ("early", n), capacity=weight[n])
        graph.add_edge(("late", n), "sink", capacity=weight[n])
    for later in names:
        for earlier in after[later]:
            if weight.get(earlier, 0) > 0:
                graph.add_edge(("early", earlier), ("late", later))  # no capacity: unbounded
    flow, (reachable, _) = nx.minimum_cut(graph, "source", "sink")
    chosen = [n for n in names if ("early", n) in reachable and ("late", n) not in reachable]
    total = sum(weight[n] for n in chosen)
    assert total == sum(weight[n] for n in names) - flow, "min cut does not give a maximum antichain"
    return total, chosen


class ShareError(ValueError):
    """MPS shares that a static partition cannot honour (the message names the nodes)."""


def partition_share_plan(workflow: Workflow, gpu_nodes: Iterable[str]) -> dict[str, int]:
    """Return the SM share (percent) of every GPU node under a static partition (the one share policy:
    validation, the launch check and the partition scheduler all use it).

    A node's ``mps:`` share is used as given; nodes without one get the largest equal share that keeps
    every set of nodes that may run at the same time within 100 %. Raises ShareError naming the nodes
    when the shares cannot be honoured.
    """
    gpu = list(gpu_nodes)
    zero = sorted(n for n in gpu if workflow.unit_of(n).mps == 0)
    if zero:
        raise ShareError(
            f"node(s) {', '.join(zero)} have mps: 0, which gives a GPU process no SMs; "
            "give a share between 1 and 100 or leave mps out for an equal split"
        )
    explicit = {n: share for n in gpu if (share := workflow.unit_of(n).mps) is not None}
    absent = [n for n in gpu if n not in explicit]

    def peak(equal: int) -> tuple[int, list[str]]:
        weight = {n: explicit.get(n, equal if n in absent else 0) for n in workflow.nodes}
        return concurrent_sets_max(workflow, weight)

    total, chosen = peak(0)
    if total > 100:
        raise ShareError(
            f"the mps shares of nodes that run at the same time sum to {total} % (> 100 %): "
            f"{', '.join(sorted(chosen))}"
        )
    if not absent:
        return explicit
    if peak(1)[0] > 100:
        raise ShareError(
            f"no share is left for {', '.join(sorted(absent))} (no mps key): the nodes with an "
            "mps share that run at the same time already take 100 %; lower their shares"
        )
    # The peak grows with the equal share, so a binary search finds the largest share that fits.
    lo, hi = 1, 100
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if peak(mid)[0] <= 100:
            lo = mid
        else:
            hi = mid - 1
    return {**explicit, **dict.fromkeys(absent, lo)}


def partition_share_problems(workflow: Workflow) -> list[str]:
    """Return sentences for MPS shares that a static partition cannot honour (``partition_share_plan``
    over every node not pinned to the CPU); empty when they fit."""
    try:
        partition_share_plan(workflow, [n for n in workflow.nodes if workflow.unit_of(n).device != "cpu"])
    except ShareError as exc:
        return [f"under the partition scheduler {exc}"]
    return []


# --------------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------------


def unit_to_dict(app: Application) -> dict[str, Any]:
    """Return one unit in canonical native form (common keys, then the type's own keys)."""
    out: dict[str, Any] = {"type": app.type, "model": app.model}
    if app.client_model is not None:
        out["client_model"] = app.client_model
    out["num_requests"] = app.num_requests
    out["device"] = app.device
    if app.mps is not None:
        out["mps"] = app.mps
    out["priority"] = app.priority
    out["slo"] = [str(s) for s in app.slo]
    out["arrival"] = app.arrival.model_dump(exclude_none=True, exclude_defaults=False)
    out["warmup_requests"] = app.warmup_requests
    out["concurrency"] = app.concurrency
    for key in ("seed", "dataset"):
        if getattr(app, key) is not None:
            out[key] = getattr(app, key)
    out.update(app.options.model_dump(mode="json"))
    return out


def to_dict(workflow: Workflow) -> dict[str, Any]:
    """Return the canonical native-dialect mapping of a workflow (every default explicit)."""
    out: dict[str, Any] = {"name": workflow.name}
    if workflow.description:
        out["description"] = workflow.description
    out["scheduler"] = workflow.scheduler
    out["repeat"] = workflow.repeat
    out["seed"] = workflow.seed
    out["start_together"] = workflow.start_together
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
