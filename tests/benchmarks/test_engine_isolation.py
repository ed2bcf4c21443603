"""The engine never needs the web stack: every engine module imports with Django, Celery, DRF and the web
packages unimportable.

The checks run in a fresh interpreter because the web tests of the same pytest process load Django.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WEB_STACK = ("django", "celery", "rest_framework", "cbweb", "workers")


def block(forbidden: tuple[str, ...] = WEB_STACK) -> str:
    """Python code that makes the named top-level packages unimportable, as on an engine-only install."""
    return textwrap.dedent(
        f"""
        import importlib.abc, sys

        class _Forbid(importlib.abc.MetaPathFinder):
            def find_spec(self, fullname, path, target=None):
                if fullname.split(".")[0] in {forbidden!r}:
                    raise ImportError(f"the engine imported {{fullname}}, which it must never do")
                return None

        sys.meta_path.insert(0, _Forbid())
        """
    )


def run_without(code: str, forbidden: tuple[str, ...] = WEB_STACK) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter at the checkout root with ``forbidden`` unimportable."""
    return subprocess.run(
        [sys.executable, "-c", block(forbidden) + textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


# Imports every module of the given packages (subpackages included) and prints their names.
IMPORT_ALL = """
import importlib, pkgutil

imported = []
for name in {packages!r}:
    package = importlib.import_module(name)
    imported.append(name)
    for info in pkgutil.walk_packages(package.__path__, prefix=name + "."):
        importlib.import_module(info.name)
        imported.append(info.name)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {forbidden!r})
assert not loaded, f"web modules were loaded: {{loaded}}"
print("\\n".join(imported))
"""


def _import_all(
    packages: tuple[str, ...], forbidden: tuple[str, ...] = WEB_STACK
) -> subprocess.CompletedProcess[str]:
    return run_without(IMPORT_ALL.format(packages=packages, forbidden=forbidden), forbidden)


def test_every_engine_module_imports_without_the_web_stack() -> None:
    result = _import_all(("benchmarks", "cbkernels"))
    assert result.returncode == 0, result.stderr
    imported = set(result.stdout.split())
    # Every module file of the engine was imported, not just the package roots.
    expected = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for package in ("benchmarks", "cbkernels")
        for path in (ROOT / package).rglob("*.py")
    }
    assert expected <= imported, sorted(expected - imported)


def test_the_isolation_check_catches_a_web_import() -> None:
    # The same check fails for a package that imports the web stack: the block is real.
    result = _import_all(("workers",), forbidden=("django", "celery", "rest_framework", "cbweb"))
    assert result.returncode != 0
    assert "which it must never do" in result.stderr
