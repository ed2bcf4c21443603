"""``consumerbench monitor``: live table, JSON lines, the sources summary, usage errors."""

from __future__ import annotations

import json
import re

from benchmarks.cli import main


def test_monitor_prints_a_table_then_every_source_with_its_status(capsys):
    assert main(["monitor", "--duration", "1.2", "--hz", "20"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["t", "s", "CPU%"]
    assert (
        len([line for line in lines[1:] if line.strip() and line.split()[0].replace(".", "").isdigit()]) >= 2
    )
    assert "sources:" in out
    for name in ("psutil", "nvml", "gpm", "dcgm", "rapl", "pcm", "powermetrics"):
        assert any(line.strip().startswith(name) for line in lines)
    assert "psutil        available" in out
    ticks = int(re.search(r"(\d+) ticks in", out).group(1))
    assert 21 <= ticks - 1 <= 24  # 1.2 s at 20 Hz, within 10 %, and the last tick that reads everything


def test_monitor_json_prints_one_batch_per_line_and_the_summary_on_stderr(capsys):
    assert main(["monitor", "--duration", "0.6", "--hz", "50", "--json", "--sources", "psutil"]) == 0
    captured = capsys.readouterr()
    batches = [json.loads(line) for line in captured.out.splitlines()]
    assert batches and all(b["source"] == "psutil" for b in batches)
    # 0.6 s at 50 Hz within 10 %, plus the last tick that reads everything.
    assert 28 <= sum(1 for b in batches for r in b["rows"] if r[1] == "system") <= 31
    assert "psutil  available" in captured.err


def test_monitor_refuses_a_rate_above_100_hz_and_unknown_sources(capsys):
    assert main(["monitor", "--hz", "500"]) == 2
    assert "at most 100 Hz, got 500" in capsys.readouterr().err
    assert main(["monitor", "--sources", "psutil,nvlm"]) == 2
    assert "unknown monitor source(s): nvlm" in capsys.readouterr().err
    assert main(["monitor", "--duration", "0"]) == 2
