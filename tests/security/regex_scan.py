"""Every regular expression the product applies, timed on inputs built to make it backtrack.

Run as a script (``python tests/security/regex_scan.py``) in a process of its own, so that a pattern
whose time explodes cannot hang the test that starts it: the test kills it after its budget and names
the pattern it was on. Prints one JSON line per finding and ``checking <where>`` before each pattern.

The patterns are found, not listed:
- every ``re.compile/match/search/fullmatch/sub/subn/split/findall/finditer`` call in the source of
  ``benchmarks``, ``cbkernels``, ``cbweb`` and ``workers`` whose pattern argument can be evaluated in its
  module's namespace (a literal, a module constant, an f-string of constants);
- every compiled pattern held at module level or in a module-level list or tuple (``_TWIN_PATTERNS``);
- every URL pattern of the web application.
A call whose pattern cannot be evaluated that way (built from a local variable) is reported as
``unresolved``, and the test fails on it: a new pattern must be reachable by this scan.

The timing: each attack string is a run of one character or of a pair of characters taken from the
pattern's own literals and a few that matter to text formats (quotes, backslashes, separators),
``SHORT`` and ``LONG`` characters long (a URL pattern: up to the longest path the request guard
passes, ``CB_MAX_PATH_CHARS``, and an eighth of it). ``findall`` tries a match from every position,
the work of ``search``, ``sub`` and ``split`` at their worst. A linear pattern costs about
``LONG / SHORT`` times more on the long string; one that backtracks over the whole rest of the
input from each position costs the square of that. A finding is a pattern whose long string took
over ``MIN_SLOW_S`` and over ``MAX_RATIO`` times its short string (best of three each, so a loaded
machine does not make one).
Patterns are compiled where they are defined: a call that compiles a pattern from a local variable
(a loop over a list of strings) is ``unresolved``; keep the list compiled at module level instead.
"""

from __future__ import annotations

import ast
import importlib
import itertools
import json
import os
import pkgutil
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("benchmarks", "cbkernels", "cbweb", "workers")
RE_FUNCTIONS = {"compile", "match", "search", "fullmatch", "sub", "subn", "split", "findall", "finditer"}
# Modules that start services when imported (the WSGI entry point starts the local executor).
ENTRY_POINTS = {"cbweb.wsgi", "cbweb.asgi"}
SHORT, LONG = 1_000, 8_000
MAX_RATIO = 24.0  # linear: 8; quadratic: 64
MIN_SLOW_S = 0.02
GENERIC = "a0 _-./:\\\"'\n\t{[é"


def module_names() -> Iterator[str]:
    for package in PACKAGES:
        yield package
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
            if info.name not in ENTRY_POINTS:
                yield info.name


def source_calls(module: str) -> Iterator[tuple[str, ast.expr, ast.Call]]:
    """Yield (where, pattern expression, call) for each ``re.X(pattern, ...)`` call in a module's file."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.func.attr in RE_FUNCTIONS
            and node.args
        ):
            yield f"{module}:{node.lineno}", node.args[0], node


# Where each function takes its flags when they are passed by position.
FLAGS_POSITION = {"compile": 1, "split": 3, "sub": 4, "subn": 4}


def flags_of(call: ast.Call, namespace: dict[str, Any]) -> int:
    """Return the flags a ``re.X(...)`` call passes (0 when none), evaluated in its module."""
    assert isinstance(call.func, ast.Attribute)
    given = [k.value for k in call.keywords if k.arg == "flags"]
    position = FLAGS_POSITION.get(call.func.attr, 2)
    given += call.args[position : position + 1]
    return int(eval(compile(ast.Expression(given[0]), "<flags>", "eval"), namespace)) if given else 0


def patterns() -> tuple[list[tuple[str, re.Pattern[Any]]], list[str]]:
    """Return ([(where, compiled pattern)], [where of each call whose pattern could not be evaluated])."""
    found: dict[tuple[Any, int], str] = {}
    unresolved: list[str] = []
    for name in module_names():
        module = importlib.import_module(name)
        namespace = vars(module)
        for attr, value in namespace.items():
            candidates = value if isinstance(value, list | tuple) else [value]
            for i, item in enumerate(candidates):
                item = item[0] if isinstance(item, tuple) and item else item
                if isinstance(item, re.Pattern):
                    found.setdefault((item.pattern, item.flags), f"{name}.{attr}[{i}]")
        for where, expr, call in source_calls(name):
            try:
                value = eval(compile(ast.Expression(expr), "<pattern>", "eval"), namespace)
                flags = flags_of(call, namespace)
            except Exception:
                unresolved.append(where)
                continue
            if isinstance(value, re.Pattern):
                value, flags = value.pattern, value.flags
            found.setdefault((value, flags), where)
    found.update({(p.pattern, p.flags): w for w, p in url_patterns()})
    return [(where, re.compile(p, f)) for (p, f), where in found.items()], unresolved


def url_patterns() -> list[tuple[str, re.Pattern[str]]]:
    from django.urls import URLPattern, URLResolver, get_resolver

    out: list[tuple[str, re.Pattern[str]]] = []
    stack: list[Any] = list(get_resolver().url_patterns)
    while stack:
        entry = stack.pop()
        out.append((f"url {entry.pattern}", entry.pattern.regex))
        if isinstance(entry, URLResolver):
            stack.extend(entry.url_patterns)
        assert isinstance(entry, URLPattern | URLResolver)
    return out


def attacks(pattern: re.Pattern[Any], length: int) -> Iterator[tuple[str, Any]]:
    text = pattern.pattern if isinstance(pattern.pattern, str) else pattern.pattern.decode("latin-1")
    literals = {c for c in text if not c.isalnum()} | set(GENERIC) | {c for c in text if c.isalnum()}
    alphabet = sorted(literals)[:24]
    for a, b in itertools.chain(((c, "") for c in alphabet), itertools.permutations(alphabet, 2)):
        unit = a + b
        value = (unit * (length // len(unit) + 1))[:length] + "\x00"
        if isinstance(pattern.pattern, bytes):
            yield repr(unit), value.encode("utf-8")
        else:
            yield repr(unit), value


def timed(pattern: re.Pattern[Any], value: Any, repeats: int = 1) -> float:
    """Return the least time of ``repeats`` runs of ``findall`` over ``value``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        pattern.findall(value)
        times.append(time.perf_counter() - start)
    return min(times)


def scan() -> int:
    from django.conf import settings

    compiled, unresolved = patterns()
    for where in unresolved:
        print(json.dumps({"unresolved": where}), flush=True)
    for where, pattern in compiled:
        print(f"checking {where} {pattern.pattern!r}", flush=True)
        # A URL pattern sees at most the path the request guard lets through.
        long = int(settings.CB_MAX_PATH_CHARS) if where.startswith("url ") else LONG
        short = long // (LONG // SHORT)
        long_inputs = dict(attacks(pattern, long))
        for unit, short_input in attacks(pattern, short):
            if timed(pattern, long_inputs[unit]) < MIN_SLOW_S:
                continue
            slow = timed(pattern, long_inputs[unit], 3)
            ratio = slow / max(timed(pattern, short_input, 3), 1e-9)
            if slow >= MIN_SLOW_S and ratio > MAX_RATIO:
                finding = {"where": where, "pattern": str(pattern.pattern), "input": unit, "seconds": slow}
                print(json.dumps({**finding, "ratio": ratio}), flush=True)
    print(json.dumps({"patterns": len(compiled)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbweb.settings")
    import django

    django.setup()
    sys.exit(scan())
