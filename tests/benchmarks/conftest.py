"""Engine tests run with the web stack unimportable, proving the engine never needs it."""

from __future__ import annotations

import importlib.abc
import sys

FORBIDDEN = ("django", "celery", "rest_framework", "cbweb", "workers")


class _Forbid(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname.split(".")[0] in FORBIDDEN:
            raise ImportError(f"the engine imported {fullname}, which it must never do")
        return None


def pytest_configure() -> None:
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in FORBIDDEN)
    assert not loaded, f"web modules were loaded before the engine tests: {loaded}"
    sys.meta_path.insert(0, _Forbid())
