"""The monitor inside a run: sink events, telemetry/<source>.csv, and result.json's telemetry section."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from typing import Any

import pytest

from benchmarks.monitor.telemetry import Series, TelemetryRecorder
from benchmarks.results import load_bundle, write_bundle
from benchmarks.runner import run_workflow
from benchmarks.spec.load import load_yaml

# One application spinning a CPU core for ~1.2 s (12 requests x 2 steps x 50 ms), one sleeping beside it.
SPIN = """
spin: {type: Synthetic, load: cpu, steps: 2, step_ms: 50, num_requests: 12, device: cpu}
nap: {type: Sleep, sleep_time: 0.1, num_requests: 12}
"""


class Collect:
    def __init__(self) -> None:
        self.events: list[Mapping[str, Any]] = []

    def on_event(self, event: Mapping[str, Any]) -> None:
        self.events.append(event)


@pytest.fixture(scope="module")
def spin_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle")
    sink = Collect()
    result = run_workflow(load_yaml(SPIN, name="spin"), sink=sink, out_dir=out, monitor_hz=20)
    write_bundle(result, out)
    return result, sink.events, out


def test_the_run_streams_telemetry_batches_to_the_sink(spin_run):
    result, events, _ = spin_run
    sources = [e for e in events if e["kind"] == "telemetry_sources"]
    assert len(sources) == 1
    assert {s["name"]: s["status"] for s in sources[0]["sources"]}["psutil"] == "available"
    batches = [e for e in events if e["kind"] == "telemetry"]
    assert batches and all(b["source"] == "psutil" for b in batches)
    rows = [r for b in batches for r in b["rows"]]
    assert sum(1 for r in rows if r[1] == "system") == result.telemetry.ticks
    assert all(e["t"] >= 0 for e in batches)


def test_the_bundle_has_one_csv_per_source_with_the_rows_the_sink_got(spin_run):
    result, events, out = spin_run
    with (out / "telemetry" / "psutil.csv").open() as fh:
        table = list(csv.reader(fh))
    header, rows = table[0], table[1:]
    assert header == [
        "t",
        "entity",
        "cpu_percent",
        "mem_used_bytes",
        "mem_available_bytes",
        "swap_used_bytes",
        "rss_bytes",
        "processes",
    ]
    streamed = sum(len(e["rows"]) for e in events if e["kind"] == "telemetry")
    assert len(rows) == streamed == result.telemetry.sources["psutil"].samples
    assert result.telemetry.sources["psutil"].file == "telemetry/psutil.csv"
    assert sorted(p.name for p in (out / "telemetry").iterdir()) == ["psutil.csv"]


def test_result_json_has_the_application_summary_and_no_bulk_samples(spin_run):
    result, _, out = spin_run
    doc = load_bundle(out)
    assert doc.telemetry is not None
    spin = doc.telemetry.applications["spin"]
    app = next(a for a in result.applications if a.name == "spin")
    requests = [r for r in app.requests if r.status == "ok"]
    assert spin.active_from_s == pytest.approx(min(r.start for r in requests))
    assert spin.active_to_s == pytest.approx(max(r.end for r in requests))
    # The spinning driver uses far more CPU than the sleeping one (how much depends on the machine's load).
    nap = doc.telemetry.applications["nap"]
    assert spin.cpu_percent_mean is not None and nap.cpu_percent_mean is not None
    assert spin.cpu_percent_mean > nap.cpu_percent_mean + 10 and nap.cpu_percent_mean < 10
    assert spin.rss_peak_bytes is not None and spin.rss_peak_bytes > 10 * 2**20
    assert spin.gpu_energy_j is None and spin.sm_activity_mean_pct is None  # no GPU here
    text = (out / "result.json").read_text()
    assert len(text) < 40_000 and '"rows"' not in text


def test_every_source_is_listed_with_its_availability(spin_run):
    result, _, _ = spin_run
    sources = result.telemetry.sources
    assert set(sources) == {"psutil", "nvml", "gpm", "dcgm", "rapl", "pcm", "powermetrics"}
    for name, source in sources.items():
        if source.status == "unavailable":
            assert source.reason, f"{name} is unavailable without a reason"
            assert source.samples == 0 and source.file is None


def test_a_run_with_the_monitor_off_has_no_telemetry(tmp_path):
    result = run_workflow(
        load_yaml("nap: {type: Sleep, sleep_time: 0.01}\n", name="nap"), out_dir=tmp_path, monitor_hz=None
    )
    assert result.telemetry is None
    assert not (tmp_path / "telemetry").exists()
    write_bundle(result, tmp_path)
    assert load_bundle(tmp_path) == result


def test_window_summaries_use_counter_differences_and_the_best_sm_activity_source():
    recorder = TelemetryRecorder(20)
    columns = ["t", "entity", "util_gpu_pct", "energy_j", "power_w", "mem_used_bytes", "gpu_mem_bytes"]
    # 10 s at 1 Hz: the counter grows 100 J/s for the first 5 s, 300 J/s after; util is 0 then 100.
    rows = []
    for t in range(11):
        energy = 100 * min(t, 5) + 300 * max(0, t - 5)
        rows.append([float(t), "gpu0", 0 if t < 5 else 100, 1000.0 + energy, None, 2**30, None])
        rows.append([float(t), "app:gen", None, None, None, None, 512 * 2**20 + t])
    recorder.add_batch("nvml", columns, rows)
    gpm = [[t + 0.5, "gpu0", 90.0 if t >= 5 else 10.0, 40.0] for t in range(10)]
    recorder.add_batch("gpm", ["t", "entity", "sm_activity_pct", "sm_occupancy_pct"], gpm)
    app = {
        "name": "gen",
        "requests": [
            {"status": "ok", "warmup": False, "start": 6.0, "end": 7.0},
            {"status": "ok", "warmup": False, "start": 7.0, "end": 8.5},
            {"status": "ok", "warmup": True, "start": 2.0, "end": 3.0},
        ],
    }
    out = recorder.result([app], run_end=10.0)
    gen = out["applications"]["gen"]
    assert gen["active_from_s"] == 6.0 and gen["active_to_s"] == 8.5
    assert gen["gpu_energy_j"] == pytest.approx(300 * 2.5)  # interpolated inside the 1 Hz readings
    assert gen["gpu_energy_per_request_j"] == pytest.approx(375.0)  # warm-up requests do not count
    assert gen["sm_activity_mean_pct"] == pytest.approx(90.0) and gen["sm_activity_source"] == "gpm"
    assert gen["gpu_memory_peak_bytes"] == 512 * 2**20 + 10
    serving = out["serving"]  # every application's counted requests: here only gen's
    assert (serving["active_from_s"], serving["active_to_s"]) == (6.0, 8.5)
    assert serving["gpu_energy_j"] == pytest.approx(gen["gpu_energy_j"])
    assert recorder.result([{"name": "gen", "requests": []}], run_end=10.0)["serving"] is None
    run = out["run"]
    assert run["gpu_energy_j"] == pytest.approx(2000.0)
    assert run["sm_activity_mean_pct"] == pytest.approx(50.0)
    assert run["gpu_memory_peak_bytes"] == 2**30


def test_an_applications_gpu_time_share_is_its_own_utilisation_over_the_readings_while_it_had_a_process():
    recorder = TelemetryRecorder(20)
    columns = ["t", "entity", "gpu_mem_bytes", "sm_util_pct", "processes"]
    # Readings every 2 s. "gen" ran kernels 40 % of the period read at 6 s and none at 8 s (no sample:
    # 0 %); "mps" had its process all along and never a sample (an MPS client): unknown, not 0.
    # A reading at 7 s found no process of it (listed after it exited, say): it counts for nothing.
    rows = [[6.0, "app:gen", 1, 40.0, 1], [7.0, "app:gen", 0, 50.0, 0], [8.0, "app:gen", 1, None, 1]]
    rows += [[10.0, "app:gen", 1, 90.0, 1]]
    rows += [[t, "app:mps", 1, None, 1] for t in (6.0, 8.0)]
    recorder.add_batch("nvml", columns, rows)
    requests = [{"status": "ok", "warmup": False, "start": 5.5, "end": 8.5}]
    out = recorder.result(
        [{"name": "gen", "requests": requests}, {"name": "mps", "requests": requests}], 10.0
    )
    assert out["applications"]["gen"]["gpu_time_share_pct"] == pytest.approx(20.0)
    assert out["applications"]["mps"]["gpu_time_share_pct"] is None
    assert recorder.gpu_time_share("gen", 0.0, 5.0) is None  # no reading in the window


def test_series_delta_is_none_outside_the_samples_and_mean_is_none_without_samples():
    s = Series()
    for t, v in ((1.0, 10.0), (2.0, 20.0), (3.0, 40.0)):
        s.add(t, v)
    assert s.delta(1.5, 2.5) == pytest.approx(15.0)
    assert s.delta(0.0, 10.0) == pytest.approx(30.0)  # clipped to the samples
    assert s.delta(5.0, 6.0) is None
    assert s.mean(1.1, 1.9) is None
    assert s.mean() == pytest.approx(70 / 3)


def test_interval_mean_weights_each_sample_by_the_part_of_its_interval_inside_the_window():
    s = Series()
    # CPU% rows: 90 % over (0, 1] (a busy start-up), then 10 % over (1, 2] and (2, 3].
    for t, v in ((0.0, 0.0), (1.0, 90.0), (2.0, 10.0), (3.0, 10.0)):
        s.add(t, v)
    assert s.interval_mean(1.0, 3.0) == pytest.approx(10.0)  # the busy interval ends where the window starts
    assert s.interval_mean(0.5, 2.0) == pytest.approx((90 * 0.5 + 10 * 1.0) / 1.5)
    assert s.interval_mean(2.2, 2.4) == pytest.approx(10.0)  # inside one interval: that interval's value
    assert s.interval_mean(5.0, 6.0) is None


def test_a_bundle_read_back_gives_the_summaries_the_run_wrote(tmp_path):
    written = TelemetryRecorder(20, out_dir=tmp_path)
    nvml = ["t", "entity", "util_gpu_pct", "energy_j", "processes"]
    written.add_batch("nvml", nvml, [[float(t), "gpu0", 50, 100.0 * t, None] for t in range(5)])
    gpm = ["t", "entity", "sm_activity_pct", "sm_occupancy_pct"]
    written.add_batch("gpm", gpm, [[t + 0.5, "gpu0", 10.0 * t, None] for t in range(5)])
    written.close()
    read = TelemetryRecorder.load(tmp_path)
    for a, b in ((None, None), (1.0, 3.0)):
        assert read.window(a, b, 2) == written.window(a, b, 2)
    assert read.window(1.0, 3.0, 2)["sm_activity_mean_pct"] == pytest.approx(15.0)  # gpm, not nvml
    series, source = read.sm_activity()
    assert source == "gpm" and list(series.v) == [0.0, 10.0, 20.0, 30.0, 40.0]


def test_the_sm_activity_series_falls_back_to_nvml_and_is_none_without_a_gpu(tmp_path):
    recorder = TelemetryRecorder(20)
    assert recorder.sm_activity() == (None, None)
    recorder.add_batch("nvml", ["t", "entity", "util_gpu_pct"], [[0.0, "gpu0", 7]])
    series, source = recorder.sm_activity()
    assert source == "nvml" and list(series.v) == [7.0]
