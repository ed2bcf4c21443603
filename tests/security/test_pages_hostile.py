"""Hostile reads of the pages: malformed query strings, NUL bytes, numbers in other scripts' digits,
huge searches and diffs, and anonymous clients reading in a loop.

Malformed query strings 500ed on pages where the API answered 400 (``/runs/?batch=x``,
``?workflow=²``, NUL bytes in filters, ``/runs/<id>/files/%00``); every page now checks its query
with the API's filters (or its own form) and answers 400. On PostgreSQL (CI) a NUL reaching a query
is a server error, so these tests mean most there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client

from cbweb.platforms.services import platform_register
from cbweb.runs.execution import run_execute
from cbweb.workflows.services import workflow_update

pytestmark = pytest.mark.django_db

NAP = "nap:\n  type: Sleep\n  sleep_time: 0.01\n  num_requests: 2\n  slo: ['e2e<1s']\n"

# (label, value): the malformed values every parameter of every page is tried with.
MALFORMED = [
    ("non-digits", "x"),
    ("superscript digit", "²"),
    ("arabic-indic digits", "١٢"),
    ("NUL", "\x00"),
    ("NUL inside", "1\x002"),
    ("beyond bigint", str(2**63)),
    ("far beyond bigint", "9" * 300),
    ("negative", "-1"),
    ("empty", ""),
    ("very long", "y" * 5000),
]


@dataclass(frozen=True)
class Param:
    """One query parameter of a page, and which malformed values it must refuse with a 400."""

    name: str
    kind: str  # int | text | text200 | search | hex | uuid | choice | date
    required: bool = False

    def refuses(self, value: str) -> bool:
        if value == "":
            return self.required  # an empty field of a filter form means "not given"
        if self.kind == "text":
            return "\x00" in value or len(value) > 50
        if self.kind == "text200":
            return "\x00" in value or len(value) > 200
        if self.kind == "search":
            return "\x00" in value or any(not 2 <= len(w) <= 64 for w in value.split())
        if self.kind == "hex":
            return not all(c in "0123456789abcdef" for c in value) or len(value) > 64
        return True  # ids, numbers, UUIDs, choices, dates: none of the malformed values is one


@pytest.fixture(autouse=True)
def _reads_not_throttled(settings: Any) -> None:
    # Hundreds of anonymous reads from one address: the anonymous read throttle has its own tests.
    settings.CB_THROTTLE_ANON_READS = ""


@pytest.fixture
def site(alice: Any, make_workflow: Any, make_run: Any) -> dict[str, Any]:
    """Two finished runs of a workflow with two versions, and two platforms."""
    workflow = make_workflow(alice, name="nap", yaml_text=NAP)
    workflow_update(workflow=workflow, user=alice, yaml_text=NAP.replace("0.01", "0.02"))
    runs = make_run(workflow, alice, repeats=2)
    for run in runs:
        assert run_execute(run_id=run.pk, worker="test") == "succeeded"
    platforms = [
        platform_register(fingerprint={"id": f"box-{i}", "host": f"box-{i}", "cpu": "EPYC", "gpus": []})
        for i in (1, 2)
    ]
    return {"workflow": workflow.pk, "runs": [r.pk for r in runs], "platforms": [p.pk for p in platforms]}


def pages(site: dict[str, Any]) -> list[tuple[str, dict[str, list[str]], list[Param]]]:
    """Every page that reads a query: its path, a valid query, and its parameters."""
    wf, runs, plats = (
        str(site["workflow"]),
        [str(r) for r in site["runs"]],
        [str(p) for p in site["platforms"]],
    )
    text = ("scheduler", "owner", "branch", "tag")
    return [
        (
            "/runs/",
            {},
            [
                Param("status", "choice"),
                Param("workflow", "int"),
                Param("platform", "int"),
                Param("batch", "uuid"),
            ]
            + [Param(name, "text") for name in text]
            + [Param("commit", "hex"), Param("search", "search")],
        ),
        ("/runs/compare/", {"runs": runs}, [Param("runs", "int")]),
        (f"/runs/history/{wf}/", {}, [Param("order", "choice")]),
        (
            "/platforms/compare/",
            {"workflow": [wf], "platforms": plats},
            [Param("workflow", "int", required=True), Param("platforms", "int", required=True)],
        ),
        (f"/platforms/{plats[0]}/", {}, []),
        (
            "/leaderboard/",
            {"workflow": [wf]},
            [
                Param("workflow", "int", required=True),
                Param("version", "int"),
                Param("platform", "int"),
                Param("scheduler", "choice"),
                Param("since", "date"),
                Param("until", "date"),
                Param("sort", "choice"),
            ],
        ),
        ("/workflows/", {}, [Param("search", "text200"), Param("owner", "int"), Param("archived", "choice")]),
        (
            f"/workflows/{wf}/diff/",
            {"old": ["1"], "new": ["2"]},
            [Param("old", "int", required=True), Param("new", "int", required=True)],
        ),
    ]


def test_every_page_answers_a_malformed_query_with_400_and_never_500(site: dict[str, Any]) -> None:
    client = Client(raise_request_exception=False)
    failures = []
    tried = 0
    for path, valid, params in pages(site):
        assert client.get(path, valid).status_code == 200, path
        for param in params:
            for label, value in MALFORMED:
                # The value alone, then after a valid one (a repeated parameter: the last one counts,
                # or every one of a list).
                for values in ([value], [*valid.get(param.name, []), value], [value, value]):
                    query = urlencode({**valid, param.name: values}, doseq=True)
                    status = client.get(f"{path}?{query}").status_code
                    tried += 1
                    refused = param.refuses(value)
                    expected = {400} if refused else {200, 302}
                    if status not in expected:
                        failures.append(
                            f"{path} {param.name}={label} x{len(values)}: {status}, wanted {expected}"
                        )
    assert tried > 700
    assert not failures, "\n".join(failures)


def test_the_api_refuses_what_the_runs_page_refuses(site: dict[str, Any]) -> None:
    client = Client(raise_request_exception=False)
    for param in pages(site)[0][2]:
        for label, value in MALFORMED:
            if value == "":
                continue
            page = client.get("/runs/", {param.name: value}).status_code
            api = client.get("/api/v1/runs/", {param.name: value}).status_code
            assert (page, api) == ((400, 400) if param.refuses(value) else (200, 200)), (param.name, label)


@pytest.mark.parametrize("path", ["%00", "chat.csv%00", "a%00/../b", "%00%00"])
def test_a_nul_in_a_run_files_path_is_400(site: dict[str, Any], path: str) -> None:
    client = Client(raise_request_exception=False)
    response = client.get(f"/runs/{site['runs'][0]}/files/{path}")
    assert response.status_code == 400
    assert "NUL" in response.content.decode()


def test_the_400_page_names_the_parameter(site: dict[str, Any]) -> None:
    client = Client(raise_request_exception=False)
    html = client.get("/runs/?batch=x").content.decode()
    assert 'data-status="400"' in html and "batch" in html
    html = client.get("/runs/?workflow=²").content.decode()
    assert 'data-status="400"' in html and "workflow" in html


def test_a_run_search_of_100_one_letter_words_is_refused_on_the_page_and_the_api(
    site: dict[str, Any],
) -> None:
    client = Client(raise_request_exception=False)
    attack = " ".join("abcdefghijklmnopqrstuvwxyz"[i % 26] for i in range(100))
    for path in ("/runs/", "/api/v1/runs/"):
        assert client.get(path, {"search": attack}).status_code == 400
    api = client.get("/api/v1/runs/", {"search": attack}).json()
    assert "at most 8 words of 2 to 64 characters" in api["message"]
    assert client.get("/runs/", {"search": "ab " * 9}).status_code == 400
    assert client.get("/runs/", {"search": "x" * 65}).status_code == 400
    # Eight words of two to 64 characters still search.
    found = client.get("/api/v1/runs/", {"search": "nap " * 7 + "n" * 64}).json()
    assert found["count"] == 0
    assert client.get("/api/v1/runs/", {"search": "nap na"}).json()["count"] == 2
    assert client.get("/runs/", {"search": "nap " * 8}).status_code == 200


def _big_version(seed: str) -> str:
    """A valid workflow of about 1 MB: a description whose every line differs between seeds."""
    lines = [f"  {seed} {i:07d} " + "z" * 80 for i in range(10_500)]
    return "description: |\n" + "\n".join(lines) + "\n" + NAP


def test_the_diff_of_two_1mb_versions_offers_both_downloads_instead(alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice, name="big", yaml_text=_big_version("a"))
    workflow_update(workflow=workflow, user=alice, yaml_text=_big_version("b"))
    assert len(workflow.versions.get(number=1).yaml) > 950_000
    response = Client().get(f"/workflows/{workflow.pk}/diff/")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="diff-too-large"' in html and "Too large to diff here" in html
    assert f'href="/workflows/{workflow.pk}/v/1/yaml/"' in html
    assert f'href="/workflows/{workflow.pk}/v/2/yaml/"' in html
    # The page repeats neither version (it was 3.8 MB).
    assert len(response.content) < 20_000
    assert 'id="diff-unified"' not in html


def test_a_small_diff_is_still_shown(alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice, name="small", yaml_text=NAP)
    workflow_update(workflow=workflow, user=alice, yaml_text=NAP.replace("0.01", "0.02"))
    html = Client().get(f"/workflows/{workflow.pk}/diff/").content.decode()
    assert 'id="diff-unified"' in html and "diff-too-large" not in html


def test_anonymous_reads_are_throttled_per_address_on_pages_and_the_api(
    site: dict[str, Any], alice: Any, settings: Any
) -> None:
    settings.CB_THROTTLE_ANON_READS = "5/m"
    anonymous = Client(raise_request_exception=False)
    for path in ("/runs/", f"/runs/{site['runs'][0]}/", "/workflows/", "/api/v1/runs/", "/leaderboard/"):
        assert anonymous.get(path).status_code == 200, path
    page = anonymous.get("/runs/")
    assert page.status_code == 429 and int(page["Retry-After"]) > 0
    assert 'data-status="429"' in page.content.decode()
    assert anonymous.get("/api/v1/runs/").status_code == 429
    # Another address has its own count; a signed-in reader is not throttled.
    assert anonymous.get("/runs/", REMOTE_ADDR="10.0.0.2").status_code == 200
    signed_in = Client()
    signed_in.force_login(alice)
    assert all(signed_in.get("/runs/").status_code == 200 for _ in range(10))
