"""benchmarks.perf.kernel_slices: a real run's requests, accounted for against kernel traces laid out
by hand (this machine has no GPU to trace), so that every figure has a known answer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.files import bundle_path
from benchmarks.monitor.kernels import TRACE_FILE, Kernel, write_trace
from benchmarks.perf import kernel_slices
from benchmarks.results import load_bundle, write_bundle
from benchmarks.runner import run_workflow
from benchmarks.spec.load import load_yaml

MS = 1e-3


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of two Sleep nodes side by side; 'a' has two requests of 0.2 s."""
    out = tmp_path_factory.mktemp("run")
    workflow = load_yaml(
        """
a: {type: Sleep, sleep_time: 0.2, num_requests: 2}
b: {type: Sleep, sleep_time: 0.1, num_requests: 1}
""",
        name="t",
    )
    write_bundle(run_workflow(workflow, out_dir=out), out)
    return out


def lay_out(bundle: Path) -> None:
    """Within each of a's requests (s = its start): a's kernels at s+10, s+50 and s+100 ms, 10 ms each,
    launched at s+5, s+40 and s+95 ms; b's at s+25 ms for 20 ms (between a's first two) and at s+55 ms
    for 10 ms (half over a's second)."""
    a_rows: list[tuple[float, float, float | None, int, str]] = []
    b_rows: list[tuple[float, float, float | None, int, str]] = []
    for req in next(x for x in load_bundle(bundle).applications if x.name == "a").requests:
        s = req.start
        a_rows += [
            (s + t * MS, 10_000.0, s + launch * MS, 7, "own") for t, launch in ((10, 5), (50, 40), (100, 95))
        ]
        b_rows += [(s + 25 * MS, 20_000.0, None, 7, "other"), (s + 55 * MS, 10_000.0, None, 7, "other")]
    write_trace(bundle_path(bundle / "artifacts", "a") / TRACE_FILE, a_rows)
    write_trace(bundle_path(bundle / "artifacts", "b") / TRACE_FILE, b_rows)


def without_trace(bundle: Path, copy: Path, node: str) -> Path:
    """Return a copy of ``bundle`` at ``copy`` without ``node``'s trace."""
    shutil.copytree(bundle, copy)
    (bundle_path(copy / "artifacts", node) / TRACE_FILE).unlink()
    return copy


def test_each_request_is_split_into_own_time_waits_turns_behind_others_and_idle(bundle: Path) -> None:
    lay_out(bundle)
    acc = kernel_slices.account(bundle, "a")
    assert acc["traced"] == ["a", "b"] and len(acc["requests"]) == 2 and acc["coverage"] == 1.0
    assert acc["requests_without_kernels"] == 0
    for row in acc["requests"]:
        latency = row["latency_s"]
        assert row["kernels"] == 3
        assert row["own_gpu_s"] == pytest.approx(30 * MS)
        assert row["span_s"] == pytest.approx(100 * MS)
        # Due from launch to start: 5-10, 40-50 and 95-100 ms; b ran during 40-45 of them.
        assert row["waiting_s"] == pytest.approx(20 * MS) and row["waiting_others_s"] == pytest.approx(5 * MS)
        assert row["waiting_per_kernel_s"] == pytest.approx(20 * MS / 3)
        # Outside a's kernels in its window (0-10, 20-50, 60-100, 110 ms-end): b ran 25-45 and 60-65.
        assert row["behind_others_s"] == pytest.approx(25 * MS)
        assert row["idle_s"] == pytest.approx(latency - 30 * MS - 25 * MS)
        assert row["slices"] == 2 and max(row["slice_lengths_s"]) == pytest.approx(20 * MS)
        assert row["behind_by_node_s"] == {"b": pytest.approx(25 * MS)}
        assert row["concurrent_s"] == pytest.approx(5 * MS)
        assert row["latency_s"] == pytest.approx(0.2, abs=0.05)
    summary = kernel_slices.summarize(acc, slo_s=1.0)
    # The p99 of 2 requests by nearest rank is the slower one.
    worst = max(r["latency_s"] for r in acc["requests"])
    assert summary["headroom"] == pytest.approx((1.0 - (worst - 25 * MS)) / (25 * MS))
    assert summary["slice_s"]["max"] == pytest.approx(20 * MS)


def test_the_command_prints_a_column_per_run_and_writes_every_request(
    bundle: Path, tmp_path: Path, capsys
) -> None:
    lay_out(bundle)
    out, md = tmp_path / "slices.json", tmp_path / "slices.md"
    args = ["--node", "a", "--slo", "1", "--run", f"x={bundle}", "--json", str(out), "--md", str(md)]
    assert kernel_slices.main(args) == 0
    text = capsys.readouterr().out
    assert "behind others p50 / p99 (ms)" in text and "25.0 / 25.0" in text and "b 25.0" in text
    # 20 ms of waiting over 3 kernels, in microseconds.
    assert "| waiting a kernel p50 / p99 (us) | 6666.7 / 6666.7 |" in md.read_text()
    assert "| behind others p50 / p99 (ms) | 25.0 / 25.0 |" in md.read_text()
    saved = json.loads(out.read_text())
    assert saved["node"] == "a" and len(saved["requests"]["x"]) == 2
    # A request's slices as their median, p99 and longest, not each one.
    assert "slice_lengths_s" not in saved["requests"]["x"][0]
    assert saved["requests"]["x"][0]["slice_s"]["max"] == pytest.approx(20 * MS)
    assert saved["requests"]["x"][0]["behind_others_s"] == pytest.approx(25 * MS)


def test_a_run_without_its_trace_is_named_and_the_others_are_still_accounted_for(
    bundle: Path, tmp_path: Path, capsys
) -> None:
    lay_out(bundle)
    untraced = without_trace(bundle, tmp_path / "untraced", "a")
    assert kernel_slices.main(["--node", "a", "--run", f"x={bundle}", "--run", f"y={untraced}"]) == 1
    out, err = capsys.readouterr()
    assert "y: " in err and "'a' has no kernel trace (run it with --kernel-trace a)" in err
    assert out.splitlines()[0].split() == ["figure", "x"]
    assert kernel_slices.main(["--node", "zz", "--run", f"x={bundle}"]) == 1
    assert "no application 'zz' in this run" in capsys.readouterr().err


def test_interval_helpers_on_edges_touching_windows_and_streams() -> None:
    ivs = kernel_slices.Intervals([(0.0, 1.0), (1.0, 2.0), (5.0, 6.0), (3.0, 3.0)])
    assert ivs.items == [(0.0, 2.0), (5.0, 6.0)]  # touching ones joined, empty one dropped
    assert ivs.within(2.0, 5.0) == [] and ivs.within(1.5, 5.5) == [(1.5, 2.0), (5.0, 5.5)]
    assert kernel_slices.complement([(1.0, 2.0), (3.0, 4.0)], 0.0, 3.5) == [(0.0, 1.0), (2.0, 3.0)]
    assert kernel_slices.complement([], 0.0, 1.0) == [(0.0, 1.0)]
    kernels = [
        Kernel(1.0, 2.0, 0.5, 7, "k"),  # due at its launch
        Kernel(2.5, 3.0, 1.5, 7, "k"),  # launched during the first: due at its end (2.0)
        Kernel(2.2, 2.4, 2.2, 9, "k"),  # another stream, started at once
        Kernel(4.0, 5.0, None, 7, "k"),  # launch unknown
    ]
    assert kernel_slices.waits(kernels) == [(0.5, 1.0), (2.0, 2.5), (2.2, 2.2), None]
    assert [kernel_slices.nearest_rank(list(range(n)), 99) for n in (1, 2, 50, 100, 101)] == [
        0,
        1,
        49,
        98,
        99,
    ]


def test_the_others_back_to_back_kernels_in_one_hole_are_one_turn(bundle: Path) -> None:
    lay_out(bundle)
    # b's first turn as 10 kernels of 1.9 ms, 0.1 ms apart (25-45 ms), instead of one of 20 ms.
    rows: list[tuple[float, float, float | None, int, str]] = []
    for req in next(x for x in load_bundle(bundle).applications if x.name == "a").requests:
        rows += [(req.start + (25 + 2 * i) * MS, 1_900.0, None, 7, "other") for i in range(10)]
        rows.append((req.start + 55 * MS, 10_000.0, None, 7, "other"))
    write_trace(bundle_path(bundle / "artifacts", "b") / TRACE_FILE, sorted(rows))
    for row in kernel_slices.account(bundle, "a")["requests"]:
        assert row["slices"] == 2 and max(row["slice_lengths_s"]) == pytest.approx(19.9 * MS)
        assert row["behind_others_s"] == pytest.approx(19 * MS + 5 * MS)


def test_a_gpu_node_without_its_trace_blanks_the_figures_about_the_others(
    bundle: Path, tmp_path: Path, capsys
) -> None:
    lay_out(bundle)
    # b as it is on a GPU machine (this one runs the Sleep nodes on the CPU), its trace never written:
    # a process killed before it wrote it. Its turns would otherwise count as a's idle time.
    blind = without_trace(bundle, tmp_path / "blind", "b")
    result = json.loads((blind / "result.json").read_text())
    for item in (*result["applications"], *result["nodes"]):
        if item["name"] == "b":
            item["device"] = "gpu"
    (blind / "result.json").write_text(json.dumps(result))
    acc = kernel_slices.account(blind, "a")
    assert acc["traced"] == ["a"] and acc["untraced"] == ["b"]
    summary = kernel_slices.summarize(acc, slo_s=1.0)
    for key in ("waiting_others_s", "behind_others_s", "idle_s", "concurrent_s", "slices"):
        assert summary[key] == {"p50": None, "p99": None}, key
    assert summary["headroom"] is None and summary["behind_by_node_s"] == {}
    assert summary["slice_s"] == {"p50": None, "p99": None, "max": None}
    # What a's own kernels tell stays.
    assert summary["own_gpu_s"]["p50"] == pytest.approx(30 * MS)
    assert summary["waiting_s"]["p50"] == pytest.approx(20 * MS)
    args = ["--node", "a", "--slo", "1", "--run", f"x={bundle}", "--run", f"y={blind}"]
    assert kernel_slices.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.startswith("GPU nodes without a trace"))
    assert row.split()[-2:] == ["none", "b"]
    behind = next(line for line in lines if line.startswith("behind others"))
    assert behind.split()[-6:] == ["25.0", "/", "25.0", "-", "/", "-"]


def test_the_others_are_listed_with_their_numbers_in_order(bundle: Path) -> None:
    lay_out(bundle)
    acc = kernel_slices.account(bundle, "a")
    for row in acc["requests"]:
        row["behind_by_node_s"] = {"busy-10": 0.01, "busy-2": 0.02, "busy-1": 0.03}
    summary = kernel_slices.summarize(acc, slo_s=1.0)
    assert list(summary["behind_by_node_s"]) == ["busy-1", "busy-2", "busy-10"]
