"""YAML text with line numbers: a bounded parse that remembers the line of every path.

PyYAML composes the document into nodes (with nesting bounded before Python's recursion limit); a
walker turns them into plain values, counting values against alias bombs (a value reached through an
alias or a merge key ``<<: *a`` counts each time it is reached) and recording the line of each key and
item, so that every later problem can name its line. ``Collector`` gathers the problems.

A document that cannot be read at all (not YAML, too deep, too many values) stops at its first
problem; a readable one with a flaw (a duplicate key, a merge of a non-mapping) is still turned into
values, and the flaw is returned beside them, so that the loader reports it with every other problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from benchmarks.spec.model import DEFAULT_LIMITS, Limits, Path_, SpecError, WorkflowValidationError


class Collector:
    """Accumulates errors, resolving each path to the line the YAML loader recorded for it."""

    def __init__(self, lines: Mapping[Path_, int] | None) -> None:
        self.lines = lines or {}
        self.errors: list[SpecError] = []

    def line_of(self, path: Path_) -> int | None:
        """Return the line recorded for ``path`` or for the nearest enclosing path (None if none)."""
        while True:
            if path in self.lines:
                return self.lines[path]
            if not path:
                return None
            path = path[:-1]

    def add(self, path: Path_, message: str) -> None:
        """Record a problem at ``path``."""
        self.errors.append(SpecError(path, self.line_of(path), message))


def kind_of(value: Any) -> str:
    """Return how a message names the kind of a value that has the wrong one (``a list``, ``empty``)."""
    if value is None:
        return "empty"
    return {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), f"a {type(value).__name__}"
    )


def over_limit(what: str, count: int, limit: int) -> str:
    """Return the sentence for an input over one of its limits."""
    return f"the workflow has {count} {what}, over the limit of {limit}"


class _YamlWalker:
    """Turns a composed YAML node tree into Python values, recording the line of every path."""

    def __init__(self, errors: Collector, limits: Limits = DEFAULT_LIMITS) -> None:
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
                self.errors.errors.append(SpecError(path, line, "mapping keys must be plain strings"))
                continue
            key = self.constructor.construct_object(key_node)
            if not isinstance(key, str):
                key = str(key)
            if key in out:
                self.errors.errors.append(SpecError((*path, key), line, f"duplicate key '{key}'"))
                continue
            self.lines[(*path, key)] = line
            out[key] = self.walk(value_node, (*path, key))
        for extra in merged:
            if not isinstance(extra, dict):
                line = node.start_mark.line + 1
                self.errors.errors.append(SpecError(path, line, "a YAML merge key '<<' needs a mapping"))
                continue
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


@dataclass(frozen=True)
class YamlDocument:
    """A parsed document: its value, the line of every path, and the flaws found while reading it."""

    value: Any
    lines: dict[Path_, int]
    problems: list[SpecError]


def parse_yaml_text(
    text: str, source: str | None = None, limits: Limits | None = None
) -> tuple[Any, dict[Path_, int]]:
    """Parse YAML text; return the value and a map from path to line. Raises WorkflowValidationError.

    ``limits`` (default: ``DEFAULT_LIMITS``) bounds the size, nesting and number of values. Any flaw
    (a duplicate key) is an error here; ``read_yaml_document`` returns the flaws instead.
    """
    document = read_yaml_document(text, source, limits)
    if document.problems:
        raise WorkflowValidationError(document.problems, source)
    return document.value, document.lines


def read_yaml_document(text: str, source: str | None = None, limits: Limits | None = None) -> YamlDocument:
    """Parse YAML text into a ``YamlDocument``; raise WorkflowValidationError only when it cannot be read.

    ``limits`` (default: ``DEFAULT_LIMITS``) bounds the size, nesting and number of values.
    """
    limits = limits or DEFAULT_LIMITS
    errors = Collector(None)
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
    return YamlDocument(value, walker.lines, errors.errors)
