"""Shared test set-up: the markers that say what a test needs (which tier runs it), and the resource
markers that skip locally and fail in CI (CB_REQUIRE_SERVICES=1).

Tiers (CONTRIBUTING.md): `make check` runs every test that needs none of ``SLOW_NEEDS``; `make test`
runs them all. A test need not be marked by hand: ``pytest_collection_modifyitems`` adds the markers
its fixtures imply (``FIXTURE_NEEDS``), marks ``spawns`` a test whose code, its helpers' or its
fixtures' call something that starts processes (``SPAWNERS``), and marks ``spawns`` the tests seen
starting a process in an earlier run (recorded in pytest's cache by ``SpawnWatch``).
"""

from __future__ import annotations

import builtins
import dis
import glob
import inspect
import multiprocessing.process
import os
import shutil
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.services import reachable

REQUIRE_SERVICES = os.environ.get("CB_REQUIRE_SERVICES") == "1"
POSTGRES_URL = os.environ.get("CB_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("CB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
CHROMIUM = os.environ.get("CB_CHROMIUM", "/usr/bin/chromium")


def _gpu_present() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
        return count > 0
    except Exception:
        return False


def _missing(marker: str) -> str | None:
    """Return why the resource a marker names is missing, or None when it is there."""
    if marker == "postgres" and not reachable(POSTGRES_URL):
        return f"PostgreSQL not reachable at {POSTGRES_URL}"
    if marker == "broker" and not reachable(REDIS_URL):
        return f"Redis not reachable at {REDIS_URL}"
    if marker == "browser" and not (shutil.which(CHROMIUM) or os.path.exists(CHROMIUM)):
        return f"Chromium not found at {CHROMIUM} (apt-get install chromium)"
    if marker == "gpu" and not _gpu_present():
        return "no NVIDIA GPU visible"
    if marker == "faults":
        return _fault_tools_missing()
    if marker == "stack":
        return _stack_tools_missing()
    if marker == "llama_server":
        from benchmarks.apps.server import ServerError, server_binary

        try:
            server_binary()
        except ServerError as exc:
            return str(exc)
    return None


def _fault_tools_missing() -> str | None:
    # Fault tests start (and stop) their own servers: they need the server programs, not the services.
    if not shutil.which("redis-server"):
        return "redis-server is not installed"
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        return "PostgreSQL server programs (initdb, pg_ctl) are not installed"
    if os.geteuid() == 0 and not shutil.which("runuser"):
        return "running as root without runuser to start PostgreSQL as the postgres user"
    return None


def _stack_tools_missing() -> str | None:
    # docker-compose.yml's services as programs: the fault tests' servers plus the proxy.
    if not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")):
        return "nginx is not installed (apt-get install nginx-light)"
    if not shutil.which("openssl"):
        return "openssl is not installed (the proxy's test certificate)"
    return _fault_tools_missing()


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in ("postgres", "broker", "browser", "gpu", "faults", "stack", "llama_server"):
        if item.get_closest_marker(marker) is None:
            continue
        reason = _missing(marker)
        if reason is None:
            continue
        # A GPU is hardware CI does not have: that one always skips.
        if REQUIRE_SERVICES and marker != "gpu":
            pytest.fail(f"required service missing ({marker}): {reason}", pytrace=False)
        pytest.skip(reason)


# --------------------------------------------------------------------------------------------------
# Tiers: what a test needs
# --------------------------------------------------------------------------------------------------

# What keeps a test out of `make check` (the Makefile's CHECK_MARKERS says the same).
SLOW_NEEDS = ("models", "browser", "faults", "llama_server", "gpu", "spawns", "broker", "stack")
# Fixtures that imply what their tests need (by name, wherever the fixture is defined).
FIXTURE_NEEDS: dict[str, tuple[str, ...]] = {
    "live_app": ("browser", "spawns"),
    "page": ("browser",),
    "fake_mps": ("spawns",),
    "celery_worker": ("broker", "spawns"),
}
# What starts processes, by module (every name in it) or by qualified name: a test that calls one of
# these, directly or through a helper, fixture or class of the tests, is marked `spawns`.
SPAWNERS = (
    "subprocess",
    "multiprocessing",
    "concurrent.futures.process",
    "celery.contrib.testing",
    "benchmarks.runner.dag",
    "benchmarks.runner.process",
    "benchmarks.sweep.run",
    "benchmarks.monitor.process",
    "benchmarks.monitor.run",
    "benchmarks.monitor.sources.procutil",
    "benchmarks.monitor.sources.dcgm",
    "benchmarks.monitor.sources.pcm",
    "benchmarks.monitor.sources.powermetrics",
    "benchmarks.schedulers.mps",
    "benchmarks.schedulers.mps_check",
    "benchmarks.apps.server",
    "cbweb.runs.execution",
    "workers.tasks",
)
SPAWNS_CACHE_KEY = "consumerbench/spawns"


TESTS = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _defined_in_tests(obj: Any) -> bool:
    if inspect.isfunction(obj):
        return obj.__code__.co_filename.startswith(TESTS)
    if inspect.isclass(obj):
        module = sys.modules.get(obj.__module__)
        return str(getattr(module, "__file__", "")).startswith(TESTS)
    return False


def _is_spawner(obj: Any) -> bool:
    if isinstance(obj, types.ModuleType):
        name = obj.__name__
    else:
        module = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
        if not isinstance(module, str):
            return False
        name = f"{module}.{qualname}" if isinstance(qualname, str) else module
    return any(name == s or name.startswith(s + ".") for s in SPAWNERS)


def _referenced(code: types.CodeType, scope: dict[str, Any]) -> Iterator[Any]:
    """The objects a function's code names: its globals and builtins, and what it imports."""
    module: Any = None
    for ins in dis.get_instructions(code):
        if ins.opname == "IMPORT_NAME":  # a function-level import: the module, if loaded already
            module = sys.modules.get(ins.argval)
            yield module
        elif ins.opname == "IMPORT_FROM":
            yield getattr(module, ins.argval, None)
        elif ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            yield scope.get(ins.argval, getattr(builtins, ins.argval, None))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _referenced(const, scope)


def _calls_spawner(func: Any, seen: set[int]) -> bool:
    """Whether ``func`` (a test, a helper or fixture of the tests, a class of the tests) names a spawner,
    itself or through the helpers of the tests it names."""
    if id(func) in seen:
        return False
    seen.add(id(func))
    if inspect.isclass(func):
        return any(
            _calls_spawner(member, seen) for member in vars(func).values() if inspect.isfunction(member)
        )
    func = inspect.unwrap(func)
    code = getattr(func, "__code__", None)
    if code is None:
        return False
    for obj in _referenced(code, getattr(func, "__globals__", {})):
        if obj is None:
            continue
        if _is_spawner(obj):
            return True
        if _defined_in_tests(obj) and _calls_spawner(obj, seen):
            return True
    return False


def _implied_needs(item: pytest.Item, learned: set[str]) -> set[str]:
    needs: set[str] = set()
    names = getattr(item, "fixturenames", ())
    for name in names:
        needs.update(FIXTURE_NEEDS.get(name, ()))
    if item.nodeid in learned:
        needs.add("spawns")
    if "spawns" not in needs:
        seen: set[int] = set()
        funcs: list[Any] = [getattr(item, "function", None)]
        info = getattr(item, "_fixtureinfo", None)
        for defs in info.name2fixturedefs.values() if info else ():
            funcs.extend(d.func for d in defs if _defined_in_tests(inspect.unwrap(d.func)))
        if any(f is not None and _calls_spawner(f, seen) for f in funcs):
            needs.add("spawns")
    return needs


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # tryfirst: the markers must be there before `-m` deselects.
    cache = getattr(config, "cache", None)
    learned = set(cache.get(SPAWNS_CACHE_KEY, [])) if cache else set()
    xdist = config.pluginmanager.hasplugin("xdist")
    for item in items:
        for need in sorted(_implied_needs(item, learned)):
            if item.get_closest_marker(need) is None:
                item.add_marker(getattr(pytest.mark, need))
        # The broker tests share one Redis database (CB_TEST_REDIS_URL): under pytest-xdist they run on
        # one worker, one after the other (--dist loadgroup), as every other test runs anywhere.
        if xdist and item.get_closest_marker("broker") is not None:
            item.add_marker(pytest.mark.xdist_group("redis"))


class SpawnWatch:
    """Notes the tests that start a process (subprocess or multiprocessing), setup and teardown included,
    so that a later run marks them `spawns` whatever the static look at their code missed."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.spawned: set[str] = set()
        self.ran: set[str] = set()
        self._undo: list[Callable[[], None]] = []

    def install(self) -> None:
        def watch(owner: Any, name: str) -> None:
            original = getattr(owner, name)

            def noted(*args: Any, **kwargs: Any) -> Any:
                if self.current is not None:
                    self.spawned.add(self.current)
                return original(*args, **kwargs)

            setattr(owner, name, noted)
            self._undo.append(lambda: setattr(owner, name, original))

        watch(subprocess.Popen, "_execute_child")
        watch(multiprocessing.process.BaseProcess, "start")

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        self.current = item.nodeid
        self.ran.add(item.nodeid)
        try:
            yield
        finally:
            self.current = None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        config = session.config
        if hasattr(config, "workeroutput"):  # a pytest-xdist worker: the controller writes the cache
            config.workeroutput["cb_ran"] = sorted(self.ran)
            config.workeroutput["cb_spawned"] = sorted(self.spawned)
        else:
            self.store(config)
        self.uninstall()

    def collect(self, output: dict[str, Any]) -> None:
        """Add what a pytest-xdist worker saw (its ``workeroutput``)."""
        self.ran.update(output.get("cb_ran", ()))
        self.spawned.update(output.get("cb_spawned", ()))

    def store(self, config: pytest.Config) -> None:
        cache = getattr(config, "cache", None)
        if cache is None or not self.ran:
            return
        # A test that ran and started nothing leaves the list; tests not run this time keep their entry.
        known = set(cache.get(SPAWNS_CACHE_KEY, []))
        cache.set(SPAWNS_CACHE_KEY, sorted((known - self.ran) | self.spawned))


class WorkerReports:
    """The pytest-xdist controller's side: each worker's notes reach the SpawnWatch as it goes down."""

    def __init__(self, watch: SpawnWatch) -> None:
        self.watch = watch

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.watch.collect(getattr(node, "workeroutput", {}))


def pytest_configure(config: pytest.Config) -> None:
    watch = SpawnWatch()
    watch.install()
    config.pluginmanager.register(watch, "cb-spawn-watch")
    if config.pluginmanager.hasplugin("xdist"):  # its hooks exist only where it is installed
        config.pluginmanager.register(WorkerReports(watch), "cb-spawn-watch-workers")
