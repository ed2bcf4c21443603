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


# -- one user filling the lab's queue -------------------------------------------------------------------


def launch_page(user: Any) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def test_after_a_429_on_the_api_the_launch_form_is_throttled_too(
    api: Any, alice: Any, make_workflow: Any, settings: Any
) -> None:
    settings.CB_THROTTLE_WRITES = "3/h"
    workflow = make_workflow(alice)
    codes = [
        api.post("/api/v1/runs/", {"workflow": workflow.pk}, format="json").status_code for _ in range(4)
    ]
    assert codes == [201, 201, 201, 429]
    browser = launch_page(alice)
    version = workflow.versions.get()
    for _ in range(4):
        page = browser.post(
            f"/runs/launch/{workflow.pk}/", {"version": version.pk, "scheduler": "greedy", "repeats": 50}
        )
        assert page.status_code == 429 and "try again in" in page.content.decode()
        assert int(page["Retry-After"]) > 0
    assert Run.objects.count() == 3


def test_editor_saves_and_previews_are_throttled(alice: Any, settings: Any) -> None:
    settings.CB_THROTTLE_WRITES = "2/h"
    settings.CB_THROTTLE_PREVIEWS = "3/m"
    browser = launch_page(alice)
    yaml_text = "s:\n  type: Sleep\n  num_requests: 1\n"
    saves = [
        browser.post("/workflows/new/", {"action": "import", "yaml_text": yaml_text}).status_code
        for _ in range(3)
    ]
    assert saves[-1] == 429 and 429 not in saves[:2]
    previews = [
        browser.post("/workflows/preview/", {"action": "check"}, HTTP_ACCEPT="application/json")
        for _ in range(4)
    ]
    assert [p.status_code == 429 for p in previews] == [False, False, False, True]
    assert "try again in" in previews[-1].json()["errors"][0]["message"]


def test_four_launches_of_50_repeats_queue_no_more_than_the_per_user_cap(
    alice: Any, make_workflow: Any, settings: Any
) -> None:
    settings.CB_MAX_QUEUED_RUNS_PER_USER = 20
    workflow = make_workflow(alice)
    version = workflow.versions.get()
    browser = launch_page(alice)
    first = browser.get(f"/runs/launch/{workflow.pk}/")
    assert "You have 0 queued runs; the lab allows 20 per user" in first.content.decode()
    pages = [
        browser.post(
            f"/runs/launch/{workflow.pk}/", {"version": version.pk, "scheduler": "greedy", "repeats": repeats}
        )
        for repeats in (50, 50, 15, 10)
    ]
    assert [p.status_code for p in pages] == [400, 400, 302, 400]
    assert "you have 15 queued run(s) and the lab allows 20 per user: 5 more can be queued now" in (
        pages[-1].content.decode().replace("&#x27;", "'")
    )
    assert Run.objects.filter(owner=alice, status=Run.Status.QUEUED).count() == 15


def test_queued_runs_start_in_turns_across_users_not_first_come_first_served(
    alice: Any, bob: Any, make_workflow: Any, make_run: Any
) -> None:
    from cbweb.runs import selectors, services

    mine = make_run(make_workflow(alice), alice, repeats=3)
    theirs = make_run(make_workflow(bob), bob)
    assert selectors.run_ahead_in_queue(run=theirs) == 1  # alice's first, then bob's turn
    assert selectors.run_ahead_in_queue(run=mine[2]) == 3

    def claim(message: Run) -> int | None:
        return services.run_claim_fair(run_id=message.pk, worker="w", same_queue=lambda pk: True)

    # Each broker message claims the run whose turn it is, whichever run it was sent for.
    order = [claim(message) for message in (*mine, theirs)]
    assert order == [mine[0].pk, theirs.pk, mine[1].pk, mine[2].pk]
    assert claim(theirs) is None  # every run was claimed once; a duplicate message finds nothing


def test_a_run_on_another_queue_is_not_taken_out_of_turn(
    alice: Any, bob: Any, make_workflow: Any, make_run: Any
) -> None:
    from cbweb.runs import services

    gpu = make_run(make_workflow(alice), alice)
    cpu = make_run(make_workflow(bob), bob)
    claimed = services.run_claim_fair(run_id=cpu.pk, worker="w", same_queue=lambda pk: pk == cpu.pk)
    assert claimed == cpu.pk
    gpu.refresh_from_db()
    assert gpu.status == Run.Status.QUEUED


# -- the model server ----------------------------------------------------------------------------------


def packaged_gguf() -> Path:
    from benchmarks.models import resolve

    model = resolve("smollm2-135m", ("gguf",), "test")
    assert model.path is not None
    return model.path


@pytest.fixture
def dot_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FilePolicy, Path]:
    """The attack: the worker's working directory holds a .gguf that links outside every model folder;
    the one model folder holds a model of its own."""
    models, work, outside = tmp_path / "models", tmp_path / "work", tmp_path / "outside"
    for folder in (models, work, outside):
        folder.mkdir()
    (models / "allowed.gguf").symlink_to(packaged_gguf())
    (outside / "secret.gguf").symlink_to(packaged_gguf())
    (work / "stolen.gguf").symlink_to(outside / "secret.gguf")
    monkeypatch.chdir(work)
    return FilePolicy.restricted([tmp_path / "data"], [models, packaged_gguf().parent]), models


def test_model_dot_resolves_inside_the_model_folders_not_in_the_working_directory(
    dot_model: tuple[FilePolicy, Path],
) -> None:
    from benchmarks.spec.load import load_yaml

    policy, models = dot_model
    unit = load_yaml("srv:\n  type: LLMServer\n  model: .\n").applications["srv"]
    resolved = policy.resolve_model(unit, ("gguf",), "LLMServer")
    assert resolved.path is not None and resolved.path.parent == models


@pytest.mark.llama_server
def test_an_llm_server_with_model_dot_loads_the_allowed_model_and_answers_only_its_clients(
    dot_model: tuple[FilePolicy, Path], tmp_path: Path
) -> None:
    """The run records the model folder's file, not the working directory's link; while it runs, a
    request without the run's key (another local user's) is refused and /v1/models names no path."""
    import json
    import urllib.error
    import urllib.request

    from benchmarks.runner import run_workflow
    from benchmarks.spec.load import load_yaml

    policy, _ = dot_model
    text = (
        "srv:\n  type: LLMServer\n  model: .\n  n_ctx: 512\n"
        "chat:\n  type: Chatbot\n  server: srv\n  num_requests: 2\n  max_tokens: 4\n"
        "workflows:\n  srv: {uses: srv, background: true}\n  chat: {uses: chat}\n"
    )
    seen: dict[str, Any] = {}

    class Probe:
        """A sink that, once the server has loaded, calls it as another local user would."""

        def on_event(self, event: Any) -> None:
            url = (event.get("loaded") or {}).get("url") if event.get("kind") == "load_end" else None
            if url and "models" not in seen:
                try:
                    urllib.request.urlopen(f"{url}/v1/chat/completions", data=b"{}", timeout=5)
                except urllib.error.HTTPError as exc:
                    seen["completion"] = exc.code
                try:
                    with urllib.request.urlopen(f"{url}/v1/models", timeout=5) as reply:
                        seen["models"] = json.loads(reply.read())
                except urllib.error.HTTPError as exc:
                    seen["models"] = exc.code

    result = run_workflow(load_yaml(text), files=policy, sink=Probe())
    [server] = [n.server for n in result.nodes if n.name == "srv"]
    assert server is not None and server["file"] == "allowed.gguf"
    assert seen["completion"] == 401
    # Refused too, or answered naming the model as the workflow does, never by its path here.
    models = seen["models"]
    assert models == 401 or (str(tmp_path) not in json.dumps(models) and "/" not in models["data"][0]["id"])


def test_the_temporary_folders_of_a_killed_runner_are_swept_and_a_live_ones_kept(tmp_path: Path) -> None:
    import signal

    from benchmarks.runner.dag import sweep_dead_temp_folders, temp_prefix

    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    left = tmp_path / f"consumerbench-private-{dead.pid}-abc123"
    left.mkdir()
    (left / "server.log").write_text("x")
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    mine = tmp_path / f"{temp_prefix('private')}xyz789"
    mine.mkdir()
    other = tmp_path / "consumerbench-notes"
    other.mkdir()
    assert sweep_dead_temp_folders(tmp_path) == [left]
    assert not left.exists() and mine.exists() and other.exists()
