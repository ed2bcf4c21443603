"""The cross-check against AIPerf (benchmarks.perf.aiperf_check): its figures from the two clients'
records and the server's timings, and a real run of its project side against llama-server."""

from __future__ import annotations

import pytest

from benchmarks.perf import aiperf_check as tool


def row(arrival: float, end: float, ttft: float, tpot: float, tokens: int, server_tpot_ms: float) -> dict:
    server = {"prompt_ms": 20.0, "predicted_ms": server_tpot_ms * tokens, "predicted_n": tokens + 1}
    return {
        "arrival": arrival,
        "end": end,
        "ttft": ttft,
        "tpot": tpot,
        "e2e": end - arrival,
        "tokens_out": tokens,
        "chunks": tokens,
        "server_tpot_ms": server_tpot_ms,
        "finish_reason": "stop",
        "server": {**server, "predicted_per_token_ms": server_tpot_ms},
    }


def test_the_figures_put_each_clients_mean_beside_the_servers_own_and_rates_are_over_the_window():
    rows = [row(0.0, 1.0, 0.1, 0.020, 40, 20.0), row(1.0, 3.0, 0.3, 0.040, 40, 40.0)]
    aiperf = {"inter_token_latency": {"avg": 30.5, "unit": "ms"}, "request_throughput": {"avg": 0.7}}
    table = tool.figures(rows, aiperf)
    assert table["TTFT"]["project"] == pytest.approx(200.0) and table["TTFT"]["server"] == 20.0
    assert table["TPOT / ITL"]["project"] == pytest.approx(30.0)
    assert table["TPOT / ITL"]["aiperf"] == 30.5 and table["TPOT / ITL"]["server"] == 30.0
    # 80 tokens and 2 requests over the 3 s from the first arrival to the last end.
    assert table["output throughput"]["project"] == pytest.approx(80 / 3)
    assert table["request throughput"]["project"] == pytest.approx(2 / 3)
    assert table["request throughput"]["aiperf"] == 0.7 and table["TTFT"]["aiperf"] is None
    assert tool.tpot_ratios(rows) == pytest.approx([1.0, 1.0])
    assert tool.tpot_ratios(rows, streamed=False) == pytest.approx([1.0, 1.0])


def test_without_aiperf_its_column_is_empty():
    table = tool.figures([row(0.0, 1.0, 0.1, 0.02, 10, 20.0)], None)
    assert all(f["aiperf"] is None for f in table.values())


@pytest.mark.llama_server
def test_the_check_prints_the_side_by_side_table_and_the_projects_tpot_is_the_servers(capsys, monkeypatch):
    monkeypatch.setattr(tool, "aiperf_program", lambda named: None)  # the project's side only
    status = tool.main(["--requests", "3", "--max-tokens", "48"])
    out = capsys.readouterr().out
    for figure in ("TTFT", "TPOT / ITL", "request latency", "output tokens", "output throughput"):
        assert figure in out
    assert "AIPerf: AIPerf is not installed" in out
    assert "within 2% for every request" in out and status == 0
