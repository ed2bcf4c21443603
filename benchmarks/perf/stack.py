"""docker-compose.yml's deployment on this machine, without Docker: the same services from the same
files, on private servers and free loopback ports.

- PostgreSQL: a private cluster (``initdb``) in a temporary folder, removed afterwards;
- Redis: a private ``redis-server`` that keeps nothing on disk;
- web: gunicorn with ``deploy/gunicorn.conf.py``, bound to loopback;
- proxy: nginx with ``deploy/nginx.conf.template`` rendered as nginx's image renders it (its
  ``${CB_...}`` names from the compose file's proxy environment, ports and folders replaced by this
  machine's), HTTPS with a certificate made for 127.0.0.1;
- the sweeper and a CPU worker (``consumerbench worker``), when asked.
The settings are the production example's (``.env.production.example``) with the compose file's
wiring on top; only addresses, the secret key and the results folder are this machine's.
The shared PostgreSQL and Redis of the machine are never touched.

Used by the deployment tests (tests/security/test_deployment_stack.py), the fault tests (their private
servers) and ``python -m benchmarks.perf.web_load``. Standard library and PyYAML only: the engine
imports no web framework, and this module starts the web side as programs.
"""

from __future__ import annotations

import contextlib
import glob
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
NGINX_TEMPLATE = ROOT / "deploy" / "nginx.conf.template"
GUNICORN_CONF = ROOT / "deploy" / "gunicorn.conf.py"
PRODUCTION_ENV = ROOT / ".env.production.example"
# "${NAME}" or "${NAME:-default}" in the compose file; "${NAME}" in nginx's template.
_COMPOSE_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


class StackError(RuntimeError):
    """A service did not start; the message names it and where its log is."""


def free_port() -> int:
    """Return a TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 60, every: float = 0.2) -> Any:
    """Return the first truthy value of ``condition()``; raise StackError with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise StackError(f"{what} (waited {timeout:g} s)")


def stop_process(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 15) -> None:
    """Stop a process started in its own session, and everything left in that session."""
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


# --------------------------------------------------------------------------------------------------
# The compose file and the production example, read as Docker reads them
# --------------------------------------------------------------------------------------------------


def compose_file() -> dict[str, Any]:
    """Return docker-compose.yml as a mapping (YAML anchors and merge keys resolved)."""
    data = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("services"), dict):
        raise StackError(f"{COMPOSE_FILE} has no services")
    return data


def compose_default(value: str) -> str:
    """Return a compose value with each ``${NAME:-default}`` replaced by its default (``${NAME}`` by "")."""
    return _COMPOSE_VARIABLE.sub(lambda m: m.group(2) or "", value)


def compose_environment(service: str) -> dict[str, str]:
    """Return the ``environment`` a compose service sets, with compose's defaults filled in."""
    environment = compose_file()["services"][service].get("environment") or {}
    return {str(k): compose_default(str(v)) for k, v in environment.items()}


def production_environment() -> dict[str, str]:
    """Return the variables ``.env.production.example`` sets (what a lab copies to .env)."""
    values: dict[str, str] = {}
    for line in PRODUCTION_ENV.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def render_template(template: str, values: Mapping[str, str]) -> str:
    """Replace ``${NAME}`` for each NAME of ``values``, as nginx's image does with its environment
    (its envsubst leaves nginx's own ``$variables`` alone); a ``${CB_...}`` left over is an error."""
    rendered = _COMPOSE_VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), template)
    left = sorted(set(re.findall(r"\$\{(CB_[A-Z0-9_]*)\}", rendered)))
    if left:
        raise StackError(f"no value for {', '.join(left)} in {NGINX_TEMPLATE.name}")
    return rendered


# --------------------------------------------------------------------------------------------------
# Private PostgreSQL and Redis
# --------------------------------------------------------------------------------------------------


class Postgres:
    """A private PostgreSQL cluster in a folder (run as the postgres user when we are root)."""

    def __init__(self, folder: Path) -> None:
        bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        if not bindirs:
            raise StackError("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
        self.bin = Path(bindirs[-1])
        self.folder = folder
        self.data = folder / "data"
        self.port = free_port()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/cb"

    def _as_owner(self, *argv: str) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else list(argv)

    def init(self) -> None:
        """Create the cluster and its ``cb`` database, and start it."""
        self.folder.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        subprocess.run(
            self._as_owner(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"),
            check=True,
            capture_output=True,
        )
        self.start()
        subprocess.run(
            [str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "cb"],
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(
            self._as_owner(
                str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l",
                str(self.folder / "log"), "-w", "start",
            ),
            check=True,
            capture_output=True,
        )  # fmt: skip

    def stop(self, mode: str = "immediate") -> None:
        subprocess.run(
            self._as_owner(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"),
            check=False,
            capture_output=True,
        )


class Redis:
    """A private redis-server that keeps nothing on disk: a restart loses every queued message."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if not shutil.which("redis-server"):
            raise StackError("redis-server is not installed")
        self.folder.mkdir(parents=True, exist_ok=True)
        with (self.folder / "redis.log").open("ab") as log:
            self.process = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(self.folder)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        wait_for(self.up, "redis-server did not start", timeout=20)

    def up(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
        return False

    def kill(self) -> None:
        if self.process is not None:
            stop_process(self.process, signal.SIGKILL)
            self.process = None


# --------------------------------------------------------------------------------------------------
# The deployment
# --------------------------------------------------------------------------------------------------

# nginx's main file as nginx's image has it (worker processes, connections), with this stack's
# folders; the server blocks are the template's, included as the image includes conf.d/*.conf.
_NGINX_MAIN = """\
daemon off;
worker_processes auto;
pid {folder}/nginx.pid;
error_log {folder}/nginx-error.log warn;
{user}
events {{ worker_connections 1024; }}
http {{
    default_type application/octet-stream;
    access_log {access_log};
    sendfile on;
    keepalive_timeout 65;
    client_body_temp_path {folder}/nginx-temp/body;
    proxy_temp_path {folder}/nginx-temp/proxy;
    fastcgi_temp_path {folder}/nginx-temp/fastcgi;
    uwsgi_temp_path {folder}/nginx-temp/uwsgi;
    scgi_temp_path {folder}/nginx-temp/scgi;
    include {folder}/consumerbench.conf;
}}
"""


class Stack:
    """Start with ``with Stack() as stack:``; ``stack.url`` is the proxy's HTTPS address, ``stack.token``
    an API token of user ``stack-user``, ``stack.ca_file`` the certificate a client must trust."""

    def __init__(
        self,
        *,
        worker: bool = True,
        sweeper: bool = True,
        settings: Mapping[str, str] | None = None,
        access_log: bool = True,
        keep_folder: bool = False,
    ) -> None:
        nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
        if nginx is None:
            raise StackError("nginx is not installed (apt-get install nginx-light)")
        self.nginx = nginx
        self.folder = Path(tempfile.mkdtemp(prefix="cb-stack-"))
        # nginx's worker processes (nobody, when started by root) write request bodies under it.
        self.folder.chmod(0o755)
        self.keep_folder = keep_folder
        self.with_worker, self.with_sweeper, self.access_log = worker, sweeper, access_log
        self.postgres = Postgres(self.folder / "postgres")
        self.redis = Redis(self.folder / "redis")
        self.web_port, self.http_port, self.https_port = free_port(), free_port(), free_port()
        self.url = f"https://127.0.0.1:{self.https_port}"
        self.ca_file = self.folder / "tls" / "fullchain.pem"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.token = ""
        production = production_environment()
        self.env = {
            **os.environ,
            **production,
            **compose_environment("web"),
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "cbweb.settings",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "DJANGO_CSRF_TRUSTED_ORIGINS": self.url,
            "DATABASE_URL": self.postgres.url,
            "CELERY_BROKER_URL": self.redis.url,
            "CB_RESULTS_DIR": str(self.folder / "results"),
            "DJANGO_STATIC_ROOT": str(self.folder / "static"),
            # Clients of this stack (the CLI, urllib) trust its certificate.
            "SSL_CERT_FILE": str(self.ca_file),
            **(settings or {}),
        }
        self.env.pop("CACHE_URL", None)
        # The worker's statement timeout is its own (compose's worker wiring).
        worker_timeout = compose_environment("worker-cpu").get("CB_DB_STATEMENT_TIMEOUT_MS", "0")
        self.worker_env = {**self.env, "CB_DB_STATEMENT_TIMEOUT_MS": worker_timeout}

    # -- life cycle ----------------------------------------------------------------------------------

    def __enter__(self) -> Stack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start every service and wait until the proxy answers an API read."""
        self.postgres.init()
        self.redis.start()
        # As the compose web command: migrations without the statement timeout, then gunicorn.
        self.manage("migrate", "--noinput", env={"CB_DB_STATEMENT_TIMEOUT_MS": "0"})
        self.manage("collectstatic", "--noinput")
        self.token = self.manage("create_api_token", "stack-user").strip().splitlines()[-1]
        self.spawn(
            "web",
            [str(BIN / "gunicorn"), "-c", str(GUNICORN_CONF), "--bind", f"127.0.0.1:{self.web_port}",
             "cbweb.wsgi:application"],
        )  # fmt: skip
        self.start_proxy()
        if self.with_sweeper:
            self.spawn("sweeper", [sys.executable, "manage.py", "sweep_runs"])
        if self.with_worker:
            worker = self.spawn(
                "worker", [str(BIN / "consumerbench"), "worker", "--name", "stack@%h"], env=self.worker_env
            )
            log = self.folder / "worker.log"
            wait_for(
                lambda: " ready." in log.read_text(errors="replace") or worker.poll() is not None,
                f"the worker did not start; log: {log}",
                timeout=120,
            )
            self.check_alive("worker")
        wait_for(
            lambda: self.status("/api/v1/runs/?limit=1") == 200 or self.dead(),
            f"the proxy did not answer; logs in {self.folder}",
            timeout=120,
        )
        for name in self.processes:
            self.check_alive(name)

    def start_proxy(self) -> None:
        tls = self.ca_file.parent
        tls.mkdir()
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
             "-keyout", str(tls / "privkey.pem"), "-out", str(self.ca_file)],
            check=True, capture_output=True,
        )  # fmt: skip
        values = {
            **compose_environment("proxy"),
            "CB_WEB_UPSTREAM": f"127.0.0.1:{self.web_port}",
            "CB_PROXY_HTTP_PORT": f"127.0.0.1:{self.http_port}",
            "CB_PROXY_HTTPS_PORT": f"127.0.0.1:{self.https_port}",
            "CB_TLS_DIR": str(tls),
        }
        (self.folder / "consumerbench.conf").write_text(
            render_template(NGINX_TEMPLATE.read_text(encoding="utf-8"), values), encoding="utf-8"
        )
        temp = self.folder / "nginx-temp"
        temp.mkdir()
        temp.chmod(0o777)
        (self.folder / "nginx.conf").write_text(
            _NGINX_MAIN.format(
                folder=self.folder,
                user="user nobody nogroup;" if os.geteuid() == 0 else "",
                access_log=f"{self.folder}/nginx-access.log" if self.access_log else "off",
            ),
            encoding="utf-8",
        )
        self.spawn(
            "proxy",
            [self.nginx, "-p", str(self.folder), "-c", str(self.folder / "nginx.conf"),
             "-e", str(self.folder / "nginx-error.log")],
        )  # fmt: skip

    def stop(self) -> None:
        """Stop every service (the worker warm, as compose does) and remove the folder."""
        for name in reversed(list(self.processes)):
            stop_process(self.processes[name], signal.SIGQUIT if name == "proxy" else signal.SIGTERM, 30)
        self.processes.clear()
        self.redis.kill()
        self.postgres.stop()
        if not self.keep_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def spawn(
        self, name: str, argv: list[str], env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        with (self.folder / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=dict(env or self.env),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes[name] = process
        return process

    def dead(self) -> bool:
        return any(p.poll() is not None for p in self.processes.values())

    def check_alive(self, name: str) -> None:
        if self.processes[name].poll() is not None:
            raise StackError(f"{name} exited: {self.log(name)[-3000:]}")

    def log(self, name: str) -> str:
        """Return what service ``name`` wrote (web, proxy, worker, sweeper; nginx-error, nginx-access)."""
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def manage(self, *args: str, env: Mapping[str, str] | None = None) -> str:
        """Run ``manage.py ARGS`` with the web's settings; return its output."""
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise StackError(f"manage.py {' '.join(args)}: {done.stderr[-3000:]}")
        return done.stdout

    # -- a client of the proxy ------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        data: bytes | None = None,
        source: str = "127.0.0.1",
    ) -> tuple[int, Any, dict[str, str]]:
        """Send one request through the proxy from loopback address ``source``; return (status,
        decoded JSON or the raw body, response headers in lower case)."""
        if data is None and body is not None:
            data = json.dumps(body).encode()
        sent = {"Content-Type": "application/json", "Host": "127.0.0.1"}
        key = self.token if token is None else token
        if key:
            sent["Authorization"] = f"Token {key}"
        sent.update(headers or {})
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.https_port, timeout=60, context=self.ssl_context(), source_address=(source, 0)
        )
        try:
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            status, raw = response.status, response.read()
            answer_headers = {k.lower(): v for k, v in response.getheaders()}
        finally:
            connection.close()
        try:
            return status, json.loads(raw) if raw[:1] in (b"{", b"[") else raw, answer_headers
        except ValueError:
            return status, raw, answer_headers

    def status(self, path: str) -> int:
        """Return the status of an anonymous GET through the proxy (0: no answer)."""
        try:
            return self.request("GET", path, token="")[0]
        except OSError:
            return 0
