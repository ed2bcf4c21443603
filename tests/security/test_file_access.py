"""Issue 17's file attacks, end to end: through the REST API, the web editor, run launch and the
worker (real database, real drivers), and the CLI (unrestricted unless asked)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from benchmarks.files import default_model_dirs
from benchmarks.spec.export import to_dict
from benchmarks.spec.load import load_yaml
from cbweb.runs.execution import run_execute
from cbweb.runs.models import Run
from cbweb.runs.services import run_spec_fields
from cbweb.workflows.models import Workflow, WorkflowVersion

ROOT = Path(__file__).parents[2]
AUDIO = ROOT / "benchmarks" / "data" / "audio" / "clip-1.flac"
OUTSIDE = "path outside the allowed data folders"


@pytest.fixture
def data_dir(tmp_path: Path, settings: Any) -> Path:
    """The server's only data folder for the test (models: the packaged ones and the cache)."""
    data = tmp_path / "data"
    data.mkdir()
    settings.CB_DATA_DIRS = [data]
    settings.CB_MODEL_DIRS = default_model_dirs()
    return data


def post_workflow(api: Any, yaml_text: str, name: str = "attack") -> Any:
    return api.post("/api/v1/workflows/", {"name": name, "yaml": yaml_text}, format="json")


def environ_sample() -> str:
    """A piece of this process's environment as /proc/self/environ holds it."""
    return Path("/proc/self/environ").read_bytes().split(b"\0")[0].decode()[:40]


def assert_refused(response: Any, field: str, message: str) -> None:
    assert response.status_code == 400, response.content
    body = response.json()
    assert [(e["field"], e["message"]) for e in body["errors"]] == [(field, message)], body
    assert Workflow.objects.count() == 0


# -- submit: the REST API ------------------------------------------------------------------------------


def test_a_trace_at_proc_self_environ_is_a_400_naming_the_field(api: Any, data_dir: Path) -> None:
    response = post_workflow(api, "s:\n  type: Sleep\n  arrival: {kind: trace, trace: /proc/self/environ}\n")
    assert_refused(response, "s.arrival.trace", f"{OUTSIDE}: field 'arrival.trace' of unit 's'")
    assert response.json()["errors"][0]["line"] == 3
    assert environ_sample() not in response.content.decode()


def test_a_livecaptions_reference_at_etc_passwd_is_a_400(api: Any, data_dir: Path) -> None:
    response = post_workflow(api, f"cap:\n  type: LiveCaptions\n  audio: {AUDIO}\n  reference: /etc/passwd\n")
    # The shipped clip is outside this server's data folder too: both are named, nothing else.
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["cap.audio", "cap.reference"]
    assert "root:" not in response.content.decode()


@pytest.mark.parametrize(
    ("key", "existing", "missing", "kind"),
    [
        ("model", "/etc/passwd", "/etc/no-such-model.gguf", "model"),
        ("prompts", "/etc/passwd", "/etc/no-such-prompts.jsonl", "data"),
        ("audio", "/etc/hostname", "/no/such/audio.wav", "data"),
    ],
)
def test_a_system_path_is_refused_with_the_same_answer_whether_it_exists_or_not(
    api: Any, data_dir: Path, key: str, existing: str, missing: str, kind: str
) -> None:
    type_ = "LiveCaptions" if key == "audio" else "Chatbot"
    answers = []
    for value in (existing, missing):
        response = post_workflow(api, f"u:\n  type: {type_}\n  {key}: {value}\n")
        assert response.status_code == 400
        answers.append(response.json())
    assert answers[0] == answers[1]
    assert answers[0]["errors"] == [
        {
            "field": f"u.{key}",
            "line": 3,
            "message": f"path outside the allowed {kind} folders: field '{key}' of unit 'u'",
        }
    ]


def test_prompts_at_dev_zero_is_refused_at_submit(api: Any, data_dir: Path) -> None:
    response = post_workflow(api, "chat:\n  type: Chatbot\n  prompts: /dev/zero\n")
    assert_refused(response, "chat.prompts", f"{OUTSIDE}: field 'prompts' of unit 'chat'")


def test_a_symlink_inside_the_data_folder_pointing_out_is_refused(
    api: Any, data_dir: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"prompt": "the secret"}\n')
    (data_dir / "prompts.jsonl").symlink_to(secret)
    response = post_workflow(api, f"chat:\n  type: Chatbot\n  prompts: {data_dir / 'prompts.jsonl'}\n")
    assert_refused(response, "chat.prompts", f"{OUTSIDE}: field 'prompts' of unit 'chat'")
    # A real file in the folder is accepted.
    (data_dir / "prompts.jsonl").unlink()
    shutil.copy(secret, data_dir / "prompts.jsonl")
    assert (
        post_workflow(api, f"chat:\n  type: Chatbot\n  prompts: {data_dir / 'prompts.jsonl'}\n").status_code
        == 201
    )


@pytest.mark.parametrize(
    ("value", "phrase"),
    [
        ("'C:\\Users\\alice\\prompts.jsonl'", "Windows-style path"),
        ("'\\\\fileserver\\share\\prompts.jsonl'", "Windows-style path"),
        ("file:///etc/passwd", "a URL"),
        ("https://example.org/prompts.jsonl", "a URL"),
    ],
)
def test_windows_paths_and_urls_are_refused_with_a_clear_message(
    api: Any, data_dir: Path, value: str, phrase: str
) -> None:
    response = post_workflow(api, f"chat:\n  type: Chatbot\n  prompts: {value}\n")
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["field"] == "chat.prompts" and phrase in error["message"]
    assert error["message"].endswith("field 'prompts' of unit 'chat'")


def test_a_spec_mapping_and_a_new_version_are_checked_too(api: Any, alice: Any, data_dir: Path) -> None:
    spec = {"s": {"type": "Sleep", "arrival": {"kind": "trace", "trace": "/etc/shadow"}}}
    response = api.post("/api/v1/workflows/", {"name": "json", "spec": spec}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "s.arrival.trace"
    created = post_workflow(api, "s: {type: Sleep}\n", name="ok")
    assert created.status_code == 201
    update = api.put(
        f"/api/v1/workflows/{created.json()['id']}/",
        {"yaml": "s:\n  type: Sleep\n  dataset: /etc/passwd\n"},
        format="json",
    )
    assert update.status_code == 400 and update.json()["errors"][0]["field"] == "s.dataset"
    assert WorkflowVersion.objects.count() == 1


# -- submit: the web editor --------------------------------------------------------------------------


def test_the_editor_import_and_save_refuse_a_path_outside(alice: Any, data_dir: Path) -> None:
    browser = Client()
    browser.force_login(alice)
    text = "s:\n  type: Sleep\n  arrival: {kind: trace, trace: /proc/self/environ}\n"
    imported = browser.post("/workflows/new/", {"action": "import", "yaml_text": text})
    assert imported.status_code == 400
    assert imported.context["import_errors"][0]["message"] == f"{OUTSIDE}: field 'arrival.trace' of unit 's'"

    from cbweb.workflows.editor import workflow_to_editor
    from cbweb.workflows.forms import build_editor
    from tests.cbweb.workflows.test_editor import post_data

    meta_initial, cards = workflow_to_editor(load_yaml(text))
    meta, formset = build_editor(meta_initial=meta_initial, cards_initial=cards)
    saved = browser.post("/workflows/new/", post_data(meta, formset))
    assert saved.status_code == 400
    [card] = saved.context["formset"].forms
    assert card.errors["arrival_trace"] == [f"{OUTSIDE}: field 'arrival.trace' of unit 's'"]
    assert Workflow.objects.count() == 0


# -- launch and run: a workflow stored before the policy existed -------------------------------------


def stored_before_the_policy(owner: Any, yaml_text: str) -> WorkflowVersion:
    workflow = Workflow.objects.create(name="old", owner=owner)
    return WorkflowVersion.objects.create(
        workflow=workflow, number=1, spec=to_dict(load_yaml(yaml_text)), yaml=yaml_text, created_by=owner
    )


def test_launching_a_stored_workflow_that_names_a_path_outside_is_a_400(
    api: Any, alice: Any, data_dir: Path
) -> None:
    version = stored_before_the_policy(
        alice, "s:\n  type: Sleep\n  arrival: {kind: trace, trace: /proc/self/environ}\n"
    )
    response = api.post("/api/v1/runs/", {"workflow": version.workflow_id}, format="json")
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["field"] == "version" and f"{OUTSIDE}: field 'arrival.trace' of unit 's'" in error["message"]
    assert Run.objects.count() == 0
    browser = Client()
    browser.force_login(alice)
    page = browser.post(
        f"/runs/launch/{version.workflow_id}/", {"version": version.pk, "scheduler": "greedy", "repeats": 1}
    )
    assert (
        page.status_code == 400
        and "field &#x27;arrival.trace&#x27; of unit &#x27;s&#x27;" in page.content.decode()
    )
    assert Run.objects.count() == 0


def test_the_worker_refuses_a_queued_run_that_names_a_path_outside(alice: Any, data_dir: Path) -> None:
    version = stored_before_the_policy(
        alice, "s:\n  type: Sleep\n  arrival: {kind: trace, trace: /proc/self/environ}\n"
    )
    run = Run.objects.create(**run_spec_fields(version=version), owner=alice, scheduler="greedy")
    assert run_execute(run_id=run.pk, worker="test") == "failed"
    run.refresh_from_db()
    assert f"{OUTSIDE}: field 'arrival.trace' of unit 's'" in run.error
    assert environ_sample() not in run.error


def test_a_bad_trace_file_inside_the_data_folder_fails_without_quoting_it(
    api: Any, alice: Any, data_dir: Path
) -> None:
    trace = data_dir / "trace.txt"
    trace.write_text("DJANGO_SECRET_KEY=do-not-leak-me\n")
    response = post_workflow(api, f"s:\n  type: Sleep\n  arrival: {{kind: trace, trace: {trace}}}\n")
    assert response.status_code == 201
    run = Run.objects.create(
        **run_spec_fields(version=WorkflowVersion.objects.get()), owner=alice, scheduler="greedy"
    )
    assert run_execute(run_id=run.pk, worker="test") == "failed"
    run.refresh_from_db()
    assert "field 'arrival.trace' of unit 's', line 1" in run.error and "do-not-leak-me" not in run.error


@pytest.mark.models
def test_an_allowed_reference_is_summarised_by_wer_only(api: Any, alice: Any, data_dir: Path) -> None:
    shutil.copy(AUDIO, data_dir / "talk.flac")
    reference = "zebra quantum marmalade accordion thunderstorm"
    (data_dir / "talk.ref").write_text(reference + "\n")
    yaml_text = (
        "cap:\n  type: LiveCaptions\n  model: whisper-tiny.en\n  device: cpu\n"
        f"  audio: {data_dir / 'talk.flac'}\n  reference: {data_dir / 'talk.ref'}\n"
    )
    assert post_workflow(api, yaml_text).status_code == 201
    run = api.post("/api/v1/runs/", {"workflow": Workflow.objects.get().pk}, format="json").json()
    assert run_execute(run_id=run["id"], worker="test") == "succeeded"
    result = api.get(f"/api/v1/runs/{run['id']}/result/").json()
    final = result["applications"][0]["requests"][-1]["info"]
    assert final["wer"] >= 0.8 and "reference" not in final
    csv = b"".join(Client().get(f"/runs/{run['id']}/files/cap.csv").streaming_content).decode()
    for text in (json.dumps(result), csv):
        for word in reference.split():
            assert word not in text
    assert str(data_dir) not in json.dumps(result["applications"][0]["loaded"])


# -- the CLI: the user's own machine, restricted only when asked ------------------------------------


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "benchmarks.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def test_the_cli_is_unrestricted_by_default_and_restricted_with_the_flag(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    trace = tmp_path / "home" / "trace.txt"
    trace.parent.mkdir()
    trace.write_text("0\n0.05\n")
    workflow = tmp_path / "w.yml"
    workflow.write_text(
        f"s:\n  type: Sleep\n  sleep_time: 0\n  num_requests: 2\n  arrival: {{kind: trace, trace: {trace}}}\n"
    )
    env = {"CB_DATA_DIRS": str(allowed)}
    assert cli("validate", "--check-files", str(workflow), env=env).returncode == 0
    ran = cli("run", str(workflow), "--out", str(tmp_path / "b1"), "--monitor-hz", "0", env=env)
    assert ran.returncode == 0, ran.stderr
    refused = cli("validate", "--restrict-files", str(workflow), env=env)
    assert refused.returncode == 1
    assert f"line 5: s.arrival.trace: {OUTSIDE}: field 'arrival.trace' of unit 's'" in refused.stdout
    # `run` refuses what `validate` refuses, the same way: exit 1, the field at its line.
    blocked = cli("run", "--restrict-files", str(workflow), "--out", str(tmp_path / "b2"), env=env)
    assert blocked.returncode == 1 and "line 5: s.arrival.trace" in blocked.stderr
    assert not (tmp_path / "b2").exists()
    # With the trace moved into the allowed folder, the restricted run goes ahead.
    workflow.write_text(workflow.read_text().replace(str(trace), str(allowed / "trace.txt")))
    shutil.copy(trace, allowed / "trace.txt")
    ok = cli(
        "run", "--restrict-files", str(workflow), "--out", str(tmp_path / "b3"), "--monitor-hz", "0", env=env
    )
    assert ok.returncode == 0, ok.stderr


def test_the_cli_never_reads_dev_zero_even_unrestricted(tmp_path: Path) -> None:
    workflow = tmp_path / "w.yml"
    workflow.write_text("chat:\n  type: Chatbot\n  prompts: /dev/zero\n")
    out = cli("validate", "--check-files", str(workflow))
    assert out.returncode == 1
    assert (
        "a path under /proc, /sys or /dev, which holds no data files: field 'prompts' of unit 'chat'"
        in out.stdout
    )
