"""The partition scheduler on a CPU machine: share arithmetic, client environment, clear failures,
and the private daemon's life cycle against a stand-in for ``nvidia-cuda-mps-control`` (no GPU here)."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from benchmarks.cli import main as cli_main
from benchmarks.platform import gpus
from benchmarks.runner import run_workflow
from benchmarks.schedulers import get_scheduler
from benchmarks.schedulers.base import NodePlan, SchedulerError
from benchmarks.schedulers.mps import MpsDaemon, client_env, memory_limit_value, partition_shares
from benchmarks.schedulers.mps_check import ProductCheck, ShareCheck
from benchmarks.schedulers.partition import PartitionParams, PartitionScheduler
from benchmarks.spec.load import load_yaml
from benchmarks.spec.model import Workflow

SYNTH = "{type: Synthetic, steps: 1, step_ms: 1, num_requests: 1%s}"


def workflow(units: dict[str, str], nodes: str) -> Workflow:
    text = "".join(f"{name}: {SYNTH % extra}\n" for name, extra in units.items())
    return load_yaml(text + "workflows:\n" + textwrap.indent(textwrap.dedent(nodes).strip(), "  "), name="t")


def gpu_plans(wf: Workflow, cpu: tuple[str, ...] = ()) -> dict[str, NodePlan]:
    return {
        name: NodePlan(
            name,
            node.uses,
            "cpu" if name in cpu else "gpu",
            wf.unit_of(name).priority,
            wf.unit_of(name).mps,
            node.background,
        )
        for name, node in wf.nodes.items()
    }


# -- share arithmetic ------------------------------------------------------------------------------


def test_nodes_without_a_share_split_100_percent_equally_when_they_run_together() -> None:
    wf = workflow({"a": "", "b": "", "c": ""}, "x: {uses: a}\ny: {uses: b}\nz: {uses: c}")
    assert partition_shares(wf, gpu_plans(wf)) == {"x": 33, "y": 33, "z": 33}


def test_explicit_shares_are_kept_and_the_rest_is_split_among_the_others() -> None:
    wf = workflow({"a": ", mps: 50", "b": "", "c": ""}, "x: {uses: a}\ny: {uses: b}\nz: {uses: c}")
    assert partition_shares(wf, gpu_plans(wf)) == {"x": 50, "y": 25, "z": 25}


def test_nodes_that_run_one_after_the_other_each_get_the_whole_gpu() -> None:
    wf = workflow({"a": "", "b": ""}, "x: {uses: a}\ny: {uses: b, depend_on: [x]}")
    assert partition_shares(wf, gpu_plans(wf)) == {"x": 100, "y": 100}


def test_a_background_node_shares_with_every_node_that_runs_after_it() -> None:
    wf = workflow(
        {"a": "", "b": "", "c": ""},
        "bg: {uses: a, background: true}\nx: {uses: b, depend_on: [bg]}\ny: {uses: c, depend_on: [x]}",
    )
    assert partition_shares(wf, gpu_plans(wf)) == {"bg": 50, "x": 50, "y": 50}


def test_cpu_nodes_get_no_share_and_leave_the_gpu_to_the_others() -> None:
    wf = workflow({"a": "", "b": ""}, "x: {uses: a}\ny: {uses: b}")
    assert partition_shares(wf, gpu_plans(wf, cpu=("y",))) == {"x": 100}


def test_shares_over_100_percent_at_once_are_refused_naming_the_nodes() -> None:
    wf = workflow({"a": ", mps: 70", "b": ", mps: 40"}, "x: {uses: a}\ny: {uses: b}")
    with pytest.raises(SchedulerError, match=r"sum to 110 % \(> 100 %\): x, y"):
        partition_shares(wf, gpu_plans(wf))


def test_no_room_left_for_nodes_without_a_share_is_refused_naming_them() -> None:
    wf = workflow({"a": ", mps: 100", "b": ""}, "x: {uses: a}\ny: {uses: b}")
    with pytest.raises(SchedulerError, match="no share is left for y"):
        partition_shares(wf, gpu_plans(wf))


def test_a_zero_share_is_refused() -> None:
    wf = workflow({"a": ", mps: 0"}, "x: {uses: a}")
    with pytest.raises(SchedulerError, match="x have mps: 0"):
        partition_shares(wf, gpu_plans(wf))


# -- client environment ----------------------------------------------------------------------------


def test_client_env_points_at_the_daemon_and_carries_share_and_memory_limit() -> None:
    env = client_env({"CUDA_MPS_PIPE_DIRECTORY": "/p", "CUDA_MPS_LOG_DIRECTORY": "/l"}, 33, "8G")
    assert env == {
        "CUDA_MPS_PIPE_DIRECTORY": "/p",
        "CUDA_MPS_LOG_DIRECTORY": "/l",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "33",
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=8G",
    }
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" not in client_env({}, 50, None)


@pytest.mark.parametrize(
    ("given", "value"), [("8G", "0=8G"), ("8GiB", "0=8G"), ("512mb", "0=512MB"), ("0=8G,1=4G", "0=8G,1=4G")]
)
def test_memory_limits_are_written_the_way_mps_reads_them(given: str, value: str) -> None:
    assert memory_limit_value(given) == value


def test_a_memory_limit_mps_would_not_understand_is_refused() -> None:
    with pytest.raises(SchedulerError, match="'lots' is not understood"):
        memory_limit_value("lots")


# -- MPS unavailable: a clear error, never a silent greedy run --------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.kinds: list[str] = []

    def on_event(self, event: Any) -> None:
        self.kinds.append(event["kind"])


def test_a_run_whose_nodes_are_all_on_the_cpu_fails_before_any_process_starts() -> None:
    wf = workflow({"a": ", device: cpu"}, "x: {uses: a}")
    sink = Recorder()
    with pytest.raises(SchedulerError, match="every node of this run is on the CPU"):
        run_workflow(wf, scheduler="partition", sink=sink)
    assert "process" not in sink.kinds


def test_missing_mps_control_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    wf = workflow({"a": ""}, "x: {uses: a}")
    scheduler = PartitionScheduler()
    try:
        with pytest.raises(
            SchedulerError, match="MPS is not available here: 'nvidia-cuda-mps-control' is not on PATH"
        ):
            scheduler.start(wf, gpu_plans(wf))
    finally:
        scheduler.stop()
    assert scheduler.daemon is None


def test_mps_without_a_gpu_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, fake_mps: Path) -> None:
    if gpus():
        pytest.skip("a GPU is visible here")
    wf = workflow({"a": ""}, "x: {uses: a}")
    with pytest.raises(SchedulerError, match="needs an NVIDIA GPU, and NVML sees none"):
        PartitionScheduler().start(wf, gpu_plans(wf))


def test_the_cli_reports_the_partition_error_and_exits_with_usage(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "wf.yml"
    path.write_text("a: {type: Synthetic, device: cpu, num_requests: 1}\nworkflows:\n  x: {uses: a}\n")
    assert cli_main(["run", str(path), "--scheduler", "partition", "--out", str(tmp_path / "o")]) == 2
    assert "partition: every node of this run is on the CPU" in capsys.readouterr().err


# -- the daemon's life cycle, against a stand-in binary ----------------------------------------------


@pytest.fixture
def stand_in_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one mock of the partitioned runs here: a GPU, which this machine does not have; the stand-in
    daemon reports this test's children as its clients."""
    monkeypatch.setattr(
        "benchmarks.schedulers.partition.gpus", lambda: [{"index": 0, "name": "stand-in GPU"}]
    )
    monkeypatch.setattr("benchmarks.runner.checks.has_gpu", lambda: True)
    monkeypatch.setenv("FAKE_MPS_CLIENTS_OF", str(os.getpid()))


@pytest.fixture(autouse=True)
def _no_checked_shares(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no share checked in this process (partition caches the passed ones)."""
    monkeypatch.setattr("benchmarks.schedulers.partition._PASSED", {})


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_daemon_runs_in_private_directories_answers_and_quits(fake_mps: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("FAKE_MPS_CLIENTS", "101,202")
    daemon = MpsDaemon(str(fake_mps))
    daemon.start()
    try:
        root = daemon.root
        assert root is not None and (root / "pipe" / "control").exists()
        assert daemon.env == {
            "CUDA_MPS_PIPE_DIRECTORY": str(root / "pipe"),
            "CUDA_MPS_LOG_DIRECTORY": str(root / "log"),
        }
        assert daemon.server_pids() == [4242]
        assert daemon.client_pids() == {101, 202}
        (pid,) = daemon._own_processes()
    finally:
        started = time.monotonic()
        daemon.stop(timeout_s=10)
    assert time.monotonic() - started < 5, "a daemon that quits is not waited for until the timeout"
    assert not alive(pid)
    assert not root.exists() and daemon.root is None


def test_a_daemon_that_ignores_quit_is_killed_when_the_run_ends(fake_mps: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("FAKE_MPS", "stubborn")
    daemon = MpsDaemon(str(fake_mps))
    daemon.start()
    try:
        (pid,) = daemon._own_processes()
    finally:
        daemon.stop(timeout_s=0.3)
    time.sleep(0.1)
    assert not alive(pid)


def test_a_daemon_that_never_opens_its_pipe_fails_the_start_and_is_cleaned_up(
    fake_mps: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("FAKE_MPS", "mute")
    daemon = MpsDaemon(str(fake_mps))
    with pytest.raises(SchedulerError, match=r"did not open its control pipe within 0\.5 s"):
        daemon.start(ready_timeout_s=0.5)
    assert daemon.root is None
    assert not [
        p for p in _fake_daemons() if str(fake_mps).encode() in Path(f"/proc/{p}/cmdline").read_bytes()
    ]


def _fake_daemons_of(binary: Path) -> list[int]:
    """Return the live stand-in daemons started from ``binary``."""
    return [p for p in _fake_daemons() if str(binary).encode() in Path(f"/proc/{p}/cmdline").read_bytes()]


def _fake_daemons() -> list[int]:
    """Return the live stand-in daemons (``--serve``) on this machine."""
    pids = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if b"--serve" in (entry / "cmdline").read_bytes() and alive(int(entry.name)):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def test_a_daemon_that_fails_to_start_reports_what_it_said(fake_mps: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("FAKE_MPS", "fail")
    daemon = MpsDaemon(str(fake_mps))
    try:
        with pytest.raises(SchedulerError, match=r"failed to start .*already running"):
            daemon.start()
    finally:
        daemon.stop()
    assert daemon.root is None


def test_a_partitioned_run_checks_its_processes_are_mps_clients_and_stops_the_daemon(
    fake_mps: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The one mock: a GPU that this machine does not have. Processes, daemon and checks are real.
    fake_gpu = [{"index": 0, "name": "stand-in GPU"}]
    monkeypatch.setattr("benchmarks.schedulers.partition.gpus", lambda: fake_gpu)
    monkeypatch.setattr("benchmarks.runner.checks.has_gpu", lambda: True)
    monkeypatch.setenv("FAKE_MPS_CLIENTS_OF", str(os.getpid()))
    wf = load_yaml(
        "a: {type: Synthetic, steps: 20, step_ms: 50, num_requests: 1, mps: 60, memory_limit: 2GiB}\n"
        "b: {type: Synthetic, steps: 20, step_ms: 50, num_requests: 1}\n"
        "workflows:\n  x: {uses: a}\n  y: {uses: b}\n",
        name="t",
    )
    scheduler = PartitionScheduler(PartitionParams(memory_limit="4G"))
    result = run_workflow(wf, scheduler=scheduler)
    assert [n.status for n in result.nodes] == ["succeeded", "succeeded"]
    described = result.scheduler
    assert described["shares_percent"] == {"x": 60, "y": 40}
    assert described["memory_limit"] == "4G"
    # A unit's own cap wins over the scheduler's.
    assert described["memory_limits"] == {"x": "2048M", "y": "4G"}
    assert described["params"] == {"memory_limit": "4G", "stop_timeout_s": 10.0}
    assert all(isinstance(pid, int) and pid > 0 for pid in described["mps_clients"].values())
    assert described["mps_servers"] == [4242]
    # Each share's product check ran in an MPS client process first; this machine has no CUDA device.
    if not torch.cuda.is_available():  # here the check's process finds no GPU
        assert described["product_check"] == {
            share: {
                "status": "not run",
                "sms": None,
                "wrong": [],
                "reason": "not run: torch sees no CUDA device",
                "cached": False,
            }
            for share in ("40", "60")
        }
    assert scheduler.daemon is None and not _fake_daemons_of(fake_mps)


@pytest.mark.parametrize(
    ("status", "said"),
    [
        ("failed", r"at 50 % of the SMs \(66 SMs\), the share of x, y, matrix products .* come out wrong"),
        ("error", r"products under MPS at 50 % of the SMs, the share of x, y, could not run \(it broke\)"),
    ],
)
def test_a_share_whose_products_come_out_wrong_or_cannot_be_checked_refuses_the_run(
    fake_mps: Path, stand_in_gpu: None, monkeypatch: pytest.MonkeyPatch, status: str, said: str
) -> None:
    # The mocks: a GPU, and one whose products go wrong at 50 % (an H100's at 33 %: mps_check's docstring)
    # or whose check breaks there.
    wrong = ProductCheck("float16", 2, 9216, 1536, wrong=2048, unwritten=2048, max_rel_err=0.0)
    seen: list[tuple[str, int]] = []

    def check(env: dict[str, str], share: int) -> ShareCheck:
        seen.append((env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], share))
        if status == "error":
            return ShareCheck(share, "error", reason="it broke")
        return ShareCheck(share, "failed", 66, [wrong])

    monkeypatch.setattr("benchmarks.schedulers.partition.check_share", check)
    wf = load_yaml(
        "a: {type: Synthetic, steps: 2, step_ms: 5, num_requests: 1}\n"
        "b: {type: Synthetic, steps: 2, step_ms: 5, num_requests: 1}\n"
        "workflows:\n  x: {uses: a}\n  y: {uses: b}\n",
        name="t",
    )
    scheduler = PartitionScheduler()
    with pytest.raises(SchedulerError, match=said):
        run_workflow(wf, scheduler=scheduler)
    assert seen == [("50", 50)]
    assert scheduler.daemon is None and not _fake_daemons_of(fake_mps)


def test_a_share_that_passed_is_not_checked_again_in_the_same_process(
    fake_mps: Path, stand_in_gpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sweep runs many partitioned runs in one process; each would pay ~8 s a share. Mocks: a GPU, and
    # its products right at every share.
    seen: list[int] = []

    def check(env: dict[str, str], share: int) -> ShareCheck:
        seen.append(share)
        return ShareCheck(share, "passed", 66)

    monkeypatch.setattr("benchmarks.schedulers.partition.check_share", check)
    wf = load_yaml(
        "a: {type: Synthetic, steps: 2, step_ms: 5, num_requests: 1, mps: 25}\n"
        "b: {type: Synthetic, steps: 2, step_ms: 5, num_requests: 1}\n"
        "c: {type: Synthetic, steps: 2, step_ms: 5, num_requests: 1, mps: 25}\n"
        "workflows:\n  x: {uses: a}\n  y: {uses: b}\n  z: {uses: c}\n",
        name="t",
    )
    first = run_workflow(wf, scheduler=PartitionScheduler())
    second = run_workflow(wf, scheduler=PartitionScheduler())
    assert seen == [25, 50]
    for result, cached in ((first, False), (second, True)):
        assert result.scheduler["product_check"] == {
            share: {"status": "passed", "sms": 66, "wrong": [], "reason": "", "cached": cached}
            for share in ("25", "50")
        }


def test_the_share_check_runs_before_the_run_clock_starts(
    fake_mps: Path, stand_in_gpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check takes seconds a share on a GPU: none of it may count as the run's time (or its energy,
    # or its time limit). Mocks: a GPU, and a check that takes 1 s.

    def slow_check(env: dict[str, str], share: int) -> ShareCheck:
        time.sleep(1.0)
        return ShareCheck(share, "passed", 66)

    monkeypatch.setattr("benchmarks.schedulers.partition.check_share", slow_check)
    wf = load_yaml(
        "a: {type: Synthetic, steps: 2, step_ms: 5, num_requests: 1}\nworkflows:\n  x: {uses: a}\n", name="t"
    )
    result = run_workflow(wf, scheduler=PartitionScheduler())
    (node,) = result.nodes
    assert node.status == "succeeded" and node.started_at is not None
    assert node.started_at < 0.9, node.started_at


def test_credit_mps_admits_by_credit_inside_mps_shares(
    fake_mps: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_gpu = [{"index": 0, "name": "stand-in GPU"}]
    monkeypatch.setattr("benchmarks.schedulers.partition.gpus", lambda: fake_gpu)
    monkeypatch.setattr("benchmarks.runner.checks.has_gpu", lambda: True)
    monkeypatch.setenv("FAKE_MPS_CLIENTS_OF", str(os.getpid()))
    wf = load_yaml(
        "a: {type: Synthetic, steps: 20, step_ms: 50, num_requests: 1, priority: high}\n"
        "b: {type: Synthetic, steps: 20, step_ms: 50, num_requests: 1, priority: low}\n"
        "workflows:\n  x: {uses: a}\n  y: {uses: b}\n",
        name="t",
    )
    scheduler = get_scheduler("credit-mps")
    result = run_workflow(wf, scheduler=scheduler)
    described = result.scheduler
    assert described["name"] == "credit-mps"
    assert described["mps"]["shares_percent"] == {"x": 50, "y": 50}
    assert all(described["mps"]["mps_clients"].values())
    assert described["apps"]["x"]["reserved"] == 20 and described["apps"]["y"]["steps"] == 20
    assert not _fake_daemons_of(fake_mps)


def test_credit_mps_without_mps_fails_like_partition() -> None:
    wf = workflow({"a": ", device: cpu"}, "x: {uses: a}")
    with pytest.raises(SchedulerError, match="every node of this run is on the CPU"):
        run_workflow(wf, scheduler="credit-mps")
