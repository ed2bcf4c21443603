"""The canonical workflow model: pure types whose validators enforce every structural rule.

The bottom of the engine: this module imports nothing from ``benchmarks`` (the loaders, the
application and scheduler registries and the file policy all sit above it), so any layer may import
these types without loading the YAML machinery.

A ``Workflow`` cannot hold an invalid DAG: making one (``Workflow(...)``, ``Workflow.model_validate``,
``workflow.model_copy(update=...)``: see ``SpecModel``) checks that every ``uses`` names a unit,
every dependency a node other than itself (once), that the dependencies form no cycle, that every
name is an identifier and no two node names differ only in case. ``model_construct`` is
pydantic's explicit way to skip validation; nothing in the engine calls it on a ``Workflow``.
What depends on the registries (application types and their keys, scheduler names) or on the input
(limits, YAML lines) is checked by ``benchmarks.spec.load``.
"""

from __future__ import annotations

import difflib
import graphlib
import heapq
import json
import math
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

MAX_FILE_BYTES = 1024 * 1024
# Bounds the work of alias expansion ("billion laughs") and of hostile nesting.
MAX_YAML_NODES = 200_000
MAX_YAML_DEPTH = 64
# One report lists at most this many problems (the first by line) and says how many it left out: a
# unit merged from a mapping of 700 unknown keys into 60 units once printed 42,000 lines.
MAX_REPORTED_ERRORS = 100


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

# 16 TiB: beyond any device's memory, so a larger cap is a typo.
MAX_GPU_MEMORY_MB = 16 * 1024 * 1024
PRIORITIES = ("high", "medium", "low")
DEVICES = ("auto", "gpu", "cpu")
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


def suggest(word: str, choices: Iterable[str]) -> str:
    """Return `` (did you mean 'x'?)`` for the closest of ``choices`` to ``word``, or ``""``."""
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{match[0]}'?)" if match else ""


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
        ordered = sorted(errors, key=lambda e: (e.line if e.line is not None else 1 << 30, e.path))
        # ``errors`` holds the first MAX_REPORTED_ERRORS, then one entry that counts the rest.
        self.errors = ordered[:MAX_REPORTED_ERRORS]
        self.total = len(ordered)
        if self.total > MAX_REPORTED_ERRORS:
            more = self.total - MAX_REPORTED_ERRORS
            self.errors.append(
                SpecError((), None, f"... and {more} more problem(s) not listed; fix these first")
            )
        self.source = source
        head = f"{source}: " if source else ""
        lines = "\n".join(f"  {e}" for e in self.errors)
        super().__init__(f"{head}{self.total} problem(s) in the workflow:\n{lines}")

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


# --------------------------------------------------------------------------------------------------
# File-field markers (the policy that reads them is benchmarks.files)
# --------------------------------------------------------------------------------------------------

FileKind = Literal["data", "model"]

# Caps on what one read may bring into memory: text inputs (prompts, questions, traces, transcripts,
# documents) are small; an audio clip is decoded whole. Model files are loaded by their libraries
# (mapped, not read into memory by us), so they have no cap here.
TEXT_MAX_BYTES = 16 * 1024 * 1024
AUDIO_MAX_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class FileField:
    """Marks a spec field that names a file (or, with ``folder``, a folder whose files are read)."""

    kind: FileKind = "data"
    folder: bool = False
    max_bytes: int | None = TEXT_MAX_BYTES


DATA_FILE = FileField("data")
DATA_FILE_OR_FOLDER = FileField("data", folder=True)
AUDIO_FILE_OR_FOLDER = FileField("data", folder=True, max_bytes=AUDIO_MAX_BYTES)
MODEL = FileField("model", folder=True, max_bytes=None)


# --------------------------------------------------------------------------------------------------
# The base of the spec's types
# --------------------------------------------------------------------------------------------------


class SpecModel(BaseModel):
    """Base of the spec's types: frozen, unknown keys refused, and validated however a value is made.

    Pydantic validates on construction and ``model_validate`` but not in ``model_copy(update=...)``;
    here a copy with an update is validated like a new value. ``model_construct`` remains pydantic's
    explicit way around validation.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """Return a copy; with ``update`` the copy is validated (a ValidationError names the problem)."""
        copy = super().model_copy(update=update, deep=deep)
        if not update:
            return copy
        return self.model_validate({name: getattr(copy, name) for name in type(self).model_fields})


# --------------------------------------------------------------------------------------------------
# SLOs and arrival processes
# --------------------------------------------------------------------------------------------------


_SLO_RE = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|<)\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us)?\s*$"
)
_UNIT_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6, None: 1.0}


class SLO(SpecModel):
    """A latency objective on one metric: ``ttft<=1s`` means the request's TTFT is at most 1 s."""

    model_config = ConfigDict(allow_inf_nan=False)

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


# An open loop sends each request when it is due, whether or not the session's earlier ones have
# finished, up to this many of one session at once (``Arrival.max_in_flight``); a request due while the
# cap is reached waits, its latency counted from when it was due. Each one in flight is a thread of the
# application process holding a connection to the model server, hence the bound.
DEFAULT_MAX_IN_FLIGHT = 16
MAX_IN_FLIGHT = 64


class Arrival(SpecModel):
    """How requests arrive: a closed loop with think time, a fixed rate, Poisson, or a trace file."""

    model_config = ConfigDict(allow_inf_nan=False)

    kind: Literal["closed", "fixed", "poisson", "trace"] = "closed"
    think_time_s: float = Field(0.0, ge=0, le=86_400)
    rate: float | None = Field(None, gt=0, le=1_000_000, description="requests per second (fixed, poisson)")
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1)
    trace: Annotated[str | None, DATA_FILE] = Field(
        None, description="file with one arrival time (s) per line"
    )
    max_in_flight: int | None = Field(
        None,
        ge=1,
        le=MAX_IN_FLIGHT,
        description=f"open loops: most requests of one session in flight (default {DEFAULT_MAX_IN_FLIGHT})",
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
        if self.kind == "closed" and self.max_in_flight is not None:
            raise ValueError("'max_in_flight' applies only to the open loops (fixed, poisson, trace)")
        return self

    @property
    def in_flight_cap(self) -> int:
        """Return how many requests of one session may be in flight at once: 1 in a closed loop, else
        ``max_in_flight`` or its default."""
        if self.kind == "closed":
            return 1
        return self.max_in_flight or DEFAULT_MAX_IN_FLIGHT


# --------------------------------------------------------------------------------------------------
# Units, nodes, workflows
# --------------------------------------------------------------------------------------------------


class AppOptions(SpecModel):
    """Type-specific keys of an application unit (each type subclasses it); unknown keys are errors."""


class Application(SpecModel):
    """One application unit: its type, model, request count, placement, SLOs and options.

    ``type`` is the canonical name of a registered application type (``benchmarks.apps.app_type``
    returns its declaration); the loader resolves aliases and checks the type's keys and SLO metrics.
    """

    model_config = ConfigDict(allow_inf_nan=False)

    name: str = Field(pattern=UNIT_LABEL_PATTERN, max_length=NAME_MAX_CHARS)
    type: str
    model: Annotated[str | None, MODEL] = None
    client_model: str | None = None
    # The unit of the model server this unit's requests go to (``LLMServer``), instead of a model of
    # its own: the nodes that use it depend on the node that runs the server (``server_edges``).
    server: str | None = Field(None, max_length=NAME_MAX_CHARS)
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
    gpu_memory_limit_mb: int | None = Field(
        None,
        ge=1,
        le=MAX_GPU_MEMORY_MB,
        description="device-memory cap of this unit's process in MiB (enforced by the MPS schedulers)",
    )
    options: AppOptions


class Node(SpecModel):
    """One node of the DAG: an instance of a unit, with its dependencies."""

    name: str = Field(pattern=NAME_PATTERN, max_length=NAME_MAX_CHARS)
    uses: str
    depend_on: tuple[str, ...] = ()
    background: StrictBool = False


def dag_problems(units: Collection[str], nodes: Mapping[str, Node]) -> list[tuple[Path_, str]]:
    """Return every structural problem of a DAG as ``(path, sentence)`` pairs, paths under ``workflows``.

    The one home of the DAG rules: ``Workflow`` validates with it and the loader reports its
    problems at their YAML lines. Checked: ``uses`` names one of ``units``; each dependency names
    another node, once; the dependencies form no cycle (one cycle reported per knot, each node named);
    node names are identifiers that do not differ only in case (they name files in the result bundle).
    """
    problems: list[tuple[Path_, str]] = []
    folded: dict[str, str] = {}
    for node in nodes.values():
        path: Path_ = ("workflows", node.name)
        if name_problem(node.name, "node") is None:
            first = folded.setdefault(node.name.lower(), node.name)
            if first != node.name:
                problems.append(
                    (
                        path,
                        f"node names '{first}' and '{node.name}' differ only in case; they would share "
                        "a file in the result bundle on a case-insensitive disk",
                    )
                )
        if node.uses not in units:
            problems.append(
                (
                    (*path, "uses"),
                    f"node '{node.name}' uses '{node.uses}', which is not an application "
                    f"unit here" + suggest(node.uses, units),
                )
            )
        seen: set[str] = set()
        for i, dep in enumerate(node.depend_on):
            if dep == node.name:
                problems.append(((*path, "depend_on", i), f"node '{node.name}' depends on itself"))
            elif dep not in nodes:
                problems.append(
                    (
                        (*path, "depend_on", i),
                        f"node '{node.name}' depends on '{dep}', which is not a node here"
                        + suggest(dep, nodes),
                    )
                )
            elif dep in seen:
                problems.append(((*path, "depend_on", i), f"node '{node.name}' depends on '{dep}' twice"))
            seen.add(dep)
    for cycle in dependency_cycles(nodes):
        problems.append(
            (("workflows", cycle[0], "depend_on"), "dependency cycle: " + " -> ".join([*cycle, cycle[0]]))
        )
    return problems


def dependency_cycles(nodes: Mapping[str, Node]) -> list[list[str]]:
    """Return dependency cycles (each a list of node names, a node depending on the one after it).

    Found with ``graphlib``: each CycleError names one cycle, whose nodes are then set aside and the
    search goes on, so every knot of the graph is reported. Self-dependencies and unknown nodes are
    left to ``dag_problems``. Each cycle starts at its node defined first.
    """
    order = {name: i for i, name in enumerate(nodes)}
    graph = {n: [d for d in node.depend_on if d in nodes and d != n] for n, node in nodes.items()}
    cycles: list[list[str]] = []
    while True:
        try:
            graphlib.TopologicalSorter(graph).prepare()
        except graphlib.CycleError as exc:
            # graphlib lists a cycle as [a, b, ..., a], each node a dependency of the one after it.
            cycle: list[str] = list(reversed(exc.args[1]))[:-1]
            start = min(range(len(cycle)), key=lambda i: order[cycle[i]])
            cycles.append(cycle[start:] + cycle[:start])
            out = set(cycle)
            graph = {n: [d for d in deps if d not in out] for n, deps in graph.items() if n not in out}
            continue
        return cycles


def server_edges(
    applications: Mapping[str, Application], nodes: Mapping[str, Node]
) -> dict[str, tuple[str, ...]]:
    """Return, for each node whose unit names a ``server``, the nodes that run that server unit.

    A client node depends on its server's node as on a ``depend_on`` of a background node: it starts
    once the server is up (loaded and answering), and fails with it (docs/workflow-format.md).
    """
    runs: dict[str, list[str]] = {}
    for node in nodes.values():
        runs.setdefault(node.uses, []).append(node.name)
    out: dict[str, tuple[str, ...]] = {}
    for node in nodes.values():
        unit = applications.get(node.uses)
        if unit is not None and unit.server is not None and runs.get(unit.server):
            out[node.name] = tuple(runs[unit.server])
    return out


def server_clients(
    applications: Mapping[str, Application], nodes: Mapping[str, Node]
) -> dict[str, tuple[str, ...]]:
    """Return, for each node that runs a model server some unit names, the client nodes it serves
    (``server_edges`` the other way round), in node order."""
    out: dict[str, list[str]] = {}
    for client, servers in server_edges(applications, nodes).items():
        for server in servers:
            out.setdefault(server, []).append(client)
    return {server: tuple(clients) for server, clients in out.items()}


def server_problems(
    applications: Mapping[str, Application], nodes: Mapping[str, Node]
) -> list[tuple[Path_, str]]:
    """Return the structural problems of model servers as ``(path, sentence)`` pairs.

    Checked: a unit's ``server`` names another unit here; a server unit that clients name is run by
    exactly one node, a background one (it serves until the foreground ends); no cycle runs through a
    client and its server. Whether the named unit is a server type is the loader's check (it knows
    the application types).
    """
    problems: list[tuple[Path_, str]] = []
    runs: dict[str, list[str]] = {}
    for node in nodes.values():
        runs.setdefault(node.uses, []).append(node.name)
    for unit in applications.values():
        server = unit.server
        if server is None:
            continue
        at: Path_ = (unit.name, "server")
        if server == unit.name:
            problems.append((at, f"unit '{unit.name}' names itself as its server"))
        elif server not in applications:
            problems.append(
                (
                    at,
                    f"unit '{unit.name}' names server '{server}', which is not a unit here"
                    + suggest(server, applications),
                )
            )
        elif not runs.get(server):
            problems.append(
                (
                    at,
                    f"unit '{unit.name}' names server '{server}', but no node runs '{server}' "
                    "(add one with background: true)",
                )
            )
        elif len(runs[server]) > 1:
            problems.append(
                (
                    at,
                    f"unit '{unit.name}' names server '{server}', which nodes {', '.join(runs[server])} "
                    "all run; a server unit needs exactly one node",
                )
            )
    named = {u.server for u in applications.values() if u.server is not None}
    for node in nodes.values():
        if node.uses in named and not node.background:
            problems.append(
                (
                    ("workflows", node.name, "background"),
                    f"node '{node.name}' runs server '{node.uses}', which serves until the foreground "
                    "ends: it needs background: true",
                )
            )
    edges = server_edges(applications, nodes)
    if edges:
        known = {tuple(c) for c in dependency_cycles(nodes)}
        joined = {
            n: Node.model_construct(
                name=n,
                uses=node.uses,
                depend_on=(*node.depend_on, *edges.get(n, ())),
                background=node.background,
            )
            for n, node in nodes.items()
        }
        for cycle in dependency_cycles(joined):
            if tuple(cycle) not in known:
                problems.append(
                    (
                        ("workflows", cycle[0]),
                        "dependency cycle through a model server: " + " -> ".join([*cycle, cycle[0]]),
                    )
                )
    return problems


WEIGHTS = ("real", "random")


class Workflow(SpecModel):
    """A validated workflow: units, DAG nodes, default scheduler and its parameters, repetitions, seed.

    Constructing one checks every structural rule (``dag_problems``, each unit and node under its own
    name, at least one of each); so do ``model_validate`` and ``model_copy(update=...)``.
    """

    name: str
    description: str = ""
    scheduler: str = "greedy"
    # The scheduler's parameters as written (``scheduler: {name: credit, pressure_threshold: 0.4}``);
    # the loader checks them against the scheduler's own ``Params`` model.
    scheduler_params: dict[str, str | bool | int | float | None] = Field(default_factory=dict)
    repeat: int = Field(1, ge=1, le=1000)
    seed: int = Field(0, ge=-(2**63), le=2**63 - 1)
    # Nodes that start at the same point of the DAG begin their requests together, once every one of
    # them has loaded, instead of each as soon as its own model is loaded.
    start_together: bool = False
    # ``random``: every model whose architecture the name tells runs as its random twin (the loader
    # rewrites ``model:`` to ``NAME@random``; docs/models.md), for timing studies without the weights.
    weights: Literal["real", "random"] = "real"
    applications: dict[str, Application]
    nodes: dict[str, Node]

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if not name.strip():
            raise ValueError("must not be empty")
        return name

    @model_validator(mode="after")
    def _check_structure(self) -> Workflow:
        problems: list[str] = []
        if not self.applications:
            problems.append("the workflow defines no application units")
        if not self.nodes:
            problems.append("'workflows' defines no nodes")
        problems += [
            f"unit '{key}' holds a unit named '{app.name}'"
            for key, app in self.applications.items()
            if key != app.name
        ]
        problems += [
            f"node '{key}' holds a node named '{node.name}'"
            for key, node in self.nodes.items()
            if key != node.name
        ]
        problems += [
            f"{format_path(path)}: {message}" for path, message in dag_problems(self.applications, self.nodes)
        ]
        if not problems:
            problems += [
                f"{format_path(path)}: {message}"
                for path, message in server_problems(self.applications, self.nodes)
            ]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def unit_of(self, node: str) -> Application:
        """Return the application unit a node uses."""
        return self.applications[self.nodes[node].uses]

    def dependencies(self, node: str) -> tuple[str, ...]:
        """Return the nodes a node waits for: its ``depend_on``, then the node of its unit's server."""
        return self._dependencies(server_edges(self.applications, self.nodes), node)

    def _dependencies(self, edges: Mapping[str, tuple[str, ...]], node: str) -> tuple[str, ...]:
        own = self.nodes[node].depend_on
        return (*own, *(n for n in edges.get(node, ()) if n not in own))

    def topological_order(self) -> list[str]:
        """Return node names so that every node comes after its dependencies (model servers included).

        Stable: among the nodes whose dependencies are met, the one defined first comes first.
        """
        index = {name: i for i, name in enumerate(self.nodes)}
        edges = server_edges(self.applications, self.nodes)
        sorter = graphlib.TopologicalSorter({n: self._dependencies(edges, n) for n in self.nodes})
        sorter.prepare()  # cannot raise CycleError: a Workflow has no cycle
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


def requests_per_run(workflow: Workflow) -> dict[str, int]:
    """Return the requests each node issues in one run: (warmup_requests + num_requests) x concurrency."""
    out = {}
    for name in workflow.nodes:
        unit = workflow.unit_of(name)
        out[name] = (unit.warmup_requests + unit.num_requests) * unit.concurrency
    return out
