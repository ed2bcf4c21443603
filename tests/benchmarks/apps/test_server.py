"""LLMServer (benchmarks.apps.server) in real runs: one llama-server with parallel slots serving three
clients, its life bound to the run (finished, cancelled, killed), and its failures failing its clients."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil
import pytest

from benchmarks.apps import server as server_app
from benchmarks.apps.base import AppContext
from benchmarks.results import write_bundle
from benchmarks.runner import PreflightError, run_workflow
from benchmarks.schedulers.base import OpenGate
from benchmarks.schedulers.credit import CreditScheduler
from benchmarks.schedulers.ledger import CreditParams
from benchmarks.spec.load import load_yaml

# The YAML of issue 23 with short replies, so that a test takes seconds on a busy 2-core machine.
SHARED = """\
llm:
  type: LLMServer
  model: smollm2-135m
  device: cpu
  parallel: 3
chat_a: {type: Chatbot, server: llm, num_requests: 4, max_tokens: 12}
chat_b: {type: Chatbot, server: llm, num_requests: 4, max_tokens: 12}
research: {type: DeepResearch, server: llm, num_requests: 1, max_steps: 2, max_tokens: 12, answer_tokens: 12}
workflows:
  serve: {uses: llm, background: true}
  a: {uses: chat_a}
  b: {uses: chat_b}
  r: {uses: research}
"""


class Watch:
    """A run sink that keeps the server's process id and calls ``on_request`` at each request's end."""

    def __init__(self, on_request: Any = None) -> None:
        self.server_pid: int | None = None
        self.requests = 0
        self.on_request = on_request

    def on_event(self, event: Mapping[str, Any]) -> None:
        if event["kind"] == "load_end" and event["node"] == "serve":
            self.server_pid = event["loaded"]["pid"]
        if event["kind"] == "request_end":
            self.requests += 1
            if self.on_request is not None:
                self.on_request(self)


def no_children_left() -> bool:
    """True when no process this test started outlived its run (the resource tracker may)."""
    return all("resource_tracker" in " ".join(p.cmdline()) for p in psutil.Process().children(recursive=True))


def gone(pid: int | None) -> bool:
    """True when no live process has this id (a zombie counts as gone: it runs nothing)."""
    if pid is None or not psutil.pid_exists(pid):
        return True
    return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


# Runs a real llama-server on the packaged model.
served = pytest.mark.llama_server


@served
def test_three_clients_share_one_server_node_and_the_server_is_gone_after_the_run(tmp_path: Path) -> None:
    watch = Watch()
    result = run_workflow(load_yaml(SHARED, name="shared"), sink=watch, out_dir=tmp_path)
    status = {n.name: (n.status, n.reason) for n in result.nodes}
    assert status == {
        "serve": ("stopped", "stopped: foreground finished"),
        "a": ("succeeded", None),
        "b": ("succeeded", None),
        "r": ("succeeded", None),
    }
    document = json.loads(write_bundle(result, tmp_path).read_text())
    servers = [n for n in document["nodes"] if n.get("server")]
    assert [n["name"] for n in servers] == ["serve"]
    served = servers[0]["server"]
    assert served["backend"] == "llama-server" and served["parallel"] == 3 and served["rss_mb"] > 0
    assert servers[0]["load_time_s"] > 0
    assert served["pid"] == watch.server_pid and gone(watch.server_pid)
    assert no_children_left()
    # The server is a node, not an application: three clients, each timed from its stream.
    apps = {a["name"]: a for a in document["applications"]}
    assert list(apps) == ["a", "b", "r"]
    for name in ("a", "b"):
        assert apps[name]["metrics"]["ttft"]["count"] == 4 and apps[name]["metrics"]["tpot"]["count"] == 4
        assert (
            apps[name]["loaded"]
            == {
                "backend": "server",
                "server": "llm",
                "client_model": None,
                "prompts": "prompts.jsonl (shipped)",
            }
            or apps[name]["loaded"]["server"] == "llm"
        )
        for request in apps[name]["requests"]:
            timings = request["info"]["server_timings"]
            # The server's own count of the tokens it decoded is the client's, but for the token it
            # stopped on, which it counts and does not send.
            stopped = request["info"]["finish_reason"] == "stop"
            assert timings["predicted_n"] == request["info"]["tokens_out"] + stopped
            assert timings["prompt_ms"] > 0
            assert 0 < request["metrics"]["ttft"] <= request["metrics"]["e2e"]
    assert apps["r"]["requests"][0]["info"]["llm_calls"] == len(
        apps["r"]["requests"][0]["info"]["server_timings"]
    )
    # The server's memory is in the telemetry, under its node's name.
    assert document["telemetry"]["applications"]["serve"]["rss_peak_bytes"] > 0


@served
def test_a_cancelled_run_leaves_no_server_behind() -> None:
    watch = Watch()
    result = run_workflow(load_yaml(SHARED, name="shared"), sink=watch, cancel=lambda: watch.requests >= 1)
    assert result.status == "cancelled"
    assert watch.server_pid is not None and gone(watch.server_pid)
    assert no_children_left()


@served
def test_killing_the_server_mid_run_fails_its_clients_with_its_reason_and_ends_the_run() -> None:
    def kill_server(watch: Watch) -> None:
        if watch.requests == 1 and watch.server_pid is not None:
            os.kill(watch.server_pid, signal.SIGKILL)

    text = SHARED.replace("num_requests: 4, max_tokens: 12", "num_requests: 200, max_tokens: 12")
    result = run_workflow(load_yaml(text, name="shared"), sink=Watch(kill_server))
    nodes = {n.name: n for n in result.nodes}
    assert nodes["serve"].status == "failed"
    assert nodes["serve"].reason is not None
    died = "ServerError: llama-server stopped while serving (exit code -9); its log ends:\n"
    assert nodes["serve"].reason.startswith(died)
    for name in ("a", "b"):
        assert nodes[name].status == "failed"
        assert nodes[name].reason is not None
        assert nodes[name].reason.startswith(f"model server node 'serve' failed: {died}")
    assert result.requests_served < result.requests_requested
    assert no_children_left()


@served
def test_killing_the_server_node_leaves_neither_its_server_nor_its_log_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The node's process (llama-server's parent) dies without its clean-up: its folder is the run's.
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # the spawned processes' temporary folder
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # the runner's

    def kill_node(watch: Watch) -> None:
        if watch.requests == 1 and watch.server_pid is not None:
            os.kill(psutil.Process(watch.server_pid).ppid(), signal.SIGKILL)

    text = SHARED.replace("num_requests: 4, max_tokens: 12", "num_requests: 200, max_tokens: 12")
    watch = Watch(kill_node)
    result = run_workflow(load_yaml(text, name="shared"), sink=watch)
    assert {n.name: n.status for n in result.nodes}["serve"] == "failed"
    deadline = time.monotonic() + 10  # llama-server follows its parent by its parent-death signal
    while not gone(watch.server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(watch.server_pid)
    assert list(temp.iterdir()) == []


@served
def test_a_server_that_cannot_load_its_model_fails_its_clients_with_its_log_tail(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    result = run_workflow(load_yaml(SHARED.replace("model: smollm2-135m", f"model: {broken}"), name="shared"))
    nodes = {n.name: n for n in result.nodes}
    assert nodes["serve"].status == "failed"
    reason = nodes["serve"].reason or ""
    assert reason.startswith("ServerError: llama-server failed to start (exit code 1); its log ends:\n")
    assert reason.endswith("exiting due to model loading error")  # the end of llama-server's own log
    assert str(tmp_path) not in reason and "<model folder>/broken.gguf" in reason  # no path of this machine
    for name in ("a", "b", "r"):
        assert (nodes[name].status, nodes[name].reason) == (
            "failed",
            f"model server node 'serve' failed: {reason}",
        )
    assert no_children_left()


@served
def test_the_server_dies_within_seconds_when_its_runner_is_killed() -> None:
    # The runner's death kills the server's node (its parent-death signal), whose death kills
    # llama-server (its own parent-death signal): no clean-up code runs on the way.
    script = textwrap.dedent(
        f"""
        from benchmarks.runner import run_workflow
        from benchmarks.spec.load import load_yaml

        run_workflow(load_yaml({SHARED.replace("num_requests: 4", "num_requests: 500")!r}), monitor_hz=None)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    runner = subprocess.Popen([sys.executable, "-c", script], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        servers: list[psutil.Process] = []
        while not servers and time.monotonic() < deadline:
            time.sleep(0.2)
            servers = [
                p for p in psutil.Process(runner.pid).children(recursive=True) if p.name() == "llama-server"
            ]
        assert servers, "the runner started no llama-server"
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        _gone, alive = psutil.wait_procs(servers, timeout=5)
        assert not alive, "llama-server outlived its runner"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(runner.pid, signal.SIGKILL)
        runner.wait()


@served
def test_a_port_taken_between_probe_and_bind_is_retried_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another process takes the port the kernel offered before the server binds it.
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = taken.getsockname()[1]
    offers = [busy]
    real = server_app.free_port
    monkeypatch.setattr(server_app, "free_port", lambda: offers.pop() if offers else real())
    unit = load_yaml(SHARED, name="shared").applications["llm"]
    ctx = AppContext("serve", lambda kind, **f: None, OpenGate(), lambda: False, "cpu", tmp_path, 0)
    driver = server_app.ServerDriver(unit, ctx)
    try:
        loaded = driver.load()
        assert loaded["port"] != busy
        log = server_app.log_tail(driver.log_path, 100_000)
        assert f"{server_app.BIND_FAILED}, hostname: 127.0.0.1, port: {busy}" in log
    finally:
        driver.close()
        taken.close()
    assert gone(loaded["pid"])


def test_a_missing_server_binary_stops_the_run_before_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CB_LLAMA_SERVER", "/nonexistent/llama-server")
    with pytest.raises(PreflightError) as info:
        run_workflow(load_yaml(SHARED, name="shared"))
    assert info.value.problems == [
        "unit 'llm': CB_LLAMA_SERVER=/nonexistent/llama-server is not an executable file"
    ]


def test_validate_check_files_says_how_to_build_a_missing_server_and_how_long_it_takes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.cli import main

    # Nowhere to be found: not named, not beside this Python, not on PATH.
    monkeypatch.delenv("CB_LLAMA_SERVER", raising=False)
    monkeypatch.setattr(server_app, "BINARY", "llama-server-absent")
    path = tmp_path / "shared.yml"
    path.write_text(SHARED)
    assert main(["validate", str(path)]) == 0  # the spec alone: a file for another machine validates
    capsys.readouterr()
    assert main(["validate", "--check-files", str(path)]) == 1
    out = capsys.readouterr().out
    assert "line 1: llm: llama.cpp's llama-server-absent is not installed: run `make llama-server`" in out
    assert "about 10 min of CPU" in out


@served
def test_the_llama_settings_reach_llama_server_and_its_clients_are_served(tmp_path: Path) -> None:
    text = """\
llm: {type: LLMServer, model: smollm2-135m, device: cpu, parallel: 2, flash_attn: true, n_batch: 256,
      n_ubatch: 128, type_k: q8_0, type_v: q8_0}
chat: {type: Chatbot, server: llm, num_requests: 1, max_tokens: 4}
workflows:
  serve: {uses: llm, background: true}
  c: {uses: chat}
"""
    result = run_workflow(load_yaml(text, name="settings"), out_dir=tmp_path)
    (server,) = [n for n in result.nodes if n.server]
    assert server.server["llama"] == {
        "flash_attn": True, "n_batch": 256, "n_ubatch": 128, "type_k": "q8_0", "type_v": "q8_0"
    }  # fmt: skip
    (chat,) = result.applications
    assert [r.status.value for r in chat.requests] == ["ok"]


class HeldGate:
    """A gate that may wait (so the driver bridges it): it holds every step until ``admit`` is set and
    counts what passes, as the scheduler's side of the server's step gate sees it."""

    def __init__(self) -> None:
        self.admit = threading.Event()
        self.asked = 0
        self.released = 0
        self.seen: set[tuple[str, str]] = set()

    def acquire(self, app: str, kind: str) -> float:
        self.asked += 1
        self.seen.add((app, kind))
        began = time.monotonic()
        self.admit.wait(60)
        return time.monotonic() - began

    def release(self, app: str, kind: str) -> None:
        self.released += 1


def _wait_for(condition: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


@served
def test_a_gated_server_decodes_nothing_until_its_gate_admits_the_batch(tmp_path: Path) -> None:
    unit = load_yaml(SHARED, name="shared").applications["llm"]
    gate = HeldGate()
    ctx = AppContext("serve", lambda kind, **f: None, gate, lambda: False, "cpu", tmp_path, 0)
    driver = server_app.ServerDriver(unit, ctx)
    reply: dict[str, Any] = {}

    def complete() -> None:
        body = json.dumps({"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0})
        request = urllib.request.Request(
            f"{loaded['url']}/v1/completions", body.encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            reply.update(json.loads(answer.read()))

    try:
        loaded = driver.load()
        assert loaded["step_gate"] is True
        assert gate.asked == 0  # loading (llama.cpp's warm-up decode included) passes no gate
        client = threading.Thread(target=complete)
        client.start()
        _wait_for(lambda: gate.asked > 0)
        time.sleep(0.5)
        # The prompt's batch waits at the gate: nothing decoded, nothing answered.
        assert (gate.asked, gate.released) == (1, 0) and client.is_alive() and not reply
        gate.admit.set()
        client.join(60)
        assert reply["usage"]["completion_tokens"] == 4
        _wait_for(lambda: gate.released == gate.asked)
        # The prompt's step, then one step per token decoded after the first; every one released.
        assert gate.asked == gate.released == driver.bridge.steps >= 4  # type: ignore[union-attr]
        assert gate.seen == {("serve", server_app.BATCH_STEP)}
        # The server's node reports what the gate held its batches: the first one, over half a second.
        assert 0.5 <= driver.gate_wait_s() < 60
    finally:
        driver.close()
    assert gone(loaded["pid"])


def test_a_server_binary_without_the_step_gate_is_refused_only_where_a_gate_may_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in for a stock llama-server (built without server_gate.patch): it answers /health only.
    stock = tmp_path / "llama-server"
    stock.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            """\
            import http.server, sys
            port = int(sys.argv[sys.argv.index("--port") + 1])
            class Health(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    self.send_response(200)
                    self.end_headers()
            http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
            """
        )
    )
    stock.chmod(0o755)
    monkeypatch.setenv("CB_LLAMA_SERVER", str(stock))
    unit = load_yaml(SHARED, name="shared").applications["llm"]
    ctx = AppContext("serve", lambda kind, **f: None, HeldGate(), lambda: False, "cpu", tmp_path / "a", 0)
    driver = server_app.ServerDriver(unit, ctx)
    try:
        with pytest.raises(server_app.ServerError, match="has no step gate") as info:
            driver.load()
        assert "rebuild it with `make llama-server`" in str(info.value)
        assert driver.proc is not None
        refused = driver.proc.pid
    finally:
        driver.close()
    assert gone(refused)
    # Under a gate that never waits (greedy, partition) nothing is bridged and the same binary serves.
    ctx = AppContext("serve", lambda kind, **f: None, OpenGate(), lambda: False, "cpu", tmp_path / "b", 0)
    driver = server_app.ServerDriver(unit, ctx)
    try:
        assert driver.load()["step_gate"] is False
    finally:
        driver.close()


# A served client in the LOW class beside a HIGH application that misses its SLO on the same device: under
# credit, the server's batches wait while the HIGH one is active (max_wait_s bounds each wait).
GATED = """\
llm: {type: LLMServer, model: smollm2-135m, device: cpu, parallel: 2}
notes: {type: Chatbot, server: llm, num_requests: 3, max_tokens: 12, priority: low}
hog: {type: Synthetic, steps: 5, step_ms: 10, num_requests: 10000, priority: high, slo: ["e2e<=40ms"],
      device: cpu, arrival: {kind: closed, think_time_s: 0.1}}
workflows:
  serve: {uses: llm, background: true}
  n: {uses: notes}
  h: {uses: hog, background: true}
"""


@served
def test_under_credit_the_servers_batches_yield_to_more_urgent_pressured_work(tmp_path: Path) -> None:
    scheduler = CreditScheduler(CreditParams(linger_s=0.03, max_wait_s=0.5))
    result = run_workflow(load_yaml(GATED, name="gated"), scheduler=scheduler, out_dir=tmp_path)
    status = {n.name: n.status for n in result.nodes}
    assert status == {"serve": "stopped", "n": "succeeded", "h": "stopped"}
    (server,) = [n for n in result.nodes if n.server]
    assert server.server["step_gate"] is True
    notes = next(a for a in result.applications if a.name == "n")
    assert [r.status.value for r in notes.requests] == ["ok"] * 3
    apps = result.scheduler["apps"]
    # The server runs in its client's class; its batches passed the gate, some of them held back.
    assert apps["serve"]["priority"] == "low"
    longest = max(int(r.info["tokens_out"]) for r in notes.requests)
    assert apps["serve"]["steps"] >= longest
    assert apps["serve"]["delayed"] > 0 and apps["serve"]["wait_s"] > 0
    assert apps["h"]["delayed"] == 0  # HIGH is never held back
    assert gone(server.server["pid"]) and no_children_left()


@served
def test_a_poisson_arrival_beyond_the_service_rate_puts_several_requests_of_one_session_in_flight(
    tmp_path: Path,
) -> None:
    rate = 20.0
    text = textwrap.dedent(
        f"""\
        llm: {{type: LLMServer, model: smollm2-135m, device: cpu, parallel: 1}}
        chat:
          type: Chatbot
          server: llm
          num_requests: 6
          max_tokens: 16
          arrival: {{kind: poisson, rate: {rate}, seed: 3, max_in_flight: 4}}
        workflows:
          serve: {{uses: llm, background: true}}
          c: {{uses: chat}}
        """
    )
    result = run_workflow(load_yaml(text, name="open-loop"), out_dir=tmp_path)
    (app,) = result.applications
    requests = sorted(app.requests, key=lambda r: r.index)
    assert [r.status for r in requests] == ["ok"] * 6
    # The server's own busy time per request: the arrivals come at least twice as fast as it serves.
    service_s = sum(
        (r.info["server_timings"]["prompt_ms"] + r.info["server_timings"]["predicted_ms"]) / 1000
        for r in requests
    ) / len(requests)
    assert rate * service_s >= 2
    # Each request was sent when due, before the one before it had its reply; never more than the cap.
    edges = sorted([(r.start, 1) for r in requests] + [(r.end, -1) for r in requests])
    level, most = 0, 0
    for _, step in edges:
        level += step
        most = max(most, level)
    assert 1 < most <= 4
    assert all(r.start - r.arrival < 0.5 for r in requests[:4])
    # A reply waits in the server's queue (one slot), and its TTFT counts from when it was due.
    assert max(r.metrics["ttft"] for r in requests) > service_s
