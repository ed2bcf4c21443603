"""The sweep file: base workflows, load levels as overrides, schedulers, repeats, search, budget.

A sweep file is YAML read with the workflow loader's parser (``benchmarks.spec.yaml_text.read_yaml_document``:
same size and nesting bounds, same line tracking), checked by the pydantic models below, and then
against its workflows: every level is applied to every workflow and the result must be a valid
workflow, so a bad override is reported at load time with the level's line, not mid-sweep.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from benchmarks.schedulers import SCHEDULERS, SchedulerParamError, scheduler_params
from benchmarks.spec.export import to_dict
from benchmarks.spec.load import from_dict, load_file
from benchmarks.spec.model import NAME_MAX_CHARS, NAME_PATTERN, Path_, SpecError, WorkflowValidationError
from benchmarks.spec.yaml_text import read_yaml_document

# Bounds on what one file may ask for: a sweep is a plan of runs, each of them minutes long.
MAX_LEVELS = 50
MAX_REPEATS = 100
MAX_WORKFLOWS = 20
# The scheduler every solo run uses, whatever the sweep lists: an application alone has nobody to share
# with, and a baseline must not depend on the schedulers it is compared with (credit holds a lone
# application by its own pressure and its starvation guard, which greedy never does).
SOLO_SCHEDULER = "greedy"

# Node names a sweep file may list (solo:, kernel_trace:).
MAX_SOLO_NODES = 320
# A scheduler entry's own label: a name that may hold dots (credit-0.3).
LABEL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"

# Overrides by application type ("*": every unit) or by unit name: {type or unit: {key: value}}.
Overrides = dict[str, dict[str, Any]]


class SweepFileError(WorkflowValidationError):
    """Every problem found in a sweep file, each with its YAML path and line."""

    def __init__(self, errors: list[SpecError], source: str | None = None) -> None:
        super().__init__(errors, source)
        head = f"{source}: " if source else ""
        lines = "\n".join(f"  {e}" for e in self.errors)
        self.args = (f"{head}{self.total} problem(s) in the sweep file:\n{lines}",)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Level(_Model):
    """One load level: a name, what it means in words, and the overrides that make it."""

    name: str = Field(pattern=NAME_PATTERN, max_length=NAME_MAX_CHARS)
    load: str = Field("", max_length=200, description="the level in words, shown in the tables")
    types: Overrides = Field(default_factory=dict, description="by application type; '*': every unit")
    units: Overrides = Field(default_factory=dict, description="by unit name, applied after types")


def _unique_levels(levels: list[Level]) -> list[Level]:
    names = [lv.name for lv in levels]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"level names must be unique: {', '.join(dup)} repeated")
    return levels


class Smoke(_Model):
    """The ``--cpu-smoke`` profile: the same sweep on this CPU with tiny models and few requests."""

    levels: list[Level] = Field(min_length=1, max_length=MAX_LEVELS)
    types: Overrides = Field(default_factory=dict)
    units: Overrides = Field(default_factory=dict)
    audio_s: float | None = Field(
        None, gt=0, le=600, description="LiveCaptions units stream only the first S seconds of the clip"
    )
    run_limit_s: float = Field(90.0, gt=0)
    first_step_s: float = Field(20.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> Smoke:
        _unique_levels(self.levels)
        return self


class Search(_Model):
    """Break-level search: the first level where a scheduler's mean attainment falls below its threshold.

    The first scheduler of the sweep walks from the first level up (its break level is the *knee*, the
    level of the tables); every other scheduler walks from the knee, up while it meets its threshold and
    down while it does not.
    """

    workflow: str | None = Field(None, description="the workflow searched (default: the first)")
    threshold: float | dict[str, float] = Field(
        description="mean SLO attainment, 0-1; one number for all schedulers or one per scheduler"
    )

    @model_validator(mode="after")
    def _check(self) -> Search:
        values = self.threshold.values() if isinstance(self.threshold, dict) else [self.threshold]
        if any(not 0 < v <= 1 for v in values):
            raise ValueError("a threshold is a mean SLO attainment between 0 (excluded) and 1")
        return self


class SchedulerEntry(BaseModel):
    """One scheduler of the sweep with its parameters: ``{name: credit, pressure_threshold: 0.4}``; every
    key besides ``name`` and ``label`` is a parameter, checked against the scheduler's ``Params``."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str
    label: str | None = Field(
        None,
        pattern=LABEL_PATTERN,
        max_length=NAME_MAX_CHARS,
        description="default: name(non-default params)",
    )

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, data: Any) -> Any:
        """A bare name is the scheduler with its defaults."""
        return {"name": data} if isinstance(data, str) else data

    @property
    def params(self) -> dict[str, Any]:
        """The parameters as given (the keys besides ``name`` and ``label``)."""
        return dict(self.model_extra or {})

    @model_validator(mode="after")
    def _check(self) -> SchedulerEntry:
        if self.name not in SCHEDULERS:
            raise ValueError(f"unknown scheduler {self.name}; known: {', '.join(SCHEDULERS)}")
        try:
            scheduler_params(self.name, self.params)
        except SchedulerParamError as exc:
            raise ValueError("; ".join(f"{param}: {message}" for param, message in exc.problems)) from None
        return self

    @property
    def key(self) -> str:
        """The entry's label: its own, else the name with the parameters that differ from the defaults,
        e.g. ``credit(pressure_threshold=0.4)``."""
        if self.label is not None:
            return self.label
        given = scheduler_params(self.name, self.params)
        defaults = scheduler_params(self.name, {})
        changed = [
            f"{k}={getattr(given, k)}" for k in self.params if getattr(given, k) != getattr(defaults, k)
        ]
        return f"{self.name}({','.join(changed)})" if changed else self.name


class Output(_Model):
    """Where ``--summarize`` writes, relative to the sweep file (default: the state folder)."""

    json_: str | None = Field(None, alias="json")
    markdown: str | None = None


class SweepFile(_Model):
    """The whole sweep file (docs/sweeps.md)."""

    name: str = Field(pattern=NAME_PATTERN, max_length=NAME_MAX_CHARS)
    title: str = Field("", max_length=200)
    description: str = Field("", max_length=2000)
    workflows: dict[str, str] = Field(
        min_length=1, max_length=MAX_WORKFLOWS, description="name -> workflow file, relative to this file"
    )
    schedulers: list[SchedulerEntry] = Field(
        min_length=1, description="names, or {name, label, parameters}; the tables name each by its label"
    )
    levels: list[Level] = Field(min_length=1, max_length=MAX_LEVELS)
    repeats: int = Field(1, ge=1, le=MAX_REPEATS)
    repeat_groups: list[list[str]] | None = Field(
        None, description="order of runs 2..N: each group's schedulers, workflow by workflow"
    )
    share_requests: bool = Field(
        False, description="a level that raises a unit's concurrency splits its requests (rounded up)"
    )
    solo: bool | list[str] = Field(
        True,
        description="run each application alone at the table level(s); a list: only these nodes",
    )
    weights: Literal["real", "random"] | None = Field(
        None,
        description="random: every run uses the random twins of the models (docs/models.md); "
        "default: each workflow's own 'weights:'",
    )
    search: Search | None = None
    run_limit_s: float = Field(600.0, gt=0, description="one run past this is cut and recorded as failed")
    first_step_s: float = Field(60.0, gt=0, description="a step's cost before any was measured")
    kernel_trace: list[str] = Field(
        default_factory=list,
        max_length=MAX_SOLO_NODES,
        description="nodes whose GPU kernels every run that has them records (docs/monitor.md)",
    )
    smoke: Smoke | None = None
    output: Output = Output()

    @field_validator("solo")
    @classmethod
    def _few_solo_nodes(cls, value: bool | list[str]) -> bool | list[str]:
        if isinstance(value, list) and len(value) > MAX_SOLO_NODES:
            raise ValueError(f"at most {MAX_SOLO_NODES} node names")
        return value

    @model_validator(mode="after")
    def _check(self) -> SweepFile:
        _unique_levels(self.levels)
        for name in self.workflows:
            if not _is_name(name):
                raise ValueError(f"workflow name '{name}' must be an identifier (letters, digits, _ and -)")
        labels = self.labels
        if len(set(labels)) != len(labels):
            repeated = sorted({n for n in labels if labels.count(n) > 1})
            raise ValueError(
                f"schedulers must be listed once each (by label): {', '.join(repeated)} repeated"
            )
        if self.repeat_groups is not None:
            grouped = [s for group in self.repeat_groups for s in group]
            if sorted(grouped) != sorted(labels):
                raise ValueError(
                    "repeat_groups must list every scheduler of the sweep exactly once (by label)"
                )
        if self.search is not None:
            if self.search.workflow is not None and self.search.workflow not in self.workflows:
                raise ValueError(f"search.workflow '{self.search.workflow}' is not one of the workflows")
            if isinstance(self.search.threshold, dict) and set(self.search.threshold) != set(labels):
                raise ValueError("search.threshold must give one threshold for each scheduler of the sweep")
        return self

    @property
    def labels(self) -> list[str]:
        """The schedulers' labels, in the file's order: the names of steps, state entries and tables."""
        return [s.key for s in self.schedulers]


def _is_name(name: str) -> bool:
    return bool(re.fullmatch(NAME_PATTERN, name)) and len(name) <= NAME_MAX_CHARS


def _line_of(lines: Mapping[Path_, int], path: Path_) -> int | None:
    """Return the line of ``path``, or of its nearest parent that has one."""
    while path not in lines and path:
        path = path[:-1]
    return lines.get(path)


def _model_errors(exc: ValidationError, lines: Mapping[Path_, int]) -> list[SpecError]:
    out = []
    for err in exc.errors():
        loc: Path_ = tuple(p for p in err["loc"] if isinstance(p, str | int))
        # pydantic names the branch of a union (float | dict) it tried; the file's path is what users see.
        loc = tuple(p for p in loc if p not in ("float", "dict[str,float]", "bool", "list[str]"))
        message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        message = message.removeprefix("Value error, ")
        out.append(SpecError(loc, _line_of(lines, loc), message))
    return out


class Sweep:
    """A loaded sweep: its file, its base workflows (canonical dicts) and the profile it runs in."""

    def __init__(
        self, spec: SweepFile, path: Path, workflows: dict[str, dict[str, Any]], smoke: bool
    ) -> None:
        self.spec = spec
        self.path = path
        self.base = workflows
        self.smoke = smoke

    @property
    def levels(self) -> list[Level]:
        """The load levels of this profile, lowest first."""
        return self.spec.smoke.levels if self.smoke and self.spec.smoke else self.spec.levels

    @property
    def schedulers(self) -> list[str]:
        """The schedulers' labels, in the file's order (the first one walks from the lowest level)."""
        return self.spec.labels

    def scheduler(self, label: str) -> tuple[str, dict[str, Any]]:
        """Return the registered name and the parameters of the scheduler with this label (the solo
        runs' ``SOLO_SCHEDULER`` too, listed or not)."""
        entry = next((s for s in self.spec.schedulers if s.key == label), None)
        if entry is None and label == SOLO_SCHEDULER:
            return SOLO_SCHEDULER, {}
        if entry is None:
            raise KeyError(f"no scheduler labelled '{label}' in the sweep")
        return entry.name, entry.params

    def solo_nodes(self, workflow: str) -> list[str]:
        """Return the nodes of a workflow that run alone at the table level(s) (``solo:``), in its order."""
        solo = self.spec.solo
        nodes = list(self.base[workflow]["workflows"])
        return [n for n in nodes if n in solo] if isinstance(solo, list) else nodes if solo else []

    @property
    def run_limit_s(self) -> float:
        """Seconds after which one run is cut and recorded as failed."""
        return self.spec.smoke.run_limit_s if self.smoke and self.spec.smoke else self.spec.run_limit_s

    @property
    def first_step_s(self) -> float:
        """A step's expected cost before any step of this sweep was measured."""
        return self.spec.smoke.first_step_s if self.smoke and self.spec.smoke else self.spec.first_step_s

    @property
    def search_workflow(self) -> str:
        """The workflow whose levels the break-level search walks (the first workflow by default)."""
        search = self.spec.search
        return (search.workflow if search else None) or next(iter(self.spec.workflows))

    def threshold(self, scheduler: str) -> float:
        """Return a scheduler's attainment threshold (the search must be set)."""
        assert self.spec.search is not None
        given = self.spec.search.threshold
        return given[scheduler] if isinstance(given, dict) else given

    def summary_paths(self, state_dir: Path) -> tuple[Path, Path]:
        """Return where ``--summarize`` writes the JSON and the Markdown: the file's ``output:`` (relative
        to the sweep file), else the state folder; always the state folder in the smoke profile, so a
        smoke run never overwrites the published files."""
        output = self.spec.output
        default = (state_dir / f"{self.spec.name}.json", state_dir / f"{self.spec.name}.md")
        if self.smoke:
            return default
        here = self.path.parent
        return (
            Path(os.path.normpath(here / output.json_)) if output.json_ else default[0],
            Path(os.path.normpath(here / output.markdown)) if output.markdown else default[1],
        )

    def level(self, name: str) -> Level:
        """Return a level of this profile by name."""
        return next(lv for lv in self.levels if lv.name == name)

    def index(self, name: str) -> int:
        """Return a level's position, 0 for the lowest."""
        return [lv.name for lv in self.levels].index(name)

    def workflow_dict(self, name: str, level: Level, audio: str | None = None) -> dict[str, Any]:
        """Return the canonical dict of a workflow at a level (the smoke overrides first in that profile;
        ``audio`` replaces the LiveCaptions units' audio)."""
        data = self.base[name]
        if self.smoke and self.spec.smoke is not None:
            data = apply_overrides(data, self.spec.smoke.types, self.spec.smoke.units)
            if audio is not None:
                for unit in units_of(data).values():
                    if unit["type"] == "LiveCaptions":
                        # The original format's key for the audio is replaced too (one audio key).
                        unit.pop("client_command_file", None)
                        unit["audio"] = audio
        out = apply_overrides(data, level.types, level.units)
        if self.spec.share_requests:
            # More sessions share the unit's requests (ceil): a level adds concurrent users, not work.
            for unit_name, unit in units_of(out).items():
                given = {**level.types.get("*", {}), **level.types.get(unit["type"], {})}
                given |= level.units.get(unit_name, {})
                sessions, requests = unit.get("concurrency", 1), units_of(data)[unit_name].get("num_requests")
                # Values of another type are left to the workflow's own validation, which names them.
                if (
                    isinstance(sessions, int)
                    and isinstance(requests, int)
                    and sessions > 1
                    and "num_requests" not in given
                ):
                    unit["num_requests"] = -(-requests // sessions)
        if self.spec.weights is not None:
            out["weights"] = self.spec.weights
        return out


def units_of(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Return the application units of a canonical workflow dict, by name."""
    return {k: v for k, v in data.items() if isinstance(v, dict) and "type" in v}


def apply_overrides(data: Mapping[str, Any], types: Overrides, units: Overrides) -> dict[str, Any]:
    """Return a copy of a canonical workflow dict with overrides applied: '*', then the unit's type,
    then the unit's own name."""
    out = copy.deepcopy(dict(data))
    for name, unit in units_of(out).items():
        for given in (types.get("*", {}), types.get(unit["type"], {}), units.get(name, {})):
            for key, value in given.items():
                unit[key] = copy.deepcopy(value)
    return out


def only_node(data: Mapping[str, Any], node: str) -> dict[str, Any]:
    """Return a copy of a workflow dict holding one node (without its dependencies) and its unit."""
    out = copy.deepcopy(dict(data))
    spec = out["workflows"][node]
    for name in list(units_of(out)):
        if name != spec["uses"]:
            del out[name]
    out["workflows"] = {node: {"uses": spec["uses"]}}
    out["name"] = f"{data['name']}-solo-{node}"
    return out


def load_sweep(path: str | Path, smoke: bool = False) -> Sweep:
    """Load and check a sweep file and its workflows; raise SweepFileError with every problem found.

    Workflow paths are relative to the sweep file. With ``smoke``, the file must have a ``smoke:``
    profile, and its levels are checked as well.
    """
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SweepFileError([SpecError((), None, "the file is not UTF-8 text")], source) from None
    except OSError as exc:
        raise SweepFileError([SpecError((), None, f"cannot read the file: {exc.strerror}")], source) from None
    try:
        document = read_yaml_document(text, source)
    except WorkflowValidationError as exc:
        raise SweepFileError(exc.errors, source) from None
    lines = document.lines
    # A flaw of the text (a duplicate key) is reported with the file's other problems, not alone.
    errors: list[SpecError] = list(document.problems)
    try:
        spec = SweepFile.model_validate(document.value)
    except ValidationError as exc:
        raise SweepFileError(errors + _model_errors(exc, lines), source) from None
    workflows: dict[str, dict[str, Any]] = {}
    for name, file in spec.workflows.items():
        where: Path_ = ("workflows", name)
        try:
            workflows[name] = to_dict(load_file(path.parent / file))
        except WorkflowValidationError as exc:
            problems = "; ".join(str(e) for e in exc.errors)
            errors.append(SpecError(where, _line_of(lines, where), f"workflow '{file}': {problems}"))
    if smoke and spec.smoke is None:
        errors.append(SpecError((), None, "--cpu-smoke needs a 'smoke:' profile in the sweep file"))
    if errors:
        raise SweepFileError(errors, source)
    sweep = Sweep(spec, path, workflows, smoke)
    nodes = {n for name, data in workflows.items() for n in from_dict(data, name=name).nodes}
    named = [("solo", spec.solo if isinstance(spec.solo, list) else []), ("kernel_trace", spec.kernel_trace)]
    for key, names in named:
        for i, node in enumerate(names):
            if node not in nodes:
                loc: Path_ = (key, i)
                errors.append(SpecError(loc, _line_of(lines, loc), f"no workflow has a node '{node}'"))
    errors += _check_levels(sweep, lines)
    if spec.smoke is not None:
        errors += _check_levels(Sweep(spec, path, workflows, True), lines)
    if errors:
        raise SweepFileError(errors, source)
    return sweep


def _check_levels(sweep: Sweep, lines: Mapping[Path_, int]) -> list[SpecError]:
    """Return the problems of applying each level to each workflow (unknown types, units or keys)."""
    root: Path_ = ("smoke",) if sweep.smoke else ()
    errors: list[SpecError] = []
    all_types = {u["type"] for data in sweep.base.values() for u in units_of(data).values()} | {"*"}
    all_units = {n for data in sweep.base.values() for n in units_of(data)}
    scopes: list[tuple[Path_, Overrides, Overrides]] = [
        ((*root, "levels", i), lv.types, lv.units) for i, lv in enumerate(sweep.levels)
    ]
    if sweep.smoke and sweep.spec.smoke is not None:
        scopes.append((root, sweep.spec.smoke.types, sweep.spec.smoke.units))
    for where, types, units in scopes:
        for key, known, what in ((("types"), all_types, "application type"), ("units", all_units, "unit")):
            for name in types if key == "types" else units:
                if name not in known:
                    loc = (*where, key, name)
                    errors.append(SpecError(loc, _line_of(lines, loc), f"no workflow has a {what} '{name}'"))
    if errors:
        return errors
    for i, level in enumerate(sweep.levels):
        where = (*root, "levels", i)
        for name in sweep.base:
            try:
                from_dict(sweep.workflow_dict(name, level), name=name)
            except WorkflowValidationError as exc:
                for e in exc.errors:
                    loc = _override_loc(where, level, sweep.base[name], e.loc)
                    message = f"level '{level.name}' on workflow '{name}': {e.path or '<top>'}: {e.message}"
                    errors.append(SpecError(loc, _line_of(lines, loc), message))
    return errors


def _override_loc(where: Path_, level: Level, base: Mapping[str, Any], loc: Path_) -> Path_:
    """Return the sweep file path of the override behind a workflow error at ``loc`` (``unit.key...``):
    the level's unit override, else its type override, else the level itself."""
    if len(loc) < 2 or not isinstance(loc[0], str) or loc[0] not in units_of(base):
        return where
    unit, key = loc[0], loc[1]
    kind = units_of(base)[unit]["type"]
    if key in level.units.get(unit, {}):
        return (*where, "units", unit, key)
    for scope in (kind, "*"):
        if key in level.types.get(scope, {}):
            return (*where, "types", scope, key)
    return where
