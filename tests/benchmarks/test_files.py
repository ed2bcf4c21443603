"""The file access policy (benchmarks/files.py): which paths a workflow may name, what is read, where
a run writes."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

from benchmarks.apps import APP_TYPES
from benchmarks.apps.base import read_trace
from benchmarks.files import (
    UNRESTRICTED,
    FileAccessError,
    FilePolicy,
    bundle_path,
    file_fields,
    is_model_name,
    policy_from_env,
)
from benchmarks.models import ResolvedModel
from benchmarks.results import load_bundle, write_bundle
from benchmarks.runner import PreflightError, preflight, run_workflow
from benchmarks.spec.load import load_yaml
from benchmarks.spec.model import DATA_FILE, DATA_FILE_OR_FOLDER, MODEL, Application, AppOptions, FileField

OUTSIDE = "path outside the allowed data folders"


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path, FilePolicy]:
    data, models = tmp_path / "data", tmp_path / "models"
    data.mkdir()
    models.mkdir()
    return data, models, FilePolicy.restricted([data], [models])


def unit(text: str) -> Application:
    (only,) = load_yaml(text, name="t").applications.values()
    return only


# -- which fields name files: derived from the spec's markers -------------------------------------


def test_every_file_field_of_every_application_type_is_found_from_the_spec_markers() -> None:
    found = {
        name: sorted(
            key
            for key, info in app.options.model_fields.items()
            if any(isinstance(m, FileField) for m in info.metadata)
        )
        for name, app in APP_TYPES.items()
    }
    assert found == {
        "Chatbot": ["prompts"],
        "DeepResearch": ["documents", "questions"],
        "ImageGen": ["prompts"],
        "LiveCaptions": ["audio", "client_command_file", "reference"],
        "LLMServer": [],
        "Sleep": [],
        "Synthetic": [],
    }
    app = unit(
        "c:\n  type: LiveCaptions\n  audio: [a.wav, b.wav]\n  reference: r.txt\n  dataset: d\n"
        "  arrival: {kind: trace, trace: t.txt}\n"
    )
    assert [(r.loc, r.value) for r in file_fields(app)] == [
        (("arrival", "trace"), "t.txt"),
        (("audio", 0), "a.wav"),
        (("audio", 1), "b.wav"),
        (("dataset",), "d"),
        (("model",), "whisper-tiny.en"),
        (("reference",), "r.txt"),
    ]


def test_a_new_marked_option_is_checked_without_being_listed_anywhere(roots: Any) -> None:
    class FutureOptions(AppOptions):
        weights_file: Annotated[str | None, DATA_FILE] = Field(None)

    base = unit("s: {type: Sleep}\n")
    future = base.model_copy(update={"options": FutureOptions(weights_file="/etc/shadow")})
    [(loc, message)] = roots[2].unit_problems(future)
    assert loc == ("weights_file",) and message == f"{OUTSIDE}: field 'weights_file' of unit 's'"


# -- the path check ---------------------------------------------------------------------------------


def test_the_refusal_is_the_same_for_an_existing_and_a_missing_file(roots: Any) -> None:
    policy = roots[2]
    assert Path("/etc/passwd").exists()
    assert policy.refusal("/etc/passwd", DATA_FILE) == policy.refusal("/etc/no-such-file-xyz", DATA_FILE)
    assert policy.refusal("/etc/passwd", DATA_FILE) == OUTSIDE


def test_dotdot_is_collapsed_and_tilde_expanded_before_the_check(roots: Any, monkeypatch: Any) -> None:
    data, _, policy = roots
    assert policy.refusal(f"{data}/../../etc/passwd", DATA_FILE) == OUTSIDE
    assert policy.refusal(f"{data}/sub/../prompts.jsonl", DATA_FILE) is None
    monkeypatch.setenv("HOME", str(data.parent))
    assert policy.refusal("~/data/prompts.jsonl", DATA_FILE) is None
    assert policy.refusal("~/elsewhere.jsonl", DATA_FILE) == OUTSIDE


def test_a_symlink_inside_an_allowed_root_pointing_out_is_refused(roots: Any, tmp_path: Path) -> None:
    data, _, policy = roots
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    (data / "link.txt").symlink_to(secret)
    (data / "dirlink").symlink_to(tmp_path)
    (data / "ok.txt").write_text("1\n")
    (data / "inner.txt").symlink_to(data / "ok.txt")
    assert policy.refusal(str(data / "link.txt"), DATA_FILE) == OUTSIDE
    assert policy.refusal(str(data / "dirlink" / "secret.txt"), DATA_FILE) == OUTSIDE
    assert policy.refusal(str(data / "inner.txt"), DATA_FILE) is None
    with pytest.raises(FileAccessError) as exc:
        policy.read_text(data / "link.txt", DATA_FILE, "field 'reference' of unit 'c'")
    assert "top secret" not in str(exc.value)


@pytest.mark.parametrize(
    "value", ["C:\\Users\\me\\prompts.jsonl", "c:/data/x", "\\\\server\\share\\x", "//server/share/x", "a\\b"]
)
def test_windows_style_paths_are_refused_with_a_clear_message(value: str) -> None:
    for policy in (UNRESTRICTED, FilePolicy.restricted(["/"], ["/"])):
        assert "Windows-style path" in (policy.refusal(value, DATA_FILE) or "")


@pytest.mark.parametrize("value", ["file:///etc/passwd", "file:/etc/passwd", "http://x/y.jsonl", "s3://b/k"])
def test_urls_are_refused_with_a_clear_message(value: str) -> None:
    for policy in (UNRESTRICTED, FilePolicy.restricted(["/"], ["/"])):
        assert (policy.refusal(value, DATA_FILE) or "").startswith("a URL")


def test_catalogue_names_and_random_models_are_not_paths(roots: Any) -> None:
    policy = roots[2]
    for name in ("smollm2-135m", "whisper-tiny.en", "sd-tiny@random", " llama-tiny@random "):
        assert is_model_name(name) and policy.refusal(name, MODEL) is None
    # A hub id, an unknown @random or any other value is a path: outside the model folders.
    for value in ("org/model", "nope@random", "/usr/lib/model.gguf"):
        assert policy.refusal(value, MODEL) == "path outside the allowed model folders"
    assert policy.refusal(str(roots[1] / "m.gguf"), MODEL) is None


def test_a_model_folder_with_an_entry_pointing_out_is_refused(roots: Any, tmp_path: Path) -> None:
    _, models, policy = roots
    folder = models / "whisper"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    policy.model_path(str(folder), "field 'model' of unit 'c'")
    (folder / "model.bin").symlink_to(tmp_path / "elsewhere.bin")
    with pytest.raises(FileAccessError, match="outside the allowed model folders"):
        policy.model_path(str(folder), "field 'model' of unit 'c'")


# -- what is read -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["/dev/zero", "/proc/self/environ", "/sys/kernel/notes"])
def test_device_and_kernel_files_are_never_read_even_unrestricted(value: str) -> None:
    with pytest.raises(FileAccessError, match="field 'prompts' of unit 'chat'"):
        UNRESTRICTED.read_bytes(value, DATA_FILE, "field 'prompts' of unit 'chat'")


def test_a_fifo_is_refused_without_blocking(roots: Any) -> None:
    data, _, policy = roots
    fifo = data / "prompts.jsonl"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            policy.read_text(fifo, DATA_FILE, "field 'prompts' of unit 'chat'")
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert isinstance(outcome[0], FileAccessError) and "not a regular file" in str(outcome[0])


def test_each_read_has_a_size_cap(roots: Any) -> None:
    data, _, policy = roots
    big = data / "big.jsonl"
    big.write_bytes(b"x" * (2 * 1024 * 1024 + 1))
    small = FileField("data", max_bytes=2 * 1024 * 1024)
    with pytest.raises(FileAccessError, match="larger than 2 MiB"):
        policy.read_bytes(big, small, "field 'prompts' of unit 'chat'")
    big.write_bytes(b"x" * 10)
    assert policy.read_bytes(big, small, "field 'prompts' of unit 'chat'") == b"x" * 10


def test_a_folder_field_checks_every_file_read_from_it(roots: Any, tmp_path: Path) -> None:
    data, _, policy = roots
    docs = data / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n")
    (tmp_path / "secret.md").write_text("secret\n")
    assert [p.name for p in policy.folder_files(docs, DATA_FILE_OR_FOLDER, "w", (".md",))] == ["a.md"]
    with pytest.raises(FileAccessError, match="names a file, not a folder"):
        policy.folder_files(docs, DATA_FILE, "w", (".md",))
    (docs / "b.md").symlink_to(tmp_path / "secret.md")
    with pytest.raises(FileAccessError, match=r"outside the allowed data folders: w \(b.md\)"):
        policy.folder_files(docs, DATA_FILE_OR_FOLDER, "w", (".md",))


def test_a_bad_trace_line_is_reported_by_line_without_its_text(tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    trace.write_text("0.5\nDATABASE_URL=postgres://user:hunter2@db/x\n")
    app = unit(f"s:\n  type: Sleep\n  arrival: {{kind: trace, trace: {trace}}}\n")
    with pytest.raises(FileAccessError) as exc:
        read_trace(app, UNRESTRICTED)
    assert str(exc.value) == (
        "field 'arrival.trace' of unit 's', line 2: expected one arrival time (seconds) per line"
    )


def test_preflight_reads_nothing_when_the_policy_refuses_a_path(roots: Any, tmp_path: Path) -> None:
    workflow = load_yaml(
        "chat:\n  type: Chatbot\n  prompts: /etc/passwd\n"
        "  arrival: {kind: trace, trace: /proc/self/environ}\n"
    )
    assert preflight(workflow, roots[2]) == [
        f"{OUTSIDE}: field 'arrival.trace' of unit 'chat'",
        f"{OUTSIDE}: field 'prompts' of unit 'chat'",
    ]


def test_the_run_refuses_a_stored_workflow_and_the_driver_checks_again(roots: Any, tmp_path: Path) -> None:
    policy = roots[2]
    outside = tmp_path / "trace.txt"
    outside.write_text("0\n0.1\n")
    workflow = load_yaml(
        f"s:\n  type: Sleep\n  sleep_time: 0\n  arrival: {{kind: trace, trace: {outside}}}\n"
    )
    with pytest.raises(PreflightError, match=r"arrival\.trace"):
        run_workflow(workflow, files=policy, monitor_hz=None)
    # Unrestricted (the CLI's default), the same workflow runs.
    result = run_workflow(workflow, monitor_hz=None)
    assert result.status == "completed" and len(result.applications[0].requests) == 1


def test_policy_from_env_reads_comma_separated_folders(tmp_path: Path) -> None:
    policy = policy_from_env({"CB_DATA_DIRS": f"{tmp_path}/a, {tmp_path}/b", "CB_MODEL_DIRS": ""})
    assert policy.data_roots == (tmp_path / "a", tmp_path / "b")
    assert policy.model_roots and all(p.is_absolute() for p in policy.model_roots)


# -- where a run writes ------------------------------------------------------------------------------


@pytest.mark.parametrize("part", ["..", ".", "", "a/b", "..\\x", "/etc"])
def test_bundle_path_refuses_names_that_are_not_one_file_name(tmp_path: Path, part: str) -> None:
    with pytest.raises(ValueError):
        bundle_path(tmp_path, part)


def test_bundle_path_refuses_a_symlink_out_of_the_run_folder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "chat.csv").symlink_to(tmp_path / "victim.csv")
    with pytest.raises(ValueError, match="outside the run's result folder"):
        bundle_path(run, "chat.csv")
    assert bundle_path(run, "image.csv") == run / "image.csv"


def test_write_bundle_refuses_an_application_name_that_would_leave_the_folder(tmp_path: Path) -> None:
    result = load_bundle(Path(__file__).parent / "fixtures" / "result-v1.json")
    result.applications[0] = result.applications[0].model_copy(update={"name": "../../x"})
    with pytest.raises(ValueError):
        write_bundle(result, tmp_path / "run")
    assert not (tmp_path / "x.csv").exists()


# -- results record no paths of this machine ----------------------------------------------------------


def test_a_model_is_recorded_by_name_file_name_and_sha256(tmp_path: Path) -> None:
    gguf = tmp_path / "deep" / "model.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF" + b"\0" * 64)
    record = ResolvedModel("my-model", "path", "gguf", path=gguf).record()
    assert record["file"] == "model.gguf" and len(record["sha256"]) == 64
    assert str(tmp_path) not in repr(record) and "path" not in record


@pytest.mark.models
def test_a_result_holds_no_server_paths_or_environment(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("CB_SECRET_MARKER", "marker-8c1f9e")
    workflow = load_yaml(
        "chat:\n  type: Chatbot\n  model: smollm2-135m\n  num_requests: 1\n  max_tokens: 2\n  device: cpu\n"
    )
    out = tmp_path / "bundle"
    write_bundle(run_workflow(workflow, out_dir=out, monitor_hz=None), out)
    text = (out / "result.json").read_text() + "".join(p.read_text() for p in out.glob("*.csv"))
    for server_path in (sys.prefix, os.getcwd(), str(tmp_path), str(Path.home())):
        assert server_path not in text
    assert "marker-8c1f9e" not in text
    assert '"file": "SmolLM2-135M-Instruct.Q4_1.gguf"' in text.replace("\n", "")


def test_a_trace_shorter_than_the_requests_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    trace.write_text("0\n")
    workflow = load_yaml(
        f"s:\n  type: Sleep\n  num_requests: 3\n  arrival: {{kind: trace, trace: {trace}}}\n"
    )
    assert preflight(workflow) == [
        "field 'arrival.trace' of unit 's': the trace holds 1 arrival times for 3 requests (warm-up included)"
    ]


# -- model search under a restricted policy (hub ids, CB_MODEL_DIRS) --------------------------------


def _gguf(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF" + b"\0" * 16)
    return path


def _chat(model: str) -> Application:
    return unit(f"c:\n  type: Chatbot\n  model: {model}\n")


def test_a_hub_id_resolves_on_a_server_only_when_the_hub_cache_is_a_model_folder(
    roots: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.benchmarks.models.conftest import make_hub_repo

    _, models, policy = roots
    outside = tmp_path / "hf-outside"
    make_hub_repo(outside, "org/chat", {"m.gguf": _gguf(tmp_path / "src.gguf")})
    monkeypatch.setenv("HF_HUB_CACHE", str(outside))
    assert UNRESTRICTED.resolve_model(_chat("org/chat"), ("gguf",), "Chatbot").hub_id == "org/chat"
    assert policy.refusal("org/chat", MODEL) == "path outside the allowed model folders"
    with pytest.raises(FileAccessError, match="outside the allowed model folders: field 'model' of unit 'c'"):
        policy.resolve_model(_chat("org/chat"), ("gguf",), "Chatbot")
    inside = models / "hf"
    make_hub_repo(inside, "org/chat", {"m.gguf": _gguf(tmp_path / "src.gguf")})
    monkeypatch.setenv("HF_HUB_CACHE", str(inside))
    assert policy.refusal("org/chat", MODEL) is None
    model = policy.resolve_model(_chat("org/chat"), ("gguf",), "Chatbot")
    assert model.path is not None and model.path.resolve().is_relative_to(models.resolve())


def test_a_hub_snapshot_linking_out_of_the_model_folders_is_refused(
    roots: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.benchmarks.models.conftest import make_hub_repo

    _, models, policy = roots
    snapshot = make_hub_repo(models / "hf", "org/chat", {"m.gguf": _gguf(tmp_path / "src.gguf")})
    (snapshot / "m.gguf").unlink()
    (snapshot / "m.gguf").symlink_to(_gguf(tmp_path / "secret.gguf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(models / "hf"))
    with pytest.raises(FileAccessError, match="outside the allowed model folders"):
        policy.resolve_model(_chat("org/chat"), ("gguf",), "Chatbot")


def test_the_environments_model_search_path_does_not_widen_a_restricted_policy(
    roots: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, models, policy = roots
    _gguf(tmp_path / "elsewhere" / "m.gguf")
    monkeypatch.setenv("CB_MODEL_DIRS", str(tmp_path / "elsewhere"))
    monkeypatch.chdir(tmp_path)
    assert (
        UNRESTRICTED.resolve_model(_chat("m.gguf"), ("gguf",), "Chatbot").path
        == tmp_path / "elsewhere" / "m.gguf"
    )
    assert policy.refusal("m.gguf", MODEL) == "path outside the allowed model folders"
    # On a server the model folders are the search path: a relative name is found inside them.
    _gguf(models / "llama" / "m.gguf")
    assert policy.refusal("llama/m.gguf", MODEL) is None
    assert (
        policy.resolve_model(_chat("llama/m.gguf"), ("gguf",), "Chatbot").path == models / "llama" / "m.gguf"
    )
    (models / "link.gguf").symlink_to(tmp_path / "elsewhere" / "m.gguf")
    assert policy.refusal("link.gguf", MODEL) == "path outside the allowed model folders"


def test_a_recognised_name_at_random_reads_no_file_and_passes_any_policy(roots: Any) -> None:
    policy = roots[2]
    for value in ("meta-llama/Llama-3.2-3B-Instruct@random", "/etc/Llama-3.2-3B.gguf@random"):
        assert is_model_name(value) and policy.refusal(value, MODEL) is None
    assert policy.refusal("/etc/passwd@random", MODEL) == "path outside the allowed model folders"


def test_a_model_name_the_file_system_cannot_look_up_is_refused_not_crashed_on(roots: Any) -> None:
    policy = roots[2]
    assert policy.refusal("org/" + "x" * 5000, MODEL) == "path outside the allowed model folders"
