"""Hostile load: the requests that stalled the server or leaked its resources, sent as the attack sent them.

Each test drives the real path (the API through the Django test client, the editor page, the
engine's file policy, the worker's run execution) and checks what the attacker gets and what the
server keeps: an answer in bounded time, a clear error, no descriptor left open.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from benchmarks.files import FileAccessError, FilePolicy
from benchmarks.spec.model import DATA_FILE
from cbweb.runs.execution import run_execute
from cbweb.runs.models import Run
from cbweb.runs.services import run_spec_fields
from cbweb.workflows.models import WorkflowVersion

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(300)]

SCAN = Path(__file__).with_name("regex_scan.py")


# -- a body of escaped quotes -----------------------------------------------------------------------


def escaped_quotes(size: int) -> bytes:
    """The attack body: a JSON object whose string never ends, made of ``\\"`` pairs."""
    head = b'{"yaml": "'
    return head + b'\\"' * ((size - len(head)) // 2)


def test_a_150_kb_body_of_escaped_quotes_is_refused_in_well_under_a_second_of_work(api: Any) -> None:
    body = escaped_quotes(150_000)
    start = time.monotonic()
    response = api.post("/api/v1/workflows/validate/", body, content_type="application/json")
    elapsed = time.monotonic() - start
    assert response.status_code == 400, response.content[:300]
    assert "JSON parse error" in response.json()["message"]
    # The quadratic scan took minutes at this size; a linear one takes milliseconds. The bound is
    # generous for a loaded machine and still far below what one stalled worker would cost.
    assert elapsed < 5, f"the body took {elapsed:.1f} s to refuse"


def test_three_such_bodies_in_a_row_leave_the_api_answering(api: Any) -> None:
    for _ in range(3):
        api.post("/api/v1/workflows/validate/", escaped_quotes(150_000), content_type="application/json")
    assert api.get("/api/v1/workflows/").status_code == 200


def test_every_regular_expression_the_product_applies_grows_linearly_on_backtracking_inputs() -> None:
    """Runs tests/security/regex_scan.py in its own process (a pattern that explodes would otherwise
    hang this one): it finds every pattern in the source and the URL table and times each on runs of
    its own literals; no finding, no pattern it could not evaluate."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "cbweb.settings"}
    try:
        done = subprocess.run(
            [sys.executable, str(SCAN)], capture_output=True, text=True, timeout=240, env=env, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        last = [line for line in out.splitlines() if line.startswith("checking")][-1:]
        pytest.fail(f"the scan did not finish in 240 s; it was on: {last}")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    findings = [line for line in lines if not line.startswith("checking") and '"patterns"' not in line]
    assert findings == []
    count = int(lines[-1].split(":")[1].strip(" }"))
    assert count >= 30, lines[-1]  # the scan found the product's patterns, not an empty list


# -- a folder where a data file belongs --------------------------------------------------------------


@pytest.fixture
def data_dir(tmp_path: Path, settings: Any) -> Path:
    from benchmarks.files import default_model_dirs

    data = tmp_path / "data"
    (data / "folder").mkdir(parents=True)
    settings.CB_DATA_DIRS = [data]
    settings.CB_MODEL_DIRS = default_model_dirs()
    return data


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_reading_a_folder_as_a_data_file_is_refused_1000_times_without_a_descriptor_left_open(
    data_dir: Path,
) -> None:
    policy = FilePolicy.restricted([data_dir], [])
    before = open_descriptors()
    for _ in range(1_000):
        with pytest.raises(FileAccessError, match="field 'trace' of unit 's': not a regular file"):
            policy.read_text(data_dir / "folder", DATA_FILE, "field 'trace' of unit 's'")
    assert open_descriptors() == before


def test_a_folder_swapped_in_after_the_check_is_refused_and_closed(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The descriptor check itself: the first look saw a file, the opened thing is a folder."""
    policy = FilePolicy.restricted([data_dir], [])
    monkeypatch.setattr(FilePolicy, "regular_file", lambda self, value, field, where: Path(value))
    before = open_descriptors()
    for _ in range(100):
        with pytest.raises(FileAccessError, match="not a regular file"):
            policy.read_bytes(data_dir / "folder", DATA_FILE, "here")
    assert open_descriptors() == before


def trace_workflow(path: Path) -> str:
    return f"s:\n  type: Sleep\n  num_requests: 1\n  arrival: {{kind: trace, trace: {path}}}\n"


def test_the_editor_check_of_a_folder_in_a_data_field_answers_with_the_field_not_a_500(
    alice: Any, data_dir: Path
) -> None:
    browser = Client()
    browser.force_login(alice)
    from benchmarks.spec.load import load_yaml
    from cbweb.workflows.editor import workflow_to_editor
    from cbweb.workflows.forms import build_editor
    from tests.cbweb.workflows.test_editor import post_data

    chat = f"c:\n  type: Chatbot\n  model: smollm2-135m\n  prompts: {data_dir / 'folder'}\n"
    meta_initial, cards = workflow_to_editor(load_yaml(chat))
    meta, formset = build_editor(meta_initial=meta_initial, cards_initial=cards)
    before = open_descriptors()
    for _ in range(60):
        page = browser.post("/workflows/new/", {**post_data(meta, formset), "action": "check"})
        assert page.status_code == 400, page.status_code
    assert "field &#x27;prompts&#x27; of unit &#x27;c&#x27;: not a regular file" in page.content.decode()
    assert open_descriptors() <= before + 2  # the test client's own connections, not 60 leaks


def test_the_worker_fails_a_run_whose_data_file_is_a_folder_with_the_field_named(
    alice: Any, data_dir: Path
) -> None:
    from benchmarks.spec.export import to_dict
    from benchmarks.spec.load import load_yaml
    from cbweb.workflows.models import Workflow

    text = trace_workflow(data_dir / "folder")
    workflow = Workflow.objects.create(name="folder", owner=alice)
    version = WorkflowVersion.objects.create(
        workflow=workflow, number=1, spec=to_dict(load_yaml(text)), yaml=text, created_by=alice
    )
    run = Run.objects.create(**run_spec_fields(version=version), owner=alice, scheduler="greedy")
    assert run_execute(run_id=run.pk, worker="test") == "failed"
    run.refresh_from_db()
    assert "field 'arrival.trace' of unit 's'" in run.error and "not a regular file" in run.error
    assert "IsADirectoryError" not in run.error and "Errno" not in run.error


# -- bodies too large to read -------------------------------------------------------------------------


def test_an_anonymous_300_mb_upload_to_the_editor_is_refused_before_anything_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The body claims 300 MB; the guard answers from the header alone. Were any middleware to read
    the body (the CSRF check reads POST before the login check), the short payload would end early."""
    from django.http import HttpRequest

    def no_reading(self: HttpRequest, *args: Any) -> bytes:
        raise AssertionError("the body was read")

    monkeypatch.setattr(HttpRequest, "read", no_reading)
    monkeypatch.setattr(HttpRequest, "body", property(no_reading))
    response = Client().post(
        "/workflows/new/",
        data=b"--x\r\n",
        content_type="multipart/form-data; boundary=x",
        CONTENT_LENGTH=str(300 * 1024 * 1024),
    )
    assert response.status_code == 413
    assert "over the limit" in response.content.decode()


def test_an_api_body_over_the_request_limit_is_a_413_in_the_api_error_shape(api: Any, settings: Any) -> None:
    settings.CB_MAX_REQUEST_BYTES = 4096
    response = api.post("/api/v1/workflows/validate/", {"yaml": "a" * 8000}, format="json")
    assert response.status_code == 413
    body = response.json()
    assert set(body) == {"message", "errors"} and "over the limit of 4096 bytes" in body["message"]


def test_a_chunked_body_without_a_length_is_refused(api: Any) -> None:
    response = api.post(
        "/api/v1/workflows/validate/",
        b"{}",
        content_type="application/json",
        CONTENT_LENGTH="",
        HTTP_TRANSFER_ENCODING="chunked",
    )
    assert response.status_code == 411


def test_a_body_within_the_request_limit_still_reaches_the_api(api: Any) -> None:
    response = api.post("/api/v1/workflows/validate/", {"yaml": "s: {type: Sleep}\n"}, format="json")
    assert response.status_code == 200, response.content[:300]


def test_a_long_path_is_refused_before_the_admin_url_patterns_try_it() -> None:
    """``admin/r/<path>/<path>/`` backtracks in time quadratic in the path: the path is capped first."""
    response = Client().get("/admin/" + "r/" * 4000)
    assert response.status_code == 414
