"""The documented deployment (docker-compose.yml): the proxy in front is the only published service,
and the same services, started from the same files without Docker (benchmarks/perf/stack.py), run a
submit through the proxy, count throttles by the address the proxy sets and refuse large bodies."""

from __future__ import annotations

import http.client
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from benchmarks.perf.stack import (
    GUNICORN_CONF,
    NGINX_TEMPLATE,
    ROOT,
    Stack,
    compose_environment,
    compose_file,
    production_environment,
)

BIN = Path(sys.executable).parent
WORKERS = ("worker-gpu", "worker-cpu")


# --- the compose file, as docker compose reads it ------------------------------------------------


def test_only_the_proxy_publishes_a_port() -> None:
    services = compose_file()["services"]
    assert {"proxy", "web", "postgres", "redis", "sweeper", *WORKERS} <= set(services)
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"proxy"}
    assert [p.split(":")[-1] for p in services["proxy"]["ports"]] == ["80", "443"]
    assert services["web"].get("expose") == ["8000"]


def test_the_proxy_mounts_the_template_and_sets_every_name_it_uses() -> None:
    proxy = compose_file()["services"]["proxy"]
    assert f"./deploy/{NGINX_TEMPLATE.name}:/etc/nginx/templates/default.conf.template:ro" in proxy["volumes"]
    names = set(re.findall(r"\$\{(CB_[A-Z0-9_]+)\}", NGINX_TEMPLATE.read_text()))
    environment = compose_environment("proxy")
    assert names and names <= set(environment)
    assert environment["NGINX_ENVSUBST_FILTER"] == "^CB_"


def test_the_proxy_body_limit_is_the_web_servers_default_limit() -> None:
    if "CB_MAX_REQUEST_BYTES" in os.environ or "CB_MAX_SPEC_BYTES" in os.environ:
        pytest.skip("the limits are set in this environment; the test compares the defaults")
    assert int(compose_environment("proxy")["CB_MAX_REQUEST_BYTES"]) == settings.CB_MAX_REQUEST_BYTES
    assert settings.CB_MAX_REQUEST_BYTES == 2 * settings.CB_MAX_SPEC_BYTES + 256 * 1024 == 2_359_296


def test_web_and_workers_trust_one_proxy_and_bound_every_statement() -> None:
    web = compose_environment("web")
    assert web["CB_NUM_PROXIES"] == "1" == production_environment()["CB_NUM_PROXIES"]
    assert int(web["CB_DB_STATEMENT_TIMEOUT_MS"]) == 10_000
    assert compose_environment("sweeper")["CB_DB_STATEMENT_TIMEOUT_MS"] == web["CB_DB_STATEMENT_TIMEOUT_MS"]
    for worker in WORKERS:
        environment = compose_environment(worker)
        assert environment["CB_NUM_PROXIES"] == "1"
        assert int(environment["CB_DB_STATEMENT_TIMEOUT_MS"]) == 300_000


def test_gunicorn_runs_threaded_workers_that_outlast_the_proxy_timeout() -> None:
    command = " ".join(compose_file()["services"]["web"]["command"])
    assert "gunicorn -c deploy/gunicorn.conf.py cbweb.wsgi:application" in command
    assert "CB_DB_STATEMENT_TIMEOUT_MS=0 python manage.py migrate" in command
    # The defaults, as compose runs them when .env sets neither.
    env = {k: v for k, v in os.environ.items() if k not in ("WEB_CONCURRENCY", "WEB_THREADS")}
    done = subprocess.run(
        [str(BIN / "gunicorn"), "--check-config", "--print-config", "-c", str(GUNICORN_CONF),
         "cbweb.wsgi:application"],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    config = dict(re.findall(r"^(\w+)\s+= (.*)$", done.stdout, re.M))
    assert config["worker_class"] == "gthread"
    assert int(config["workers"]) * int(config["threads"]) >= 16
    read_timeout = re.search(r"proxy_read_timeout (\d+)s;", NGINX_TEMPLATE.read_text())
    assert read_timeout and int(read_timeout.group(1)) < int(config["timeout"])
    assert int(read_timeout.group(1)) > 10  # the web's statement timeout (10 s) ends first


@pytest.mark.skipif(
    not shutil.which("docker")
    or subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0,
    reason="docker compose is not installed",
)
def test_docker_compose_config_is_valid() -> None:
    done = subprocess.run(
        ["docker", "compose", "config", "-q"],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "DJANGO_SECRET_KEY": "x" * 50},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


# --- the same services, started without Docker ---------------------------------------------------

SLEEP = "nap:\n  type: Sleep\n  sleep_time: 0.05\n  num_requests: 3\n"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with Stack(worker=True, sweeper=True) as running:
        yield running


def _wrong_tokens(stack: Stack, n: int, source: str, headers: list[dict[str, str]]) -> list[int]:
    statuses = []
    for i in range(n):
        status, _, _ = stack.request(
            "GET", "/api/v1/runs/", token=f"wrong-{i}", source=source, headers=headers[i % len(headers)]
        )
        statuses.append(status)
    return statuses


@pytest.mark.stack
def test_consumerbench_submit_through_the_proxy_waits_for_a_successful_run(
    stack: Stack, tmp_path: Path
) -> None:
    workflow = tmp_path / "nap.yml"
    workflow.write_text(SLEEP)
    done = subprocess.run(
        [str(BIN / "consumerbench"), "submit", str(workflow), "--server", stack.url, "--token", stack.token,
         "--wait", "--no-git"],
        cwd=tmp_path, env=stack.env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:] + stack.log("worker")[-2000:]
    status, runs, _ = stack.request("GET", "/api/v1/runs/")
    assert status == 200 and [r["status"] for r in runs["results"]] == ["succeeded"]
    assert "POST /api/v1/runs/" in stack.log("nginx-access")


@pytest.mark.stack
def test_web_and_worker_connections_carry_their_statement_timeouts(stack: Stack) -> None:
    show = (
        "from django.db import connection as c; k = c.cursor(); "
        "k.execute('SHOW statement_timeout'); print(k.fetchone()[0])"
    )
    assert stack.manage("shell", "-c", show).split()[-1] == "10s"
    assert stack.manage("shell", "-c", show, env=stack.worker_env).split()[-1] == "5min"


@pytest.mark.stack
def test_the_proxys_plain_http_port_only_redirects_to_https(stack: Stack) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", stack.http_port, timeout=30)
    connection.request("GET", "/api/v1/runs/", headers={"Host": "127.0.0.1"})
    response = connection.getresponse()
    assert response.status == 301
    assert response.getheader("Location") == "https://127.0.0.1/api/v1/runs/"
    connection.close()


@pytest.mark.stack
def test_wrong_tokens_sent_in_a_victims_name_do_not_lock_the_victim_out(stack: Stack) -> None:
    victim_token = stack.manage("create_api_token", "victim").strip().splitlines()[-1]
    spoof = {"X-Forwarded-For": "127.0.0.2", "X-Real-IP": "127.0.0.2", "Forwarded": "for=127.0.0.2"}
    statuses = _wrong_tokens(stack, 20, source="127.0.0.1", headers=[spoof])
    assert statuses == [401] * 20
    # The victim's own address: its valid token still works, its throttle window is empty.
    status, _, _ = stack.request("GET", "/api/v1/runs/", token=victim_token, source="127.0.0.2")
    assert status == 200
    # The attacker's address is the one that paid.
    assert _wrong_tokens(stack, 1, source="127.0.0.1", headers=[{}]) == [429]


@pytest.mark.stack
def test_wrong_tokens_from_rotating_forwarded_addresses_are_throttled(stack: Stack) -> None:
    rotating = [{"X-Forwarded-For": f"10.{i}.{i}.1", "X-Real-IP": f"10.{i}.{i}.1"} for i in range(60)]
    statuses = _wrong_tokens(stack, 60, source="127.0.0.3", headers=rotating)
    assert statuses[:20] == [401] * 20
    assert statuses[20:] == [429] * 40


@pytest.mark.stack
def test_a_body_over_the_limit_is_refused_by_the_proxy(stack: Stack) -> None:
    # From an address the throttle tests above left alone.
    source = "127.0.0.4"
    limit = int(compose_environment("proxy")["CB_MAX_REQUEST_BYTES"])
    before = stack.log("web").count('"POST /api/v1/workflows/validate/ HTTP')
    status, body, headers = stack.request(
        "POST", "/api/v1/workflows/validate/", data=b" " * (limit + 1), source=source
    )
    assert status == 413 and headers.get("server") == "nginx" and b"nginx" in _raw(body)
    assert stack.log("web").count('"POST /api/v1/workflows/validate/ HTTP') == before  # gunicorn never saw it
    # At the limit the body passes the proxy, and the web server answers (its own JSON refusal).
    status, body, headers = stack.request(
        "POST", "/api/v1/workflows/validate/", data=b" " * limit, source=source
    )
    assert status in (400, 413) and isinstance(body, dict), body
    assert stack.log("web").count('"POST /api/v1/workflows/validate/ HTTP') == before + 1


def _raw(body: Any) -> bytes:
    return body if isinstance(body, bytes) else repr(body).encode()
