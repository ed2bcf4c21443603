"""The result document: its SLO table, its one decision of what failed, its schema versions on disk."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from benchmarks.results import (
    SCHEMA_VERSION,
    ApplicationResult,
    QualityFigure,
    QualityRow,
    ResultDocument,
    SloRow,
    accelerators,
    format_quality,
    format_shares,
    headline,
    load_bundle,
    quality_table,
    scheduler_settings,
    shown_metrics,
    slo_table,
    void_reasons,
    write_bundle,
)
from benchmarks.spec.model import SLO
from benchmarks.status import NodeStatus, RunStatus

V1_BUNDLE = Path(__file__).parent / "fixtures" / "result-v1.json"  # written by the schema 1 CLI
# The schema 2 code's write_bundle of the version 1 bundle: fairness over mean latencies, attainment
# over the served requests.
V2_BUNDLE = Path(__file__).parent / "fixtures" / "result-v2.json"


def application(
    name: str, slo: list[str], metrics: dict[str, dict[str, float]], **over: Any
) -> ApplicationResult:
    from benchmarks.spec.model import parse_slo

    return ApplicationResult.model_validate(
        {
            "name": name,
            "unit": name,
            "type": "Chatbot",
            "device": "cpu",
            "priority": "high",
            "model": None,
            "loaded": {},
            "slo": [parse_slo(s) for s in slo],
            "metrics": metrics,
            "slo_attainment": 0.5,
            "requests_met": 2,
            "requests_counted": 4,
            "requests_total": 5,
            "requests_requested": 4,
            "normalized_latency": {"ttft": 0.8},
            "load_time_s": 1.5,
            "throughput_rps": 3.0,
            "goodput_rps": 1.5,
            "requests": [],
            **over,
        }
    )


SUMMARY = {"count": 4.0, "p50": 0.1, "p90": 0.2, "p99": 0.3}


def test_an_application_has_one_row_per_slo_metric_and_its_own_cells_on_the_first() -> None:
    rows = slo_table([application("chat", ["ttft<=1.0s", "tpot<=0.25s"], {"ttft": SUMMARY})])
    assert [(r.metric, str(r.slo), r.first, r.span) for r in rows] == [
        ("ttft", "ttft<=1.0s", True, 2),
        ("tpot", "tpot<=0.25s", False, 2),
    ]
    assert rows[0] == SloRow(
        application="chat",
        type="Chatbot",
        first=True,
        span=2,
        metric="ttft",
        slo=SLO(metric="ttft", op="<=", threshold_s=1.0),
        attainment=0.5,
        requests_met=2,
        requests_counted=4,
        requests_requested=4,
        requests_total=5,
        p50=0.1,
        p90=0.2,
        p99=0.3,
        normalized=0.8,
        load_time_s=1.5,
        throughput_rps=3.0,
        goodput_rps=1.5,
    )
    # No summary for tpot (no request produced it): its figures are missing, not zero.
    assert (rows[1].p50, rows[1].p99, rows[1].normalized) == (None, None, None)


def test_without_slos_the_table_shows_e2e_and_without_e2e_a_dash() -> None:
    with_e2e = application("a", [], {"e2e": SUMMARY}, slo_attainment=None, requests_met=None)
    bare = application("b", [], {}, slo_attainment=None, requests_met=None)
    assert shown_metrics(with_e2e) == ["e2e"] and shown_metrics(bare) == []
    rows = slo_table([with_e2e, bare])
    assert [(r.application, r.metric, r.slo, r.p50) for r in rows] == [
        ("a", "e2e", None, 0.1),
        ("b", "-", None, None),
    ]
    assert rows[0].requests_met is None and rows[0].attainment is None


def test_an_slo_is_matched_to_its_own_metric_not_one_that_shares_a_prefix() -> None:
    rows = slo_table([application("img", ["steps_total<=9.0s", "step<=1.0s"], {})])
    assert [(r.metric, r.slo and r.slo.threshold_s) for r in rows] == [("steps_total", 9.0), ("step", 1.0)]


def test_a_schema_1_bundle_is_read_with_its_slo_strings_as_structures(tmp_path: Path) -> None:
    shutil.copy(V1_BUNDLE, tmp_path / "result.json")
    doc = load_bundle(tmp_path)
    assert doc.schema_version == SCHEMA_VERSION == 4
    chat, nap = doc.applications
    assert chat.slo == [
        SLO(metric="e2e", op="<=", threshold_s=1.0),
        SLO(metric="step", op="<", threshold_s=0.25),
    ]
    assert nap.slo == [SLO(metric="e2e", op="<", threshold_s=1e-6)]
    # Everything else reads as it was written.
    raw = json.loads(V1_BUNDLE.read_text())
    assert [n.status for n in doc.nodes] == [n["status"] for n in raw["nodes"]]
    assert chat.requests_met == raw["applications"][0]["requests_met"]


def test_a_schema_2_bundle_is_read_with_no_quality_figures(tmp_path: Path) -> None:
    raw = ResultDocument.model_validate(json.loads(V1_BUNDLE.read_text())).model_dump(
        mode="json", exclude_unset=True
    )
    assert all("quality" not in app for app in raw["applications"])
    (tmp_path / "result.json").write_text(json.dumps({**raw, "schema_version": 2}))
    doc = load_bundle(tmp_path)
    assert doc.schema_version == 4
    assert [a.quality for a in doc.applications] == [{}, {}]
    assert quality_table(doc.applications) == []


def test_a_schema_2_bundle_is_read_with_fairness_recomputed_from_its_applications_attainment(
    tmp_path: Path,
) -> None:
    raw = json.loads(V2_BUNDLE.read_text())
    # Written with the old index (Jain over mean latency against the SLO, capped at 1).
    assert raw["schema_version"] == 2 and raw["fairness"] == pytest.approx(0.50008, abs=1e-5)
    shutil.copy(V2_BUNDLE, tmp_path / "result.json")
    doc = load_bundle(tmp_path)
    assert doc.schema_version == 4
    # chat met every SLO, nap none: Jain over (1, 0).
    assert [a.slo_attainment for a in doc.applications] == [1.0, 0.0]
    assert doc.fairness == 0.5
    # The ask was not recorded: taken as what was served, so attainments read as they were written.
    assert [a.requests_requested for a in doc.applications] == [a.requests_counted for a in doc.applications]
    assert doc.requests_requested == doc.requests_served == 3
    assert doc.mean_attainment == raw["mean_attainment"]


def test_a_schema_3_bundle_is_read_with_its_gate_waits_not_recorded(tmp_path: Path) -> None:
    raw = ResultDocument.model_validate(json.loads(V2_BUNDLE.read_text())).model_dump(
        mode="json", exclude_unset=True
    )
    assert all("gate_wait_s" not in app for app in raw["applications"])
    (tmp_path / "result.json").write_text(json.dumps({**raw, "schema_version": 3}))
    doc = load_bundle(tmp_path)
    assert doc.schema_version == 4 and [a.gate_wait_s for a in doc.applications] == [None, None]
    # Everything else reads as it was written.
    assert doc.model_dump(mode="json", exclude={"schema_version"}) == ResultDocument.model_validate(
        raw
    ).model_dump(mode="json", exclude={"schema_version"})


def test_the_headline_says_partial_with_what_was_served_and_no_slos_when_there_are_none() -> None:
    # A partial run's attainment is over what the workflow asked for, and says so.
    assert headline(0.5, 3, 10, True) == "partial: served 3 of 10, mean SLO attainment 50.0% of requested"
    assert headline(None, 0, 4, True) == "partial: served 0 of 4, no SLOs"
    assert headline(None, 4, 4, False) == "no SLOs"
    assert headline(0.875, 8, 8, False) == "mean SLO attainment 87.5%"
    # A run that ended without a result has no figure to show, only what it served.
    assert headline(None, 2, 9, True, measured=False) == "partial: served 2 of 9"


def test_a_run_is_partial_when_it_was_cancelled_or_failed_or_a_node_failed() -> None:
    doc = load_bundle(V2_BUNDLE)
    assert not doc.partial()
    assert doc.model_copy(update={"status": RunStatus.CANCELLED, "reason": "run cancelled"}).partial()
    failed = doc.nodes[0].model_copy(update={"status": NodeStatus.FAILED, "reason": "boom"})
    assert doc.model_copy(update={"nodes": [failed, *doc.nodes[1:]]}).partial()


def test_a_schema_1_bundle_with_a_malformed_slo_is_refused_with_the_slo_named(tmp_path: Path) -> None:
    raw = json.loads(V1_BUNDLE.read_text())
    raw["applications"][0]["slo"] = ["ttft about 1s"]
    (tmp_path / "result.json").write_text(json.dumps(raw))
    with pytest.raises(ValidationError, match="malformed SLO expression 'ttft about 1s'"):
        load_bundle(tmp_path)


def test_an_unknown_schema_version_is_refused() -> None:
    raw = json.loads(V1_BUNDLE.read_text())
    raw["schema_version"] = 5
    with pytest.raises(ValidationError, match="schema_version"):
        ResultDocument.model_validate(raw)


def test_write_bundle_writes_slos_as_metric_op_and_threshold_and_reads_back_equal(tmp_path: Path) -> None:
    doc = ResultDocument.model_validate(json.loads(V1_BUNDLE.read_text()))
    write_bundle(doc, tmp_path / "b")
    written = json.loads((tmp_path / "b" / "result.json").read_text())
    assert written["schema_version"] == 4
    assert written["applications"][0]["slo"] == [
        {"metric": "e2e", "op": "<=", "threshold_s": 1.0},
        {"metric": "step", "op": "<", "threshold_s": 0.25},
    ]
    assert load_bundle(tmp_path / "b") == doc
    # Apart from the SLOs and the counts of requests asked for and served, the same fields as the
    # version 1 file: none lost.
    raw = json.loads(V1_BUNDLE.read_text())
    added = {".applications.requests_requested", ".requests_requested", ".requests_served"}
    assert {k for k in _keys(written) if not k.startswith(".applications.slo.")} == _keys(raw) | added
    csv = (tmp_path / "b" / "chat.csv").read_text().splitlines()
    assert csv[0].startswith("index,arrival_s,start_s,end_s,status,warmup,slo_met") and len(csv) == 3


def _keys(value: Any, prefix: str = "") -> set[str]:
    """Every key path of a JSON value (list items share their list's path)."""
    if isinstance(value, dict):
        return {p for k, v in value.items() for p in {f"{prefix}.{k}", *_keys(v, f"{prefix}.{k}")}}
    if isinstance(value, list):
        return {p for v in value for p in _keys(v, prefix)}
    return set()


def _document(
    status: RunStatus = RunStatus.COMPLETED, reason: str | None = None, **nodes: str
) -> ResultDocument:
    raw = json.loads(V1_BUNDLE.read_text())
    template = raw["nodes"][0]
    raw["nodes"] = [
        {**template, "name": name, "status": st, "reason": None if st == "succeeded" else f"why {name}"}
        for name, st in nodes.items()
    ]
    return ResultDocument.model_validate({**raw, "status": status, "reason": reason})


def test_failed_nodes_are_the_failed_and_skipped_ones_in_workflow_order() -> None:
    doc = _document(a="skipped", b="succeeded", c="stopped", d="failed")
    assert [n.name for n in doc.failed_nodes()] == ["a", "d"]
    assert doc.problem() == "node 'a' skipped: why a; node 'd' failed: why d"


def test_a_completed_run_whose_nodes_succeeded_or_were_stopped_has_no_problem() -> None:
    doc = _document(a="succeeded", bg="stopped")
    assert doc.failed_nodes() == [] and doc.problem() is None


@pytest.mark.parametrize(
    ("status", "reason", "problem"),
    [
        (RunStatus.CANCELLED, "run cancelled", "run cancelled"),
        (RunStatus.CANCELLED, None, "cancelled"),
        (RunStatus.FAILED, "time limit of 5 s exceeded", "time limit of 5 s exceeded"),
        (RunStatus.FAILED, None, "the run failed"),
    ],
)
def test_a_run_that_did_not_complete_has_its_own_reason_as_its_problem(
    status: RunStatus, reason: str | None, problem: str
) -> None:
    doc = _document(status, reason, a="succeeded", b="skipped")
    assert doc.problem() == problem


def test_a_result_holds_only_ended_statuses_of_the_run_and_its_nodes() -> None:
    with pytest.raises(ValidationError, match="status"):
        _document(a="running")
    with pytest.raises(ValidationError, match="status"):
        _document(RunStatus.RUNNING, a="succeeded")
    assert _document(a="stopped").nodes[0].status is NodeStatus.STOPPED


def test_the_quality_table_has_one_row_per_figure_formatted_with_its_unit() -> None:
    chat = application(
        "chat",
        [],
        {},
        quality={
            "tokens_out": {"value": 31.25, "unit": "tokens/request", "count": 4},
            "decode_rate": {"value": 412.345, "unit": "tokens/s", "count": 4},
        },
    )
    captions = application(
        "cap",
        [],
        {},
        type="LiveCaptions",
        quality={"wer": QualityFigure(value=0.125, unit="fraction", count=2)},
    )
    bare = application("nap", [], {}, type="Sleep")
    rows = quality_table([chat, bare, captions])
    assert rows == [
        QualityRow("chat", "Chatbot", True, 2, "tokens_out", "31.2 tokens/request", 4),
        QualityRow("chat", "Chatbot", False, 2, "decode_rate", "412 tokens/s", 4),
        QualityRow("cap", "LiveCaptions", True, 1, "wer", "12.5 %", 2),
    ]


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (0.0, "fraction", "0.0 %"),
        (1.5, "fraction", "150.0 %"),
        (0.01234, "s/s", "0.0123 s/s"),
        (8, "images", "8 images"),
    ],
)
def test_a_quality_figure_is_shown_with_its_unit_and_a_fraction_as_a_percentage(
    value: float, unit: str, shown: str
) -> None:
    assert format_quality(QualityFigure(value=value, unit=unit, count=1)) == shown


def test_a_quality_figure_needs_a_number_a_unit_and_a_count() -> None:
    with pytest.raises(ValidationError, match="count"):
        QualityFigure.model_validate({"value": 1.0, "unit": "images", "count": -1})
    with pytest.raises(ValidationError, match="unit"):
        QualityFigure.model_validate({"value": 1.0, "count": 1})


def test_accelerators_name_each_nodes_device_the_captions_backend_chosen_and_a_clients_server() -> None:
    result = {
        "nodes": [
            {"name": "llm", "server": {"backend": "llama-server", "accelerator": "cuda:0 (NVIDIA H200)"}},
            {"name": "chat", "server": None},
        ],
        "applications": [
            {"name": "chat", "loaded": {"backend": "server", "server": "llm"}},
            {"name": "img", "loaded": {"accelerator": "mps (Apple silicon)"}},
            {
                "name": "cap",
                "loaded": {
                    "accelerator": "cpu",
                    "backend": "faster_whisper",
                    "backend_choice": "auto: a CTranslate2 model on the CPU",
                },
            },
            {"name": "old", "loaded": {"backend": "llama_cpp"}},
        ],
    }
    assert accelerators(result) == [
        "llm: cuda:0 (NVIDIA H200) (llama-server)",
        "chat: through model server 'llm'",
        "img: mps (Apple silicon)",
        "cap: cpu (faster_whisper; auto: a CTranslate2 model on the CPU)",
    ]


def test_traced_nodes_are_read_from_a_stored_result_mapping() -> None:
    from benchmarks.results import traced_nodes

    result = {"nodes": [{"name": "a", "kernel_trace": "artifacts/a/kernels.csv.gz"}, {"name": "b"}, "junk"]}
    assert traced_nodes(result) == ["a"] and traced_nodes({}) == []


def test_a_schedulers_settings_and_sm_shares_are_read_from_a_stored_result_mapping() -> None:
    checks = {"25": {"status": "passed", "sms": 33, "cached": True}, "50": {"status": "failed", "sms": 66}}
    partition = {
        "name": "partition",
        "params": {"memory_limit": None},
        "shares_percent": {"chat": 25, "image": 50},
        "product_check": checks,
    }
    settings = scheduler_settings({"scheduler": partition})
    assert settings == {
        "params": {"memory_limit": None},
        "shares_percent": {"chat": 25, "image": 50},
        "product_check": {"25": "passed", "50": "failed"},
    }
    assert format_shares(settings) == "chat 25 %, image 50 % (product check: 25 % passed, 50 % failed)"
    # credit-mps records its MPS partition under "mps"; a run from before the check has none.
    credit_mps = {"name": "credit-mps", "params": {}, "mps": {"shares_percent": {"chat": 33}}}
    assert (
        format_shares(scheduler_settings({"scheduler": credit_mps}))
        == "chat 33 % (no product check recorded)"
    )
    # Greedy has no shares; a result from before schedulers recorded their parameters says None.
    assert scheduler_settings({"scheduler": {"name": "greedy"}}) == {"params": None}
    assert format_shares(scheduler_settings({})) is None
    # Values of the wrong type (an old or hand-edited result) read as not recorded, never as an error.
    assert scheduler_settings({"scheduler": "partition"}) == {"params": None}
    odd = {"params": [1], "mps": "x", "shares_percent": {"a": 50}, "product_check": {"50": "passed"}}
    assert scheduler_settings({"scheduler": odd}) == {
        "params": None,
        "shares_percent": {"a": 50},
        "product_check": {"50": None},
    }


def test_a_row_has_its_attainments_interval_and_curve_from_the_applications_requests() -> None:
    def request(index: int, ttft: float) -> dict[str, Any]:
        return {
            "index": index,
            "arrival": 0.0,
            "start": 0.0,
            "end": ttft,
            "status": "ok",
            "warmup": False,
            "slo_met": ttft <= 1.0,
            "metrics": {"ttft": ttft},
            "info": {},
            "series": {},
            "error": None,
        }

    requests = [request(i, t) for i, t in enumerate((0.5, 0.95, 1.05, 1.3))]
    (row,) = slo_table([application("chat", ["ttft<=1.0s"], {"ttft": SUMMARY}, requests=requests)])
    detail = row.attainment_detail
    assert detail is not None and (detail.met, detail.due) == (2, 4)
    assert [value for _, value in detail.curve] == [0.25, 0.25, 0.5, 0.75, 0.75]
    assert 0 < detail.low < 0.5 < detail.high < 1
    # A stored result without its requests (the web keeps them apart) has no interval to give.
    (bare,) = slo_table([application("chat", ["ttft<=1.0s"], {"ttft": SUMMARY})])
    assert bare.attainment_detail is None


def test_a_run_is_void_when_its_product_check_failed_or_its_outputs_were_not_all_finite() -> None:
    finite = {"name": "image", "quality": {"finite_images": {"value": 1.0, "unit": "fraction", "count": 6}}}
    assert void_reasons({"applications": [finite]}) == []
    nan = {"name": "image", "quality": {"finite_images": {"value": 0.5, "unit": "fraction", "count": 6}}}
    assert void_reasons({"applications": [nan]}) == ["outputs not finite: image 50 % finite"]
    checked = {
        "shares_percent": {"chat": 25, "image": 50},
        "product_check": {"25": {"status": "passed"}, "50": {"status": "failed"}},
    }
    assert void_reasons({"scheduler": checked, "applications": [finite]}) == ["product check failed at 50 %"]
    # A run from before the check (none recorded) is not void for that alone.
    assert void_reasons({"scheduler": {"shares_percent": {"chat": 33}}, "applications": []}) == []
