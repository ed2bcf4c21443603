"""The NVML and GPM sources on answers recorded from a real H200 under a bf16 matmul load."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import pytest

from benchmarks.monitor.base import AppProcesses, Source, SourceUnavailable
from benchmarks.monitor.sources.gpm import METRICS, GpmSource, metric_values, same_counters
from benchmarks.monitor.sources.nvml import NvmlSource
from tests.benchmarks.monitor.conftest import FIXTURES, ReplayNvml

# The schedule the recording was made with: the energy counter read on every tick, processes every 0.5 s.
RECORDED_SCHEDULE = {"energy_interval_s": 0.0, "attribution_interval_s": 0.5}


class RecordedApps(AppProcesses):
    """The application processes of the recording: PIDs on the GPU machine, absent here."""

    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__()
        self._node_of.update({pid: node for node, pid in pids.items()})

    def __bool__(self) -> bool:
        return True


def replay(recording: dict[str, Any], nvml: ReplayNvml, **schedule: float) -> dict[str, list[list[Any]]]:
    """Run NVML and GPM over the recorded ticks as the recording's Sampler did; return rows per source."""
    sources: list[Source] = [NvmlSource(nvml, **schedule), GpmSource(nvml)]
    for src in sources:
        src.open(recording["hz"])
    apps = RecordedApps(recording["apps"])
    rows: dict[str, list[list[Any]]] = {"nvml": [], "gpm": []}
    for t in recording["tick_t"]:
        for src in sources:
            rows[src.name] += [list(r) for r in src.sample(t, apps)]
    for src in sources:
        src.close()
    return rows


def test_replayed_h200_answers_give_exactly_the_rows_recorded_on_the_gpu(h200_recording):
    nvml = ReplayNvml(h200_recording["calls"])
    rows = replay(h200_recording, nvml, **RECORDED_SCHEDULE)
    assert rows["nvml"] == h200_recording["rows"]["nvml"]["rows"]
    assert rows["gpm"] == h200_recording["rows"]["gpm"]["rows"]
    assert nvml.left() == {}, "the sources made fewer calls than recorded"


def test_gpm_under_matmul_load_reports_sm_activity_above_80_percent(h200_recording):
    rows = replay(h200_recording, ReplayNvml(h200_recording["calls"]), **RECORDED_SCHEDULE)["gpm"]
    columns = ["t", "entity", *(name for name, _ in METRICS)]
    activity = [r[columns.index("sm_activity_pct")] for r in rows]
    # The first rows cover the load's ramp-up; once it runs the SMs are nearly all busy.
    assert len(activity) >= 5
    assert all(a > 80 for a in activity[2:])
    tensor = [r[columns.index("tensor_activity_pct")] for r in rows[2:]]
    assert all(80 < x <= 100 for x in tensor)
    times = [r[0] for r in rows]
    assert all(b - a >= 0.1 for a, b in itertools.pairwise(times)), "GPM rows closer than 100 ms"


def test_nvml_rows_carry_power_energy_and_the_load_processes_gpu_memory(h200_recording):
    rows = replay(h200_recording, ReplayNvml(h200_recording["calls"]), **RECORDED_SCHEDULE)["nvml"]
    columns = list(NvmlSource.columns)
    gpu = [r for r in rows if r[1] == "gpu0"]
    energy = [r[2 + columns.index("energy_j")] for r in gpu]
    power = [r[2 + columns.index("power_w")] for r in gpu]
    assert all(b >= a for a, b in itertools.pairwise(energy)) and energy[-1] > energy[0]
    # NVML's power is a ~1 s average: it climbs from idle (~80 W) as the load starts, to over 500 W.
    assert all(b >= a for a, b in itertools.pairwise(power)) and power[0] > 80 and power[-1] > 500
    recorded = next(
        c["result"] for c in h200_recording["calls"] if c["fn"] == "nvmlDeviceGetComputeRunningProcesses"
    )
    app = [r for r in rows if r[1] == "app:matmul"]
    assert app and all(r[2 + columns.index("gpu_mem_bytes")] == recorded[0]["usedGpuMemory"] for r in app)
    assert all(r[2 + columns.index("processes")] == 1 for r in app)


@pytest.mark.parametrize(("error", "expected"), [(6, 0.0), (3, None)])
def test_a_process_without_a_utilisation_sample_ran_no_kernel_unless_the_reading_failed(
    h200_recording, error, expected
):
    # After a first sample of the application: NOT_FOUND (6) says the driver has none since, so its
    # process ran no kernel: 0 %, not a gap. NOT_SUPPORTED (3): nothing is known, and the reading is
    # dropped.
    utilisation = [c for c in h200_recording["calls"] if c["fn"] == "nvmlDeviceGetProcessUtilization"]
    second = utilisation[1]
    calls = [{"fn": c["fn"], "error": error} if c is second else c for c in h200_recording["calls"]]
    rows = replay({**h200_recording, "calls": calls}, ReplayNvml(calls), **RECORDED_SCHEDULE)["nvml"]
    column = 2 + list(NvmlSource.columns).index("sm_util_pct")
    app = [r for r in rows if r[1] == "app:matmul"]
    assert [r[column] for r in app] == [91.0, expected] and app[1][column + 1] == 1


def test_an_application_nvml_never_attributed_a_kernel_to_has_no_utilisation_an_mps_client(h200_recording):
    # Under MPS the driver's samples name the MPS server's process, never the client's: the
    # application's share is unknown, not 0.
    calls = [
        {**c, "result": [{**s, "pid": 1} for s in c["result"]]}
        if c["fn"] == "nvmlDeviceGetProcessUtilization"
        else c
        for c in h200_recording["calls"]
    ]
    rows = replay({**h200_recording, "calls": calls}, ReplayNvml(calls), **RECORDED_SCHEDULE)["nvml"]
    column = 2 + list(NvmlSource.columns).index("sm_util_pct")
    app = [r for r in rows if r[1] == "app:matmul"]
    assert app and all(r[column] is None and r[column + 1] == 1 for r in app)


def test_the_costly_energy_counter_is_read_once_per_energy_interval(h200_recording):
    nvml = ReplayNvml(h200_recording["calls"])
    rows = replay(h200_recording, nvml, energy_interval_s=0.25)["nvml"]
    span = h200_recording["tick_t"][-1] - h200_recording["tick_t"][0]
    energy_calls = nvml.made.count("nvmlDeviceGetTotalEnergyConsumption")
    assert span > 0.5 and energy_calls == math.floor(span / 0.25) + 1
    column = 2 + list(NvmlSource.columns).index("energy_j")
    read = [r for r in rows if r[1] == "gpu0" and r[column] is not None]
    assert len(read) == energy_calls
    # Power is cheap and still read on every tick.
    assert nvml.made.count("nvmlDeviceGetPowerUsage") == len(h200_recording["tick_t"])


def test_the_last_tick_reads_the_energy_counter_and_the_processes_whatever_the_schedule(h200_recording):
    nvml = ReplayNvml(h200_recording["calls"])
    src = NvmlSource(nvml)
    src.open(h200_recording["hz"])
    apps = RecordedApps(h200_recording["apps"])
    *ticks, last, after = h200_recording["tick_t"]
    for t in ticks:
        src.sample(t, apps)
    assert last - ticks[0] < src.energy_interval_s  # not due by the schedule
    made = len(nvml.made)
    src.read_all_next()
    rows = src.sample(last, apps)
    new = nvml.made[made:]
    assert "nvmlDeviceGetTotalEnergyConsumption" in new and "nvmlDeviceGetComputeRunningProcesses" in new
    energy = 2 + list(NvmlSource.columns).index("energy_j")
    assert next(r for r in rows if r[1] == "gpu0")[energy] is not None
    assert any(r[1] == "app:matmul" for r in rows)
    # Then the schedule goes on from there: the next tick reads neither.
    made = len(nvml.made)
    src.sample(after, apps)
    assert "nvmlDeviceGetTotalEnergyConsumption" not in nvml.made[made:]


def test_gpm_answers_from_identical_samples_are_recognised_and_not_reported():
    recording = json.loads((FIXTURES / "gpm_identical_samples_h200.json").read_text())

    class Metric:
        def __init__(self, metric_id: int, ret: int, value: float) -> None:
            self.metricId, self.nvmlReturn, self.value = metric_id, ret, value

    verdicts = []
    for answer in recording["answers"]:
        raw = [Metric(*m) for m in answer]
        values = metric_values(raw, len(raw))
        verdicts.append(same_counters(values, raw))
        if not verdicts[-1]:
            assert all(v is not None and math.isfinite(v) for v in values)
    # Recorded at 20 ms ticks while the driver refreshed every ~100 ms: 2 real answers out of 12.
    assert verdicts.count(False) == 2
    real = [a for a, same in zip(recording["answers"], verdicts, strict=True) if not same]
    assert real[1][0][2] > 90, "the full interval under load shows the SMs busy"


def test_nvml_without_a_driver_is_unavailable_with_the_nvml_error_named():
    try:
        pynvml_init_ok = _nvml_loads()
    except Exception:
        pynvml_init_ok = False
    if pynvml_init_ok:
        pytest.skip("this machine has an NVIDIA driver: NVML is available here")
    for source in (NvmlSource(), GpmSource()):
        with pytest.raises(SourceUnavailable, match=r"NVMLError_\w+: "):
            source.open(20)


def _nvml_loads() -> bool:
    import pynvml

    pynvml.nvmlInit()
    pynvml.nvmlShutdown()
    return True
