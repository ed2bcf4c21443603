from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from cbweb.runs.execution import run_execute
from cbweb.runs.models import Run
from tests.cbweb.recorded import CHAT_YAML, PARTIAL_YAML, SLO_YAML


@pytest.fixture
def finished_run(alice: Any, make_workflow: Any, make_run: Any, finish_run: Any) -> Run:
    return finish_run(make_run(make_workflow(alice, yaml_text=SLO_YAML), alice))


def chart_data(html: str) -> dict[str, Any]:
    match = re.search(r'<script id="chart-data" type="application/json">(.*?)</script>', html, re.S)
    assert match, "the page has no chart data"
    return json.loads(match.group(1))


def test_result_page_shows_the_slo_table_and_hands_chart_data_over(finished_run: Run) -> None:
    html = Client().get(f"/runs/{finished_run.pk}/").content.decode()
    assert 'id="slo-table"' in html and "100 %" in html
    # Each SLO as its metric, bound and unit (stored structured, shown as the spec writes it).
    assert "<td>e2e&lt;=1.0s</td>" in html and "<td>step&lt;=1.0s</td>" in html
    # Goodput beside throughput: the requests that met the SLO, per second of the same window.
    chat = finished_run.application_results.get(name="chat")
    assert chat.goodput_rps == pytest.approx(chat.throughput_rps * chat.requests_met / chat.requests_counted)
    assert "<th>Goodput</th>" in html and f"{chat.goodput_rps:.2f} req/s" in html
    data = chart_data(html)
    assert [g["node"] for g in data["gantt"]] == ["chat", "spin"]
    latency = {(s["application"], s["metric"]): s for s in data["latency"]}
    assert latency[("chat", "e2e")]["slo_s"] == 1.0 and len(latency[("chat", "e2e")]["v"]) == 4
    assert len(latency[("spin", "step")]["v"]) == 3
    assert any(s["metric"] == "system.cpu_percent" for s in data["telemetry"])
    assert not any(re.match(r"cpu\d+\.", s["metric"]) for s in data["telemetry"])


def test_a_finished_run_tells_the_polling_page_to_reload(finished_run: Run) -> None:
    progress = Client().get(f"/runs/{finished_run.pk}/progress/").json()
    assert (progress["status"], progress["finished"]) == ("succeeded", True)


def test_result_page_numbers_are_the_engines(finished_run: Run) -> None:
    html = Client().get(f"/runs/{finished_run.pk}/").content.decode()
    chat = finished_run.application_results.get(name="chat")
    assert f"{chat.metrics['e2e']['p50']:.4f}" in html


def test_the_device_table_has_the_whole_run_the_serving_window_and_each_application(
    finished_run: Run,
) -> None:
    html = Client().get(f"/runs/{finished_run.pk}/").content.decode()
    table = html[html.index('id="telemetry-table"') :]
    windows = re.findall(r"<tr><td>([^<]+)</td>", table[: table.index("</table>")])
    assert windows == ["whole run", "serving (any application)", "chat", "spin"]
    serving = finished_run.result["telemetry"]["serving"]
    assert serving["active_from_s"] < serving["active_to_s"] <= finished_run.result["makespan_s"]


def test_downloads_serve_result_json_yaml_and_bundle_csvs(finished_run: Run) -> None:
    client = Client()
    document = json.loads(client.get(f"/runs/{finished_run.pk}/result.json").content)
    assert len(document["applications"][0]["requests"]) == 4
    assert client.get(f"/runs/{finished_run.pk}/workflow.yml").content.decode().startswith("name: sleepy")
    csv = client.get(f"/runs/{finished_run.pk}/files/chat.csv")
    assert csv.status_code == 200 and b"index,arrival_s" in b"".join(csv.streaming_content)


@pytest.mark.parametrize("path", ["../../etc/passwd", "%2e%2e/%2e%2e/etc/passwd", "nope.csv"])
def test_files_outside_the_bundle_are_404(finished_run: Run, path: str) -> None:
    assert Client().get(f"/runs/{finished_run.pk}/files/{path}").status_code == 404


def test_live_page_polls_progress_while_running(alice: Any, make_workflow: Any, make_run: Any) -> None:
    run = make_run(make_workflow(alice), alice)
    html = Client().get(f"/runs/{run.pk}/").content.decode()
    assert 'data-finished="0"' in html and 'http-equiv="refresh"' in html
    progress = Client().get(f"/runs/{run.pk}/progress/").json()
    assert progress["status"] == "queued" and progress["progress"]["nodes"]["first"]["total"] == 3
    assert progress["finished"] is False


def test_launch_form_queues_the_runs_and_redirects(alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    client = Client()
    client.force_login(alice)
    version = workflow.versions.get().pk
    response = client.post(
        f"/runs/launch/{workflow.pk}/", {"version": version, "scheduler": "greedy", "repeats": 1}
    )
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert run.status == "queued"
    response = client.post(
        f"/runs/launch/{workflow.pk}/", {"version": version, "scheduler": "greedy", "repeats": 3}
    )
    assert Run.objects.count() == 4 and "batch=" in response["Location"]


def test_cancel_button_of_another_user_is_forbidden(
    alice: Any, bob: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    client = Client()
    client.force_login(bob)
    assert client.post(f"/runs/{run.pk}/cancel/").status_code == 403
    assert Run.objects.get(pk=run.pk).status == "queued"


def test_compare_groups_repetitions_with_a_confidence_interval(
    alice: Any, make_workflow: Any, make_run: Any, finish_run: Any
) -> None:
    workflow = make_workflow(alice, yaml_text=SLO_YAML)
    single = make_run(workflow, alice)
    repeated = make_run(workflow, alice, repeats=2)
    for run in [single, *repeated]:
        assert finish_run(run).status == "succeeded"
    ids = [single.pk, *(r.pk for r in repeated)]
    response = Client().get("/runs/compare/", {"runs": ids})
    assert response.status_code == 200
    compare = response.context["compare"]
    assert [c["runs"] for c in compare["columns"]] == [[single.pk], [r.pk for r in repeated]]
    second = compare["columns"][1]
    assert second["mean_attainment"]["n"] == 2 and second["mean_attainment"]["low"] is not None
    assert second["applications"]["chat"]["cdfs"]["e2e"]["p"][-1] == 1.0
    assert len(second["applications"]["chat"]["cdfs"]["e2e"]["x"]) == 8
    # Every latency metric of an application has its CDF: the SLO's step, then e2e, then the time the
    # scheduler's gate held each request (0 under greedy).
    assert list(second["applications"]["spin"]["cdfs"]) == ["step", "e2e", "gate_wait"]
    assert compare["table"][0]["cells"][1]["delta_attainment"] == "+0.0 pt, not distinguishable"
    attainment_row = compare["run_rows"][0]
    assert (
        attainment_row["label"] == "Mean SLO attainment" and attainment_row["cells"][1]["delta"] == "+0.0 pt"
    )
    assert compare["warnings"] == []
    # Served of requested, summed over a column's runs: 4 + 3 requests per run.
    assert (second["requests_served"], second["requests_requested"], second["partial"]) == (14, 14, False)
    assert "<th>Requests served</th><td>7 of 7</td><td>14 of 14</td>" in response.content.decode()


def test_compare_needs_two_finished_runs(alice: Any, make_workflow: Any, make_run: Any) -> None:
    run = make_run(make_workflow(alice), alice)
    assert Client().get("/runs/compare/", {"runs": [run.pk]}).status_code == 302


def test_pages_render_for_anonymous_readers_and_can_require_login(db: Any, settings: Any) -> None:
    client = Client()
    for path in ("/workflows/", "/runs/", "/platforms/", "/leaderboard/", "/docs/metrics/"):
        assert client.get(path).status_code == 200, path
    settings.CB_READ_REQUIRES_LOGIN = True
    assert client.get("/runs/").status_code == 302


def test_images_in_the_bundle_are_shown_on_the_result_page(finished_run: Run) -> None:
    from pathlib import Path

    image = Path(finished_run.bundle_dir) / "artifacts" / "chat" / "image-0.png"
    image.parent.mkdir(parents=True)
    image.write_bytes(b"\x89PNG\r\n\x1a\n")
    html = Client().get(f"/runs/{finished_run.pk}/").content.decode()
    assert f'<img src="/runs/{finished_run.pk}/files/artifacts/chat/image-0.png"' in html
    response = Client().get(f"/runs/{finished_run.pk}/files/artifacts/chat/image-0.png")
    assert response["Content-Type"] == "image/png"


@pytest.fixture
def chat_runs(alice: Any, make_workflow: Any, make_run: Any, finish_run: Any) -> list[Run]:
    """Two repetitions of a chat run on the packaged SmolLM2 (one launch, so one compare column)."""
    runs = make_run(make_workflow(alice, name="chat", yaml_text=CHAT_YAML), alice, repeats=2)
    return [finish_run(run, "chat") for run in runs]


def test_the_result_and_compare_pages_show_each_applications_quality_figures(chat_runs: list[Run]) -> None:
    first = chat_runs[0]
    quality = first.application_results.get(name="chat").quality
    assert set(quality) == {"tokens_in", "tokens_out", "decode_rate"} and quality["tokens_out"]["count"] == 2
    assert first.result["applications"][0]["quality"] == quality
    assert first.summary["applications"][0]["quality"] == quality
    html = Client().get(f"/runs/{first.pk}/").content.decode()
    table = html[html.index('id="quality-table"') : html.index("</table>", html.index('id="quality-table"'))]
    rate = quality["decode_rate"]["value"]
    assert "<td>decode_rate</td>" in table and f"<td>{rate:.3g} tokens/s</td>" in table
    assert f"<td>{quality['tokens_out']['value']:.3g} tokens/request</td>" in table
    response = Client().get("/runs/compare/", {"runs": [r.pk for r in chat_runs]})
    (column,) = response.context["compare"]["columns"]
    figures = {q["name"]: q for q in column["applications"]["chat"]["quality"]}
    rates = [r.application_results.get(name="chat").quality["decode_rate"]["value"] for r in chat_runs]
    assert figures["decode_rate"]["value"]["mean"] == pytest.approx(sum(rates) / 2)
    assert figures["decode_rate"]["value"]["n"] == 2 and figures["decode_rate"]["unit"] == "tokens/s"
    assert 'class="quality">decode_rate' in response.content.decode()


def test_a_run_without_quality_figures_shows_no_quality_table(finished_run: Run) -> None:
    html = Client().get(f"/runs/{finished_run.pk}/").content.decode()
    assert 'id="slo-table"' in html and 'id="quality-table"' not in html


def test_a_partial_runs_attainment_is_labelled_of_requested_on_its_page_the_list_and_compare(
    finished_run: Run, alice: Any, make_workflow: Any, make_run: Any, finish_run: Any
) -> None:
    partial = finish_run(
        make_run(make_workflow(alice, name="partial", yaml_text=PARTIAL_YAML), alice), "partial"
    )
    assert partial.status == "failed"
    assert partial.summary["partial"] and partial.summary["headline"].endswith("% of requested")
    label = re.compile(r'<a class="of-requested" href="/docs/metrics/"[^>]*>of requested</a>')
    page = Client().get(f"/runs/{partial.pk}/").content.decode()
    mean = re.search(r'<b id="mean-attainment">(.*?)</b>', page, re.S)
    assert (
        mean and label.search(mean.group(1)) and mean.group(1).startswith("62 %")
    )  # (100 + 25) / 2, rounded
    # Every application's attainment too: chat 2 of 2, crash 1 of 4.
    cells = re.findall(r'<td rowspan="\d+" class="attainment">(.*?)</td>', page, re.S)
    assert [c.split(" %")[0] for c in cells] == ["100", "25"] and all(label.search(c) for c in cells)
    # A complete run's attainment is over what it served, which is what it was asked: no label.
    assert not label.search(Client().get(f"/runs/{finished_run.pk}/").content.decode())
    rows = Client().get("/runs/").content.decode().split("<tr data-run=")
    assert [bool(label.search(r)) for r in rows[1:]] == [True, False]  # newest first
    compare = Client().get("/runs/compare/", {"runs": [finished_run.pk, partial.pk]}).content.decode()
    mean_row = re.search(r"<th>Mean SLO attainment</th>(.*?)</tr>", compare, re.S)
    assert mean_row and [bool(label.search(c)) for c in mean_row.group(1).split("</td>")[:2]] == [False, True]
    crash_row = re.search(r"<th>crash</th>(.*?)</tr>", compare, re.S)
    assert crash_row and label.search(crash_row.group(1))


def test_the_owner_downloads_the_whole_bundle_as_one_zip(alice: Any, finished_run: Run) -> None:
    client = Client()
    client.force_login(alice)
    page = client.get(f"/runs/{finished_run.pk}/").content.decode()
    assert f'href="/runs/{finished_run.pk}/bundle.zip"' in page
    response = client.get(f"/runs/{finished_run.pk}/bundle.zip")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert f"run-{finished_run.pk}-bundle.zip" in response["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    root = Path(finished_run.bundle_dir)
    expected = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert sorted(n.removeprefix(f"run-{finished_run.pk}/") for n in archive.namelist()) == expected
    assert archive.read(f"run-{finished_run.pk}/chat.csv") == (root / "chat.csv").read_bytes()


def test_the_bundle_is_readable_as_the_runs_result_and_files_are(
    bob: Any, finished_run: Run, settings: Any
) -> None:
    # One rule for every form of a result: whoever may read the run's result.json and files may
    # download them in one archive.
    colleague = Client()
    colleague.force_login(bob)
    for reader in (colleague, Client()):
        assert 'id="download-bundle"' in reader.get(f"/runs/{finished_run.pk}/").content.decode()
        for path in ("bundle.zip", "result.json", "files/chat.csv"):
            assert reader.get(f"/runs/{finished_run.pk}/{path}").status_code == 200, path
    assert colleague.get("/runs/999999/bundle.zip").status_code == 404
    settings.CB_READ_REQUIRES_LOGIN = True
    for path in ("bundle.zip", "result.json", "files/chat.csv"):
        anonymous = Client().get(f"/runs/{finished_run.pk}/{path}")
        assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"], path
    assert colleague.get(f"/runs/{finished_run.pk}/bundle.zip").status_code == 200


def test_the_bundle_leaves_out_a_link_that_points_out_of_it(
    alice: Any, finished_run: Run, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not part of any run")
    (Path(finished_run.bundle_dir) / "escape.txt").symlink_to(secret)
    client = Client()
    client.force_login(alice)
    response = client.get(f"/runs/{finished_run.pk}/bundle.zip")
    names = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))).namelist()
    assert f"run-{finished_run.pk}/chat.csv" in names
    assert not any(n.endswith("escape.txt") for n in names)


def test_compare_warns_when_runs_ran_different_versions_and_links_their_diff(
    alice: Any, make_workflow: Any, make_run: Any, finish_run: Any
) -> None:
    from cbweb.workflows.services import workflow_update

    workflow = make_workflow(alice, yaml_text=SLO_YAML)
    first = make_run(workflow, alice)
    workflow_update(
        workflow=workflow, user=alice, yaml_text=SLO_YAML.replace("num_requests: 4", "num_requests: 5")
    )
    second = make_run(workflow, alice)
    for run in (first, second):
        assert finish_run(run).status == "succeeded"
    response = Client().get("/runs/compare/", {"runs": [first.pk, second.pk]})
    (warning,) = response.context["compare"]["warnings"]
    assert warning["message"] == (
        f"These runs ran different versions of workflow sleepy: v1 (run {first.pk}); v2 (run {second.pk})."
    )
    assert f'href="/workflows/{workflow.pk}/diff/?old=1&amp;new=2"' in response.content.decode()


def test_iec_bytes_writes_powers_of_1024() -> None:
    from cbweb.runs.templatetags.units import iec_bytes

    assert [iec_bytes(v) for v in (None, 512, 1536, 50 * 2**20, 3 * 2**30, 200 * 2**30)] == [
        "-",
        "512 B",
        "1.50 KiB",
        "50.0 MiB",
        "3.00 GiB",
        "200 GiB",
    ]


SERVED_YAML = """\
llm: {type: LLMServer, model: smollm2-135m, device: cpu, parallel: 2}
chat_a: {type: Chatbot, server: llm, num_requests: 2, max_tokens: 8, temperature: 0}
chat_b: {type: Chatbot, server: llm, num_requests: 2, max_tokens: 8, temperature: 0}
workflows:
  serve: {uses: llm, background: true}
  a: {uses: chat_a}
  b: {uses: chat_b}
"""


@pytest.mark.llama_server
def test_the_result_page_of_a_shared_model_server_run_shows_the_server_as_a_node(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice, name="served", yaml_text=SERVED_YAML), alice)
    assert run_execute(run_id=run.pk, worker="test") == "succeeded"
    run = Run.objects.get(pk=run.pk)
    html = Client().get(f"/runs/{run.pk}/").content.decode()
    data = chart_data(html)
    # The server is a bar of the Gantt and a row of the device table, but no application.
    gantt = {g["node"]: g for g in data["gantt"]}
    assert sorted(gantt) == ["a", "b", "serve"] and gantt["serve"]["load_time_s"] > 0
    assert sorted({s["application"] for s in data["latency"]}) == ["a", "b"]
    assert [a.name for a in run.application_results.order_by("name")] == ["a", "b"]
    table = html[html.index('id="telemetry-table"') :]
    assert "<tr><td>serve</td>" in table[: table.index("</table>")]
    nodes = {n["name"]: n for n in run.result["nodes"]}
    assert nodes["serve"]["server"]["parallel"] == 2 and nodes["a"].get("server") is None


def test_the_result_page_says_which_accelerator_each_node_ran_on(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    yaml_text = "t: {type: Synthetic, load: torch, matrix_size: 8, steps: 1, num_requests: 1, device: cpu}\n"
    run = make_run(make_workflow(alice, yaml_text=yaml_text), alice)
    assert run_execute(run_id=run.pk, worker="test") == "succeeded"
    html = Client().get(f"/runs/{run.pk}/").content.decode()
    assert '<dt>Ran on</dt><dd id="accelerators">t: cpu</dd>' in html


def test_the_result_page_names_the_nodes_whose_kernels_were_traced(finished_run: Run) -> None:
    html = Client().get(f"/runs/{finished_run.pk}/").content.decode()
    assert 'id="kernel-trace"' not in html
    # A bundle from `consumerbench run --kernel-trace` (imported): the result names each node's trace.
    node = finished_run.result["nodes"][0]
    node["kernel_trace"] = f"artifacts/{node['name']}/kernels.csv.gz"
    finished_run.save(update_fields=["result"])
    html = Client().get(f"/runs/{finished_run.pk}/").content.decode()
    assert f'<dt>Kernel trace</dt><dd id="kernel-trace">{node["name"]} <small>' in html
    assert "their latencies include the tracer's cost" in html


def test_the_result_page_gives_the_sm_share_of_each_node_of_an_mps_run(finished_run: Run) -> None:
    html = Client().get(f"/runs/{finished_run.pk}/").content.decode()
    assert 'id="sm-shares"' not in html  # greedy
    # A partition bundle from a GPU machine (imported): the result records the shares it ran with and
    # each share's product check, whatever its workflow asked for.
    finished_run.result["scheduler"] = {
        "name": "partition",
        "params": {"memory_limit": None, "stop_timeout_s": 10.0},
        "shares_percent": {"chat": 25, "image": 50},
        "product_check": {"25": {"status": "passed", "sms": 33}, "50": {"status": "passed", "sms": 66}},
    }
    finished_run.save(update_fields=["result"])
    html = Client().get(f"/runs/{finished_run.pk}/").content.decode()
    assert (
        '<dt>SM shares</dt><dd id="sm-shares">chat 25 %, image 50 % '
        "(product check: 25 % passed, 50 % passed) <small>"
    ) in html


def _stored(run: Run, e2es: list[float], requested: int, scheduler: dict[str, Any] | None = None) -> Run:
    """Store a result through the service that stores results: one Sleep application "tick" (SLO
    e2e <= 1 s) with one request per e2e, built by the engine's metrics as the runner builds them."""
    from benchmarks.metrics import application_metrics
    from benchmarks.results import ResultDocument
    from benchmarks.spec.model import parse_slo
    from cbweb.runs.services import run_claim, run_finish

    slo = parse_slo("e2e<=1s")
    requests = [
        {
            "index": i,
            "arrival": float(i),
            "start": float(i),
            "end": i + e2e,
            "status": "ok",
            "warmup": False,
            "slo_met": e2e <= 1.0,
            "metrics": {"e2e": e2e},
            "info": {},
            "series": {},
            "error": None,
        }
        for i, e2e in enumerate(e2es)
    ]
    figures = application_metrics(requests, [slo], requested)
    app = {
        "name": "tick",
        "unit": "tick",
        "type": "Sleep",
        "device": "cpu",
        "priority": "low",
        "model": None,
        "loaded": {},
        "slo": [slo.model_dump()],
        "load_time_s": 0.0,
        "requests_total": len(e2es),
        "requests_requested": requested,
        "requests_counted": figures["requests_counted"],
        "requests_met": figures["requests_met"],
        "slo_attainment": figures["slo_attainment"],
        "metrics": figures["metrics"],
        "normalized_latency": figures["normalized_latency"],
        "throughput_rps": figures["throughput_rps"],
        "requests": requests,
    }
    node = {
        "name": "tick",
        "uses": "tick",
        "background": False,
        "device": "cpu",
        "status": "succeeded",
        "started_at": 0.0,
        "finished_at": float(len(e2es)) + 1,
        "load_time_s": 0.0,
        "reason": None,
    }
    document = {
        "schema_version": 3,
        "status": "completed",
        "reason": None,
        "workflow": {},
        "scheduler": {"name": "greedy", **(scheduler or {})},
        "platform": {},
        "repeat_index": 1,
        "started_at_unix": 0.0,
        "clock": {},
        "makespan_s": float(len(e2es)) + 1,
        "critical_path": ["tick"],
        "mean_attainment": figures["slo_attainment"],
        "fairness": None,
        "requests_requested": requested,
        "requests_served": len(e2es),
        "nodes": [node],
        "applications": [app],
    }
    run_claim(run_id=run.pk, worker="test")
    return run_finish(run_id=run.pk, result=ResultDocument.model_validate(document))


TICK_YAML = """\
tick:
  type: Sleep
  sleep_time: 0.1
  num_requests: 5
  slo: ["e2e<=1s"]
"""


def test_the_result_page_shows_the_attainment_with_its_interval_and_its_threshold_curve(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    # 3 of 5 within 1 s, the others just past it: the curve climbs from 20 % at 0.8 s to 100 % at 1.25 s.
    run = _stored(make_run(make_workflow(alice, yaml_text=TICK_YAML), alice), [0.5, 0.85, 0.95, 1.05, 1.2], 5)
    html = Client().get(f"/runs/{run.pk}/").content.decode()
    table = html[html.index('id="slo-table"') : html.index("</table>", html.index('id="slo-table"'))]
    # Wilson's 95 % interval of 3 of 5: 23.1 % to 88.2 %.
    assert '60 % <span class="ci">[23-88 %]</span>' in table
    bars = re.findall(r'title="thresholds x([\d.]+): (\d+) %"', table)
    assert bars == [("0.8", "20"), ("0.9", "40"), ("1.0", "60"), ("1.1", "80"), ("1.25", "100")]
    assert table.count("curve-point at-slo") == 1


def test_compare_cuts_intervals_to_the_possible_range_and_leaves_void_runs_out_with_their_reason(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    runs = make_run(make_workflow(alice, yaml_text=TICK_YAML), alice, repeats=4)
    for run, e2e in zip(runs[:3], (2.0, 2.0, 0.5), strict=True):
        _stored(run, [e2e], 1)
    # The fourth met its SLO on shares whose matrix products came out wrong: void, not a 4th sample.
    wrong = {"shares_percent": {"tick": 33}, "product_check": {"33": {"status": "failed", "sms": 44}}}
    _stored(runs[3], [0.5], 1, scheduler=wrong)
    other = _stored(make_run(make_workflow(alice, name="other", yaml_text=TICK_YAML), alice), [0.5] * 5, 5)
    response = Client().get("/runs/compare/", {"runs": [other.pk, *(r.pk for r in runs)]})
    compare = response.context["compare"]
    column = compare["columns"][1]
    assert column["void"] == [f"run {runs[3].pk}: product check failed at 33 %"]
    # Attainments 0, 0, 1: mean 1/3 with the t interval +-1.43 cut to 0-100 %.
    assert column["mean_attainment"] == {"mean": pytest.approx(1 / 3), "low": 0.0, "high": 1.0, "n": 3}
    html = response.content.decode()
    assert '33 % <span class="ci">[0-100 %]</span> <small>(n=3)</small>' in html and "±" not in html
    assert f"run {runs[3].pk}: product check failed at 33 %" in html[html.index('id="compare-void"') :]
    # Requests pooled: 1 of 3 against 5 of 5, Wilson intervals [6-79 %] and [57-100 %] overlap.
    assert compare["table"][0]["cells"][1]["delta_attainment"] == "-66.7 pt, not distinguishable"
