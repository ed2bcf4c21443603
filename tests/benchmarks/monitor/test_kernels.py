"""Kernel traces (benchmarks.monitor.kernels): the file format, and what a process without a GPU does."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from benchmarks.monitor.kernels import Kernel, KernelTrace, KernelTraceSpec, is_work, read_trace, write_trace


def test_a_trace_reads_back_in_start_order_with_its_end_from_the_duration(tmp_path: Path) -> None:
    path = tmp_path / "n" / "kernels.csv.gz"
    write_trace(path, [(1.5, 250.0, 1.49, 7, "gemm<float, 128>"), (2.0, 1000.0, None, 13, "Memcpy HtoD")])
    assert list(read_trace(path)) == [
        Kernel(1.5, pytest.approx(1.50025), 1.49, 7, "gemm<float, 128>"),
        Kernel(2.0, pytest.approx(2.001), None, 13, "Memcpy HtoD"),
    ]
    assert not list(path.parent.glob("*.tmp"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b\n1,2\n", "not a kernel trace"),
        ("start_s,dur_us,launch_s,stream,name\n1.0,x,,7,k\n", ":2: malformed kernel row"),
        ("start_s,dur_us,launch_s,stream,name\n1.0,2.0\n", ":2: malformed kernel row"),
    ],
)
def test_a_file_that_is_no_trace_is_refused_with_its_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "kernels.csv.gz"
    path.write_bytes(gzip.compress(text.encode()))
    with pytest.raises(ValueError, match=message):
        list(read_trace(path))


class _Event:
    """A GPU-side profiler event as torch's bindings give it: ``kind`` None is torch before 2.13 (the
    GPU machine's 2.11), whose events do not tell their kind."""

    def __init__(self, name: str, kind: str | None, annotation: bool = False) -> None:
        self._name, self._annotation = name, annotation
        if kind is not None:
            self.activity_type = lambda: kind

    def name(self) -> str:
        return self._name

    def is_user_annotation(self) -> bool:
        return self._annotation


@pytest.mark.parametrize(
    ("event", "work"),
    [
        (_Event("ampere_sgemm_128x64_nn", "kernel"), True),
        (_Event("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy"), True),
        (_Event("denoise", "gpu_user_annotation"), False),
        (_Event("Stream Sync", "cuda_sync"), False),
        (_Event("ampere_sgemm_128x64_nn", None), True),
        (_Event("Memset (Device)", None), True),
        (_Event("denoise", None, annotation=True), False),
        (_Event("Context Sync", None), False),
    ],
)
def test_markers_are_not_work_whether_or_not_the_event_tells_its_kind(event: _Event, work: bool) -> None:
    assert is_work(event) is work


def test_without_a_cuda_device_no_trace_starts_and_none_is_written(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    trace = KernelTrace(KernelTraceSpec(str(tmp_path / "kernels.csv.gz"), 0.0))
    trace.prepare()
    assert trace.start() == "no CUDA device in this process: no kernel trace"
    assert trace.stop() is None
    assert not (tmp_path / "kernels.csv.gz").exists()


@pytest.mark.gpu
def test_a_trace_records_the_kernels_of_the_process_on_the_runs_clock(tmp_path: Path) -> None:
    import torch

    from benchmarks import clock

    t0 = clock.now()
    trace = KernelTrace(KernelTraceSpec(str(tmp_path / "kernels.csv.gz"), t0))
    trace.prepare()
    x = torch.randn(1024, 1024, device="cuda")
    assert trace.start() is None
    before = clock.now() - t0
    (x @ x).sum().item()
    after = clock.now() - t0
    assert trace.stop()
    kernels = list(read_trace(tmp_path / "kernels.csv.gz"))
    # On the run's clock, launched by the calls CUPTI recorded, and no range or marker among them.
    assert kernels and all(before - 0.01 <= k.start <= k.end <= after + 0.01 for k in kernels)
    assert all(k.launch is not None and before - 0.01 <= k.launch <= k.start for k in kernels)
