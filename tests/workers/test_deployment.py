"""docker-compose.yml and .env.example agree with the settings and start the services issue 6 names."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
ENV_READERS = {"str", "float", "int", "bool", "list", "db_url", "_strict_bool"}


def settings_variables() -> set[str]:
    """Every environment variable cbweb/settings.py reads (env.<type>("NAME") or _strict_bool("NAME"))."""
    names = set()
    for node in ast.walk(ast.parse((ROOT / "cbweb" / "settings.py").read_text())):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        first = node.args[0]
        if name in ENV_READERS and isinstance(first, ast.Constant) and isinstance(first.value, str):
            names.add(first.value)
    return names


def example_variables() -> set[str]:
    text = (ROOT / ".env.example").read_text()
    return set(re.findall(r"^#? ?([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE))


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def test_env_example_lists_every_variable_the_settings_read() -> None:
    assert "CB_HEARTBEAT_S" in settings_variables()  # the parser finds them
    missing = settings_variables() - example_variables()
    assert not missing, f".env.example lacks {sorted(missing)}"


def test_every_other_variable_of_env_example_is_used_by_docker_compose() -> None:
    used = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", (ROOT / "docker-compose.yml").read_text()))
    # And by the gunicorn settings file the compose web service runs.
    used |= set(
        re.findall(r"os\.environ\.get\(\"([A-Z][A-Z0-9_]*)\"", (ROOT / "deploy/gunicorn.conf.py").read_text())
    )
    unknown = example_variables() - settings_variables() - used
    assert not unknown, f".env.example lists variables nothing reads: {sorted(unknown)}"


def test_compose_runs_the_web_app_a_gpu_worker_and_a_cpu_worker_on_postgres_and_redis() -> None:
    services = compose()["services"]
    assert {"postgres", "redis", "web", "worker-gpu", "worker-cpu"} <= set(services)
    web = " ".join(services["web"]["command"])
    for step in (
        "manage.py migrate",
        "manage.py collectstatic",
        "gunicorn -c deploy/gunicorn.conf.py cbweb.wsgi",
    ):
        assert step in web
    assert services["worker-gpu"]["command"] == ["consumerbench", "worker", "--gpu", "0"]
    [device] = services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert services["worker-cpu"]["command"] == ["consumerbench", "worker"]
    assert "deploy" not in services["worker-cpu"]
    for name in ("web", "worker-gpu", "worker-cpu"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:" in env["DATABASE_URL"]
        assert env["CELERY_BROKER_URL"] == "redis://redis:6379/0"


def test_compose_runs_the_run_sweeper_outside_the_workers() -> None:
    sweeper = compose()["services"]["sweeper"]
    assert sweeper["command"] == ["python", "manage.py", "sweep_runs"]
    assert sweeper["environment"]["CELERY_BROKER_URL"] == "redis://redis:6379/0"
    assert "@postgres:" in sweeper["environment"]["DATABASE_URL"]
