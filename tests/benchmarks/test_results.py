"""The SLO table: one row per shown metric of each application, the figures straight from the result."""

from __future__ import annotations

from typing import Any

from benchmarks.results import SloRow, shown_metrics, slo_table


def application(
    name: str, slo: list[str], metrics: dict[str, dict[str, float]], **over: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "type": "Chatbot",
        "slo": slo,
        "metrics": metrics,
        "slo_attainment": 0.5,
        "requests_met": 2,
        "requests_counted": 4,
        "requests_total": 5,
        "normalized_latency": {"ttft": 0.8},
        "load_time_s": 1.5,
        "throughput_rps": 3.0,
        **over,
    }


SUMMARY = {"count": 4.0, "p50": 0.1, "p90": 0.2, "p99": 0.3}


def test_an_application_has_one_row_per_slo_metric_and_its_own_cells_on_the_first() -> None:
    rows = slo_table([application("chat", ["ttft<=1.0s", "tpot<=0.25s"], {"ttft": SUMMARY})])
    assert [(r.metric, r.slo, r.first, r.span) for r in rows] == [
        ("ttft", "ttft<=1.0s", True, 2),
        ("tpot", "tpot<=0.25s", False, 2),
    ]
    assert rows[0] == SloRow(
        application="chat",
        type="Chatbot",
        first=True,
        span=2,
        metric="ttft",
        slo="ttft<=1.0s",
        attainment=0.5,
        requests_met=2,
        requests_counted=4,
        requests_total=5,
        p50=0.1,
        p90=0.2,
        p99=0.3,
        normalized=0.8,
        load_time_s=1.5,
        throughput_rps=3.0,
    )
    # No summary for tpot (no request produced it): its figures are missing, not zero.
    assert (rows[1].p50, rows[1].p99, rows[1].normalized) == (None, None, None)


def test_without_slos_the_table_shows_e2e_and_without_e2e_a_dash() -> None:
    with_e2e = application("a", [], {"e2e": SUMMARY}, slo_attainment=None, requests_met=None)
    bare = application("b", [], {}, slo_attainment=None, requests_met=None)
    assert shown_metrics(with_e2e) == ["e2e"] and shown_metrics(bare) == []
    rows = slo_table([with_e2e, bare])
    assert [(r.application, r.metric, r.slo, r.p50) for r in rows] == [
        ("a", "e2e", "", 0.1),
        ("b", "-", "", None),
    ]
    assert rows[0].requests_met is None and rows[0].attainment is None


def test_an_slo_is_matched_to_its_own_metric_not_one_that_shares_a_prefix() -> None:
    rows = slo_table([application("img", ["steps_total<=9.0s", "step<=1.0s"], {})])
    assert [(r.metric, r.slo) for r in rows] == [("steps_total", "steps_total<=9.0s"), ("step", "step<=1.0s")]
