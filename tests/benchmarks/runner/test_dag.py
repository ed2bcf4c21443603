"""The DAG runner with real application processes (Sleep and Synthetic)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from benchmarks.apps.base import AppStopped
from benchmarks.progress import RunProgress
from benchmarks.results import ApplicationResult, NodeResult, ResultDocument
from benchmarks.runner import PreflightError, run_workflow
from benchmarks.runner.process import _run_sessions
from benchmarks.spec.load import load_yaml


class Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def on_event(self, event: Mapping[str, Any]) -> None:
        self.events.append(dict(event))

    def kinds(self, node: str) -> list[str]:
        return [e["kind"] for e in self.events if e["node"] == node]


def run(text: str, **kwargs: Any) -> ResultDocument:
    return run_workflow(load_yaml(text, name="t"), **kwargs)


def node(result: ResultDocument, name: str) -> NodeResult:
    return next(n for n in result.nodes if n.name == name)


def app(result: ResultDocument, name: str) -> ApplicationResult:
    return next(a for a in result.applications if a.name == name)


def test_dependencies_run_in_order_and_requests_are_timed_on_one_clock() -> None:
    sink = Recorder()
    result = run(
        """
a: {type: Sleep, sleep_time: 0.1, num_requests: 2}
b: {type: Sleep, sleep_time: 0.05, num_requests: 3}
workflows:
  first: {uses: a}
  second: {uses: b, depend_on: [first]}
""",
        sink=sink,
    )
    first, second = node(result, "first"), node(result, "second")
    assert first.status == second.status == "succeeded"
    assert second.started_at >= first.finished_at
    reqs = app(result, "second").requests
    assert [r.index for r in reqs] == [0, 1, 2]
    for r in reqs:
        assert second.started_at <= r.arrival <= r.start <= r.end <= second.finished_at
        assert r.metrics["e2e"] == pytest.approx(0.05, abs=0.04)
    assert result.makespan_s >= second.finished_at - 0.001
    assert result.critical_path == ["first", "second"]
    assert sink.kinds("second")[:3] == ["node_status", "process", "load_start"]
    times = [e["t"] for e in sink.events if e["node"] == "second" and e["kind"] == "request_end"]
    assert times == sorted(times)


BACKGROUND = """
bg: {type: Sleep, sleep_time: 0.1, num_requests: 1000}
fg: {type: Sleep, sleep_time: 0.1, num_requests: 3}
workflows:
  analysis: {uses: bg, background: true}
  brainstorm: {uses: fg}
  outline: {uses: fg, depend_on: [brainstorm, analysis]}
"""


def test_background_node_is_stopped_when_every_foreground_node_has_finished() -> None:
    sink = Recorder()
    result = run(BACKGROUND, sink=sink)
    analysis = node(result, "analysis")
    assert analysis.status == "stopped"
    assert "foreground finished" in analysis.reason
    assert node(result, "outline").status == "succeeded"
    # Stopped at a step boundary soon after, long before its 1000 requests (100 s of them); the bound
    # leaves room for a loaded machine (a parallel suite), where it took 2 s.
    assert analysis.finished_at - node(result, "outline").finished_at < 10.0
    assert 0 < app(result, "analysis").requests_counted < 1000
    assert result.status == "completed"
    # Stopped by design: what it never began was never due, so it asked only what it served.
    analysis_app = app(result, "analysis")
    assert analysis_app.requests_requested == analysis_app.requests_counted
    # The live progress ends on the same count as the result (one count of requests everywhere).
    progress = RunProgress(load_yaml(BACKGROUND, name="t"))
    for event in sink.events:
        progress.on_event(event)
    final = progress.state["nodes"]["analysis"]
    assert (final["done"], final["total"]) == (analysis_app.requests_counted, analysis_app.requests_requested)
    assert not result.partial() and result.requests_served == result.requests_requested
    # The background node finished last, yet the critical path is the foreground's.
    assert result.critical_path == ["brainstorm", "outline"]


def test_a_background_node_with_an_slo_stopped_by_design_is_not_charged_for_what_it_never_began() -> None:
    result = run("""
bg: {type: Sleep, sleep_time: 0.05, num_requests: 1000, slo: ["e2e<=10s"]}
fg: {type: Sleep, sleep_time: 0.3, num_requests: 2, slo: ["e2e<=10s"]}
workflows:
  research: {uses: bg, background: true}
  chat: {uses: fg}
""")
    assert node(result, "research").status == "stopped"
    assert app(result, "research").slo_attainment == 1.0
    assert result.mean_attainment == 1.0 and result.fairness == pytest.approx(1.0)


def ended(sink: Recorder, name: str) -> bool:
    """Whether the runner has reported ``name`` in a terminal status (the cancel tests' trigger)."""
    return any(
        e["kind"] == "node_status" and e["node"] == name and e["status"] in ("succeeded", "stopped", "failed")
        for e in sink.events
    )


CANCELLED_BACKGROUND = """
bg: {type: Sleep, sleep_time: 0.05, num_requests: 100, slo: ["e2e<=10s"]}
fg: {type: Sleep, sleep_time: 0.1, num_requests: 3, slo: ["e2e<=10s"]}
workflows:
  research: {uses: bg, background: true}
  chat: {uses: fg}
"""


def final_progress(text: str, sink: Recorder) -> dict[str, Any]:
    progress = RunProgress(load_yaml(text, name="t"))
    for event in sink.events:
        progress.on_event(event)
    return progress.state["nodes"]


def test_a_cancel_right_after_the_foreground_finished_stops_the_background_by_design() -> None:
    # The cancel arrives in the runner's first look after the foreground's last node ended, before
    # the runner itself stopped the background: what the background never began was never due.
    sink = Recorder()
    result = run(CANCELLED_BACKGROUND, sink=sink, cancel=lambda: ended(sink, "chat"))
    assert result.status == "cancelled"
    research = node(result, "research")
    assert (research.status, research.reason) == ("stopped", "stopped: foreground finished")
    assert app(result, "research").requests_requested == app(result, "research").requests_counted < 100
    assert result.requests_served == result.requests_requested
    assert result.mean_attainment == 1.0
    # The live progress ends on the same counts.
    final = final_progress(CANCELLED_BACKGROUND, sink)["research"]
    assert final["total"] == app(result, "research").requests_requested


def test_a_cancel_while_the_background_is_being_stopped_by_design_leaves_it_stopped_by_design() -> None:
    sink = Recorder()
    stopping = lambda: any(  # noqa: E731
        e["kind"] == "node_status" and e["node"] == "research" and e["status"] == "stopping"
        for e in sink.events
    )
    result = run(CANCELLED_BACKGROUND, sink=sink, cancel=stopping)
    assert result.status == "cancelled"
    assert node(result, "research").reason == "stopped: foreground finished"
    assert result.requests_served == result.requests_requested


def test_a_cancel_before_the_foreground_finished_charges_the_background_for_what_it_never_served() -> None:
    # Stopped by the cancel, not by design: the workflow still asked it for its num_requests.
    sink = Recorder()
    result = run(CANCELLED_BACKGROUND, sink=sink, cancel=lambda: sink.kinds("chat").count("request_end") >= 1)
    assert result.status == "cancelled"
    research, chat = node(result, "research"), node(result, "chat")
    assert (research.status, research.reason) == ("stopped", "run cancelled")
    assert (chat.status, chat.reason) == ("stopped", "run cancelled")
    assert app(result, "research").requests_requested == 100
    assert app(result, "chat").requests_requested == 3
    assert result.requests_served < result.requests_requested == 103
    # What it never served counts as missed: its attainment is at most what it served of the 100.
    research_app = app(result, "research")
    assert research_app.requests_counted < 100
    assert research_app.slo_attainment <= research_app.requests_counted / 100


def test_a_background_node_the_foreground_finished_before_it_started_is_asked_for_nothing() -> None:
    result = run("""
slow: {type: Synthetic, steps: 1, step_ms: 1, num_requests: 100, load_time_s: 3}
bg: {type: Sleep, sleep_time: 0.05, num_requests: 100, slo: ["e2e<=10s"]}
fg: {type: Sleep, sleep_time: 0.05, num_requests: 1, slo: ["e2e<=10s"]}
workflows:
  loader: {uses: slow, background: true}
  research: {uses: bg, background: true, depend_on: [loader]}
  chat: {uses: fg}
""")
    assert result.status == "completed"
    research = node(result, "research")
    assert (research.status, research.reason, research.started_at) == (
        "stopped",
        "stopped: foreground finished before it could start",
        None,
    )
    assert app(result, "research").requests_requested == 0
    assert app(result, "loader").requests_requested == 0
    # Stopped by design, so no failed node: the run did all its work, and its 100 requests are no misses.
    assert not result.partial() and result.requests_served == result.requests_requested
    assert result.mean_attainment == 1.0


def test_a_node_that_served_everything_as_the_cancel_arrived_succeeded_without_the_cancel_reason() -> None:
    # The cancel arrives once the node reported its last request and its end, before its process
    # exited: it did all it was asked, so it succeeded, and no stop reason sticks to it.
    text = "a: {type: Sleep, sleep_time: 0.05, num_requests: 2}\n"
    sink = Recorder()
    result = run(text, sink=sink, cancel=lambda: "done" in sink.kinds("a"))
    assert result.status == "cancelled"
    assert (node(result, "a").status, node(result, "a").reason) == ("succeeded", None)
    statuses = [(e["status"], e["reason"]) for e in sink.events if e["kind"] == "node_status"]
    assert statuses[-1] == ("succeeded", None)
    final = final_progress(text, sink)["a"]
    assert (final["status"], final["reason"], final["done"], final["total"]) == ("succeeded", None, 2, 2)


def test_a_run_where_one_application_meets_every_slo_and_the_other_none_has_fairness_one_half() -> None:
    result = run("""
quick: {type: Sleep, sleep_time: 0.01, num_requests: 3, slo: ["e2e<=5s"]}
late: {type: Sleep, sleep_time: 0.05, num_requests: 3, slo: ["e2e<1ms"]}
""")
    assert [a.slo_attainment for a in result.applications] == [1.0, 0.0]
    assert result.fairness == pytest.approx(0.5)
    assert result.mean_attainment == 0.5


START_TOGETHER = """
quick: {type: Synthetic, steps: 1, step_ms: 1, num_requests: 2}
slow: {type: Synthetic, steps: 1, step_ms: 1, num_requests: 2, load_time_s: 1.5}
after: {type: Synthetic, steps: 1, step_ms: 1, num_requests: 1, load_time_s: 0.5}
workflows:
  quick: {uses: quick}
  slow: {uses: slow}
  after: {uses: after, depend_on: [quick]}
"""


def first_start(result: ResultDocument, name: str) -> float:
    return min(r.start for r in app(result, name).requests)


def test_start_together_holds_fast_loaders_until_every_node_started_with_them_has_loaded() -> None:
    result = run("start_together: true\n" + START_TOGETHER)
    assert result.workflow["start_together"] is True
    quick, slow, after = node(result, "quick"), node(result, "slow"), node(result, "after")
    assert abs(first_start(result, "quick") - first_start(result, "slow")) < 0.3
    assert first_start(result, "quick") >= slow.started_at + 1.5
    assert quick.start_wait_s == pytest.approx(1.5, abs=0.6) and slow.start_wait_s < 0.3
    # A node released later by the DAG is a group of its own: it waits only for its own load.
    assert after.started_at >= quick.finished_at and after.start_wait_s < 0.3


def test_without_start_together_each_node_begins_once_its_own_model_has_loaded() -> None:
    result = run(START_TOGETHER)
    assert first_start(result, "slow") - first_start(result, "quick") > 1.0
    assert all(n.start_wait_s is None for n in result.nodes)


def test_start_together_does_not_wait_for_a_node_that_failed_before_loading(tmp_path) -> None:
    garbage = tmp_path / "not-a-model.gguf"
    garbage.write_bytes(b"GGUF" + bytes(60))  # passes the preflight magic check, then fails to load
    result = run(
        f"""
start_together: true
ok: {{type: Synthetic, steps: 1, step_ms: 1, num_requests: 1}}
broken: {{type: Chatbot, model: {garbage}, device: cpu, num_requests: 1}}
""",
        time_limit_s=60,
    )
    assert node(result, "broken").status == "failed"
    assert node(result, "ok").status == "succeeded" and app(result, "ok").requests_counted == 1


def test_failed_node_skips_its_dependents_with_the_reason() -> None:
    result = run("""
bad: {type: Synthetic, fail_at_request: 0, steps: 1}
ok: {type: Sleep, sleep_time: 0.01}
workflows:
  a: {uses: bad}
  b: {uses: ok, depend_on: [a]}
  c: {uses: ok, depend_on: [b]}
  d: {uses: ok}
""")
    assert node(result, "a").status == "failed"
    assert "synthetic failure" in node(result, "a").reason
    assert node(result, "b").status == "skipped" and node(result, "b").reason == "dependency 'a' failed"
    assert node(result, "c").status == "skipped" and node(result, "c").reason == "dependency 'b' skipped"
    assert node(result, "d").status == "succeeded"


@pytest.mark.parametrize(("mode", "reason"), [("exit", "exited with code 3"), ("segfault", "SIGSEGV")])
def test_crashing_application_process_fails_its_node_but_not_the_runner(mode: str, reason: str) -> None:
    result = run(f"""
crash: {{type: Synthetic, fail_at_request: 1, fail_mode: {mode}, steps: 1, step_ms: 1}}
fine: {{type: Sleep, sleep_time: 0.2, num_requests: 2}}
""")
    crashed = node(result, "crash")
    assert crashed.status == "failed" and reason in crashed.reason
    # What was measured before the crash is kept.
    assert app(result, "crash").requests_total == 1
    assert node(result, "fine").status == "succeeded"


def test_a_traced_node_killed_by_a_signal_says_it_was_traced_and_an_untraced_one_does_not(tmp_path) -> None:
    crash = "{type: Synthetic, fail_at_request: 1, fail_mode: segfault, steps: 1, step_ms: 1}"
    result = run(f"traced: {crash}\nplain: {crash}", out_dir=tmp_path, kernel_trace=["traced"])
    traced, plain = node(result, "traced"), node(result, "plain")
    assert (
        traced.status == "failed"
        and "SIGSEGV" in traced.reason
        and "kernels were being traced" in traced.reason
    )
    assert plain.status == "failed" and "SIGSEGV" in plain.reason and "traced" not in plain.reason


def test_cancel_stops_everything_within_five_seconds_and_keeps_the_measurements() -> None:
    sink = Recorder()
    cancelled_at: list[float] = []

    def cancel() -> bool:
        # Cancel once "s" has measured 3 requests and "k" is inside its minute-long step.
        ready = sink.kinds("s").count("request_end") >= 3 and "load_end" in sink.kinds("k")
        if ready and not cancelled_at:
            cancelled_at.append(time.monotonic())
        return ready

    result = run(
        """
slow: {type: Sleep, sleep_time: 0.2, num_requests: 1000}
stuck: {type: Synthetic, steps: 1, step_ms: 60000}
later: {type: Sleep}
workflows:
  s: {uses: slow}
  k: {uses: stuck}
  l: {uses: later, depend_on: [s]}
""",
        sink=sink,
        cancel=cancel,
        stop_grace_s=1.0,
    )
    assert result.status == "cancelled" and result.reason == "run cancelled"
    assert time.monotonic() - cancelled_at[0] < 5.0
    assert node(result, "s").status == "stopped"
    assert node(result, "k").status == "stopped"  # ignored the stop request: terminated
    assert node(result, "l").status == "skipped"
    assert app(result, "s").requests_counted >= 3
    # Every request the workflow asked for counts: what was never served is missing from the total.
    s, k, later = app(result, "s"), app(result, "k"), app(result, "l")
    assert (s.requests_requested, k.requests_requested, later.requests_requested) == (1000, 5, 1)
    assert result.requests_requested == 1006
    assert result.requests_served == s.requests_counted + k.requests_counted + later.requests_counted
    assert result.partial()


def test_a_cancelled_run_whose_applications_served_nothing_attains_nothing() -> None:
    sink = Recorder()
    result = run(
        """
stuck: {type: Synthetic, steps: 1, step_ms: 60000, num_requests: 4, slo: ["e2e<=100s"]}
""",
        sink=sink,
        cancel=lambda: "load_end" in sink.kinds("stuck"),
        stop_grace_s=0.5,
    )
    assert result.status == "cancelled"
    stuck = app(result, "stuck")
    assert (stuck.requests_counted, stuck.requests_requested) == (0, 4)
    assert stuck.slo_attainment == 0.0 and result.mean_attainment == 0.0
    assert result.fairness is None


def test_time_limit_fails_the_run() -> None:
    result = run(
        "a: {type: Sleep, sleep_time: 0.1, num_requests: 1000}\n", time_limit_s=1.0, stop_grace_s=0.5
    )
    assert result.status == "failed" and "time limit" in result.reason


def test_gpu_unit_on_a_machine_without_gpu_fails_before_anything_starts() -> None:
    from benchmarks.platform import gpus

    if gpus():
        pytest.skip("this machine has a GPU")
    with pytest.raises(PreflightError) as info:
        run_workflow(load_yaml("a: {type: Synthetic, load: torch, device: gpu}\n"))
    assert "unit 'a' asks for device: gpu" in str(info.value)


def test_units_that_use_no_gpu_run_with_device_gpu_and_record_where_they_ran() -> None:
    from benchmarks.platform import gpus

    # The original ConsumerBench's sleep configs put Sleep units on the GPU.
    result = run(
        "s: {type: Sleep, sleep_time: 0, device: gpu}\n"
        "c: {type: Synthetic, steps: 1, step_ms: 1, num_requests: 1, device: gpu}\n"
    )
    expected = "gpu" if gpus() else "cpu"
    assert [(n.name, n.status, n.device) for n in result.nodes] == [
        ("s", "succeeded", expected),
        ("c", "succeeded", expected),
    ]


def test_slo_attainment_and_warmup_are_applied_to_recorded_requests() -> None:
    result = run("""
a:
  type: Synthetic
  steps: 1
  step_ms: 5
  num_requests: 4
  warmup_requests: 2
  slo: ["e2e<=10s", "step<1us"]
""")
    a = app(result, "a")
    assert a.requests_total == 6 and a.requests_counted == 4 and a.requests_requested == 4
    assert a.slo_attainment == 0.0 and a.requests_met == 0
    assert all(r.slo_met is False for r in a.requests)
    assert a.normalized_latency["e2e"] < 0.01
    assert result.mean_attainment == 0.0


def test_open_loop_arrivals_count_queueing_from_the_due_time() -> None:
    result = run("""
a:
  type: Sleep
  sleep_time: 0.2
  num_requests: 4
  arrival: {kind: fixed, rate: 20}
""")
    reqs = app(result, "a").requests
    gaps = [b.arrival - a.arrival for a, b in itertools.pairwise(reqs)]
    assert gaps == pytest.approx([0.05] * 3, abs=1e-6)
    # Requests queue behind each other: the last one waited for the three before it.
    assert reqs[-1].metrics["e2e"] > 0.6


def test_concurrency_runs_sessions_side_by_side_in_one_node() -> None:
    result = run("""
a:
  type: Sleep
  sleep_time: 0.3
  num_requests: 2
  concurrency: 3
""")
    a = app(result, "a")
    assert node(result, "a").status == "succeeded"
    assert a.requests_counted == 6
    assert sorted(r.info["session"] for r in a.requests) == [0, 0, 1, 1, 2, 2]
    # Three sessions of two 0.3 s requests each overlap: the node took about 0.6 s, not 1.8 s.
    first = min(r.start for r in a.requests)
    last = max(r.end for r in a.requests)
    assert last - first < 1.2
    assert a.loaded["sessions"] == 3


def test_a_failing_session_fails_its_node_with_the_session_named() -> None:
    result = run("a: {type: Synthetic, steps: 1, step_ms: 1, fail_at_request: 1, concurrency: 2}\n")
    assert node(result, "a").status == "failed"
    assert node(result, "a").reason.startswith("RuntimeError: session 0: RuntimeError: synthetic failure")


def test_app_process_entry_does_not_load_numpy() -> None:
    # Seen on the H200 (docs/results/schedulers-h200.md): with numpy loaded first, llama.cpp's CUDA
    # build segfaults while loading a model; llama_cpp must be the first to load its native libraries.
    import subprocess
    import sys

    code = "import sys, benchmarks.runner.process, benchmarks.apps; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


class ThreadProbe:
    """A stand-in driver that notes the thread of each call (the session threading is under test)."""

    def __init__(self, log: list[tuple[str, int, int]], k: int, fail: str | None = None) -> None:
        self.log, self.k, self.fail = log, k, fail

    def load(self) -> dict[str, Any]:
        self.log.append(("load", self.k, threading.get_ident()))
        if self.fail == "load":
            raise ValueError("no such model")
        return {"model": f"m{self.k}"}

    def run(self) -> None:
        self.log.append(("run", self.k, threading.get_ident()))


def test_each_session_loads_and_runs_in_its_own_thread_and_requests_wait_for_every_load() -> None:
    log: list[tuple[str, int, int]] = []
    drivers = [ThreadProbe(log, k) for k in range(3)]
    seen: list[list[dict[str, Any]]] = []

    def ready(loaded: list[dict[str, Any]]) -> None:
        seen.append(loaded)
        log.append(("ready", -1, threading.get_ident()))

    _run_sessions(drivers, ready)
    assert seen == [[{"model": "m0"}, {"model": "m1"}, {"model": "m2"}]]
    kinds = [kind for kind, _, _ in log]
    assert kinds.index("ready") == 3 and sorted(kinds[:3]) == ["load"] * 3 and kinds[4:].count("run") == 3
    threads = {k: {t for kind, j, t in log if j == k} for k in range(3)}
    assert all(len(t) == 1 for t in threads.values())  # load and run of a session: one thread
    assert len(set().union(*threads.values())) == 3 and threading.get_ident() not in set().union(
        *threads.values()
    )


def test_a_session_that_fails_to_load_fails_the_node_before_any_request() -> None:
    log: list[tuple[str, int, int]] = []
    drivers = [ThreadProbe(log, 0), ThreadProbe(log, 1, fail="load")]
    with pytest.raises(RuntimeError, match="session 1: ValueError: no such model"):
        _run_sessions(drivers, lambda loaded: None)
    assert "run" not in [kind for kind, _, _ in log]


def test_a_stop_while_waiting_to_start_runs_no_request() -> None:
    log: list[tuple[str, int, int]] = []

    def stopped(loaded: list[dict[str, Any]]) -> None:
        raise AppStopped

    with pytest.raises(AppStopped):
        _run_sessions([ThreadProbe(log, 0), ThreadProbe(log, 1)], stopped)
    assert [kind for kind, _, _ in log] == ["load", "load"]


@pytest.mark.timeout(60)
def test_a_start_together_member_killed_while_it_waits_for_the_go_does_not_hang_the_run() -> None:
    # "quick" waits for the go while "slow" loads for 30 s; with no stop grace the cancel kills both at
    # once, "quick" almost surely inside its wait. Releasing a killed waiter must not block the runner.
    started = time.monotonic()
    result = run(
        "start_together: true\n"
        "quick: {type: Synthetic, steps: 1, step_ms: 1, num_requests: 2}\n"
        "slow: {type: Synthetic, steps: 1, step_ms: 1, num_requests: 2, load_time_s: 30}\n",
        cancel=lambda: time.monotonic() - started > 2.0,
        stop_grace_s=0.0,
    )
    assert result.status == "cancelled"
    assert [(n.name, n.status) for n in result.nodes] == [("quick", "stopped"), ("slow", "stopped")]
    assert all(not a.requests for a in result.applications)


def test_each_node_records_the_accelerator_it_really_used_and_the_summary_shows_it() -> None:
    from benchmarks.cli import summary_table

    result = run(
        "t: {type: Synthetic, load: torch, matrix_size: 8, steps: 1, num_requests: 1, device: cpu}\n"
    )
    assert app(result, "t").loaded["accelerator"] == "cpu"
    assert summary_table(result).splitlines()[-1] == "ran on: t: cpu"


def test_a_node_on_the_cpu_sees_no_gpu_and_keeps_its_schedulers_environment():
    from benchmarks.runner.dag import node_env

    mps = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"}
    assert node_env(mps, "cpu") == {**mps, "CUDA_VISIBLE_DEVICES": ""}
    assert node_env(mps, "gpu") == mps


def test_a_traced_node_without_a_gpu_runs_and_says_why_no_kernel_trace_was_taken(tmp_path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    sink = Recorder()
    result = run(
        "a: {type: Sleep, sleep_time: 0.01, num_requests: 2}", sink=sink, out_dir=tmp_path, kernel_trace=["a"]
    )
    assert node(result, "a").status == "succeeded" and node(result, "a").kernel_trace is None
    logs = [e["message"] for e in sink.events if e["kind"] == "log" and e["node"] == "a"]
    assert logs == ["no CUDA device in this process: no kernel trace"]
    assert not list(tmp_path.rglob("kernels.csv.gz"))


def test_a_kernel_trace_of_an_unknown_node_or_without_a_bundle_is_refused_before_the_run(tmp_path) -> None:
    with pytest.raises(ValueError, match="kernel_trace: no node named 'b', 'c' in the workflow"):
        run("a: {type: Sleep, sleep_time: 0.01}", out_dir=tmp_path, kernel_trace=["c", "a", "b"])
    with pytest.raises(ValueError, match="kernel_trace needs a bundle directory"):
        run("a: {type: Sleep, sleep_time: 0.01}", kernel_trace=["a"])
    assert not list(tmp_path.iterdir())


@pytest.mark.gpu
def test_a_traced_node_on_the_gpu_writes_its_kernels_inside_its_requests_and_the_result_names_the_file(
    tmp_path,
) -> None:
    from benchmarks.monitor.kernels import read_trace

    result = run(
        """
mm: {type: Synthetic, load: torch, device: gpu, steps: 20, matrix_size: 1024, num_requests: 3}
idle: {type: Sleep, sleep_time: 0.01, num_requests: 1}
""",
        out_dir=tmp_path,
        kernel_trace=["mm"],
    )
    traced = node(result, "mm").kernel_trace
    assert traced == "artifacts/mm/kernels.csv.gz" and node(result, "idle").kernel_trace is None
    kernels = list(read_trace(tmp_path / traced))
    requests = app(result, "mm").requests
    inside = [k for k in kernels if any(r.start - 0.005 <= k.start <= r.end + 0.005 for r in requests)]
    assert kernels and len(inside) >= 0.9 * len(kernels)
