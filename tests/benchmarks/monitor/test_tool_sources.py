"""Sources that read a tool's output or sysfs: dcgmi dmon, pcm-memory, powermetrics, RAPL.

None of these tools or files exist on the CI machine. fixtures/dcgmi_dmon.txt follows the format that
DCGM's dmon prints (dcgmi/DeviceMonitor.cpp: ``#Entity`` header with field short names, an ``ID`` units
line, the header again every 14 rows, ``N/A`` for blank values); no DCGM install was available to
record one. The dcgmi tests run a stand-in executable that prints it, so the subprocess and reader
code runs for real.
"""

from __future__ import annotations

import os
import plistlib
import stat
import textwrap
import time
from pathlib import Path

import pytest

from benchmarks.monitor.base import AppProcesses, SourceUnavailable
from benchmarks.monitor.sources.dcgm import DcgmSource, DmonParser
from benchmarks.monitor.sources.pcm import PcmCsvParser, PcmSource
from benchmarks.monitor.sources.powermetrics import PowermetricsSource, parse_plist
from benchmarks.monitor.sources.rapl import RaplSource

FIXTURES = Path(__file__).parent / "fixtures"


def test_dmon_rows_are_read_by_their_header_and_na_is_none():
    rows = list(DmonParser().parse((FIXTURES / "dcgmi_dmon.txt").read_text()))
    assert [r.entity for r in rows] == ["gpu0", "gpu1", "gpu0", "gpu1", "gpu0", "gpu1", "gpu-i1", "gpu0"]
    assert rows[2].values == pytest.approx(
        {"sm_activity_pct": 91.2, "sm_occupancy_pct": 52.1, "dram_active_pct": 20.4}
    )
    assert rows[3].values == {"sm_activity_pct": None, "sm_occupancy_pct": None, "dram_active_pct": None}


def test_dmon_columns_follow_the_header_order_not_a_fixed_one():
    parser = DmonParser()
    assert parser.feed("GPU 0  0.5  0.2") is None  # no header yet: nothing to name the values by
    parser.feed("#Entity   DRAMA   SMACT")
    row = parser.feed("GPU 0     0.100   0.800")
    assert row is not None and row.values == pytest.approx({"dram_active_pct": 10.0, "sm_activity_pct": 80.0})


def _tool(tmp_path: Path, name: str, script: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(script))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_dcgm_source_reports_what_dmon_printed_since_the_last_tick(tmp_path):
    tool = _tool(tmp_path, "dcgmi", f"cat {FIXTURES / 'dcgmi_dmon.txt'}\nsleep 30\n")
    source = DcgmSource(command=str(tool))
    source.open(20)
    try:
        time.sleep(0.3)
        rows = source.sample(1.5, AppProcesses())
        assert rows == [
            (1.5, "gpu0", pytest.approx(94.8), pytest.approx(53.3), pytest.approx(20.9)),
            (1.5, "gpu1", pytest.approx(1.3), pytest.approx(0.2), pytest.approx(0.1)),
            (1.5, "gpu-i1", pytest.approx(45.0), pytest.approx(12.0), pytest.approx(5.0)),
        ]
        assert source.sample(1.55, AppProcesses()) == []  # nothing new printed
    finally:
        source.close()
    assert source.proc is None


def test_dcgm_source_is_unavailable_with_dmons_own_message_when_it_exits(tmp_path):
    tool = _tool(
        tmp_path,
        "dcgmi",
        "echo 'Error: unable to establish a connection to the specified host: localhost'\nexit 1\n",
    )
    with pytest.raises(SourceUnavailable, match="dcgmi dmon exited with code 1: Error: unable to establish"):
        DcgmSource(command=str(tool)).open(20)


def test_dcgm_source_without_dcgmi_installed_says_so():
    with pytest.raises(SourceUnavailable, match="dcgmi-not-here is not installed"):
        DcgmSource(command="dcgmi-not-here").open(20)


# pcm-memory -csv: group names, then column names (src/pcm-memory.cpp), then one row per interval.
PCM_CSV = "\n".join(
    (
        ",,SKT0,SKT0,SKT0,SKT0,SKT1,SKT1,SKT1,SKT1,System,System,System",
        "Date,Time,Mem Read (MB/s),Mem Write (MB/s),P. Write (T/s),Memory (MB/s),"
        "Mem Read (MB/s),Mem Write (MB/s),P. Write (T/s),Memory (MB/s),Read,Write,Memory",
        "2026-12-02,15:40:01.100,  1203.55,   402.10,   1200,  1605.65,"
        "   310.00,    99.50,    400,   409.50,   1513.55,    501.60,   2015.15",
    )
)


def test_pcm_memory_csv_gives_system_and_per_socket_bandwidth():
    parser = PcmCsvParser()
    lines = PCM_CSV.splitlines()
    assert parser.feed(lines[0]) is None and parser.feed(lines[1]) is None
    values = parser.feed(lines[2])
    assert values == {
        "skt0": {"read_mbps": 1203.55, "write_mbps": 402.10, "memory_mbps": 1605.65},
        "skt1": {"read_mbps": 310.0, "write_mbps": 99.5, "memory_mbps": 409.5},
        "system": {"read_mbps": 1513.55, "write_mbps": 501.6, "memory_mbps": 2015.15},
    }


def test_pcm_source_reports_the_latest_interval_then_says_when_pcm_memory_stopped(tmp_path):
    csv = tmp_path / "pcm.csv"
    csv.write_text(PCM_CSV + "\n")
    # Outlives the start-up check (1 s), then exits as pcm-memory does when it loses the PMU.
    tool = _tool(tmp_path, "pcm-memory", f"cat {csv}\necho 'Error: uncore PMU busy'\nsleep 1.3\nexit 3\n")
    source = PcmSource(commands=(str(tool),))
    source.open(20)
    try:
        rows = source.sample(2.0, AppProcesses())
        assert [r[:2] for r in rows] == [(2.0, "skt0"), (2.0, "skt1"), (2.0, "system")]
        assert rows[2][2:] == pytest.approx((1513.55, 501.6, 2015.15))
        time.sleep(0.8)
        with pytest.raises(SourceUnavailable, match=r"pcm-memory stopped \(exit code 3\): .*uncore PMU busy"):
            source.sample(2.05, AppProcesses())
    finally:
        source.close()
    assert source.proc is None


def test_powermetrics_plist_gives_watts_and_gpu_busy_share():
    document = plistlib.dumps(
        {
            "processor": {
                "cpu_power": 1834.0,
                "gpu_power": 912.0,
                "ane_power": 0.0,
                "combined_power": 2746.0,
            },
            "gpu": {"freq_hz": 1296.0, "idle_ratio": 0.25},
        }
    )
    assert parse_plist(b"\0" + document) == pytest.approx(
        {
            "cpu_power_w": 1.834,
            "gpu_power_w": 0.912,
            "ane_power_w": 0.0,
            "combined_power_w": 2.746,
            "gpu_busy_pct": 75.0,
            "gpu_freq_mhz": 1296.0,
        }
    )


@pytest.mark.skipif(os.uname().sysname == "Darwin", reason="this checks the non-macOS answer")
def test_powermetrics_off_macos_is_unavailable_naming_the_platform():
    with pytest.raises(SourceUnavailable, match="macOS only"):
        PowermetricsSource().open(20)


def _zone(root: Path, name: str, label: str, energy_uj: int, max_uj: int = 262143328850) -> Path:
    zone = root / name
    zone.mkdir()
    (zone / "name").write_text(label + "\n")
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return zone


def test_rapl_reports_energy_since_start_and_power_across_counter_wraparound(tmp_path):
    package = _zone(tmp_path, "intel-rapl:0", "package-0", 262143000000)
    dram = _zone(tmp_path, "intel-rapl:0:2", "dram", 5_000_000)
    source = RaplSource(tmp_path)
    source.open(20)
    apps = AppProcesses()
    first = source.sample(0.0, apps)
    assert first == [(0.0, "package-0", 0.0, None), (0.0, "package-0/dram", 0.0, None)]
    # The package counter wraps past max_energy_range_uj: 328850 + 1 uJ to the top, then 9671149 more.
    (package / "energy_uj").write_text("9671149\n")
    (dram / "energy_uj").write_text("6000000\n")
    second = source.sample(0.5, apps)
    assert second == [
        (0.5, "package-0", pytest.approx(10.0), pytest.approx(20.0)),
        (0.5, "package-0/dram", pytest.approx(1.0), pytest.approx(2.0)),
    ]


def test_rapl_without_powercap_is_unavailable_naming_the_path(tmp_path):
    with pytest.raises(SourceUnavailable, match="does not exist"):
        RaplSource(tmp_path / "powercap").open(20)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceUnavailable, match="no intel-rapl zone"):
        RaplSource(tmp_path / "empty").open(20)
