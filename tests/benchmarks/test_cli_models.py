"""Models named as the original ConsumerBench's configs name them: `validate --check-files --weights
random`, `consumerbench models`, and a run offline from a Hugging Face cache (a real subprocess)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from benchmarks.models.catalogue import RANDOM
from tests.benchmarks.models.conftest import make_hub_repo

ROOT = Path(__file__).parents[2]
ORIGINAL = ROOT / "examples" / "original-models.yml"


def cli(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env},
    )


@pytest.fixture
def bare_env(tmp_path: Path) -> dict[str, str]:
    """A machine without the weights: an empty hub cache and model search path, a private cache."""
    return {
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "1",
        "CB_MODEL_DIRS": f"{tmp_path / 'models-a'}{os.pathsep}{tmp_path / 'models-b'}",
        "CB_CACHE_DIR": str(tmp_path / "cache"),
    }


# The workflow's chatbot gets a model server (server_model + client_model): validate checks its binary.
@pytest.mark.llama_server
def test_without_the_weights_validate_lists_the_places_searched_for_each_model(tmp_path, bare_env):
    out = cli("validate", "--check-files", str(ORIGINAL), env=bare_env)
    assert out.returncode == 1
    assert "4 problem(s)" in out.stdout
    line = next(x for x in out.stdout.splitlines() if "line 18: deep_research" in x)
    assert f"./meta-llama/Llama-3.2-3B-Instruct (working folder {ROOT})" in line
    assert f"{tmp_path}/models-a/meta-llama/Llama-3.2-3B-Instruct (CB_MODEL_DIRS)" in line
    assert f"{tmp_path}/models-b/meta-llama/Llama-3.2-3B-Instruct (CB_MODEL_DIRS)" in line
    assert f"{tmp_path}/hf/hub/models--meta-llama--Llama-3.2-3B-Instruct (Hugging Face cache)" in line


# The workflow's chatbot gets a model server (server_model + client_model): validate checks its binary.
@pytest.mark.llama_server
def test_with_random_weights_the_original_names_validate_and_models_shows_each_twin(bare_env):
    # The twins that run at the same time, at most SD 3.5 medium (12.6 GB in float32 on the CPU) beside
    # the chatbot's server (6.4 GB), are checked together against the memory available.
    needed = RANDOM["sd3.5-medium"].memory_bytes("cpu") + RANDOM["llama-3.2-3b"].memory_bytes("cpu")
    if psutil.virtual_memory().available < needed:
        pytest.skip(f"this machine has less than {needed / 1e9:.1f} GB of memory available")
    out = cli("validate", "--check-files", "--weights", "random", str(ORIGINAL), env=bare_env)
    assert out.returncode == 0, out.stdout
    shown = cli("models", "--json", str(ORIGINAL), env=bare_env)
    units = json.loads(shown.stdout)["files"][str(ORIGINAL)]
    # server_model + client_model: the chatbot's model is its own server's (workflow-format.md).
    assert {name: u["twin"]["model"] for name, u in units.items()} == {
        "chatbot_server": "llama-3.2-3b@random",
        "imagegen": "sd3.5-medium@random",
        "deep_research": "llama-3.2-3b@random",
        "live_captions": "whisper-large-v3-turbo@random",
    }
    assert all(u["found"] is None and u["tried"] for u in units.values())
    text = cli("models", str(ORIGINAL), env=bare_env).stdout
    assert "random twin: sd3.5-medium@random" in text and "not found; looked for" in text


def test_a_large_model_is_refused_on_the_cpu_with_the_memory_it_needs(tmp_path, bare_env):
    path = tmp_path / "big.yml"
    path.write_text("chat:\n  type: chatbot\n  model: meta-llama/Llama-3.3-70B-Instruct\n  device: cpu\n")
    out = cli("validate", "--check-files", "--weights", "random", str(path), env=bare_env)
    assert out.returncode == 1
    assert "'meta-llama/Llama-3.3-70B-Instruct@random' (llama-3.1-70b shapes" in out.stdout
    assert "needs about 141.1 GB of memory on the CPU" in out.stdout


@pytest.mark.models
def test_a_workflow_naming_models_by_hub_id_runs_offline_from_the_hugging_face_cache(tmp_path, bare_env):
    """The GGUF and the diffusers folder are generated with the @random builders, then laid out as
    huggingface_hub caches them; the run loads them by hub id with the network switched off."""
    import torch

    from benchmarks.models.random_image import build_random_pipeline
    from benchmarks.models.random_llama import random_gguf

    os.environ["CB_CACHE_DIR"] = bare_env["CB_CACHE_DIR"]
    try:
        gguf = random_gguf(RANDOM["llama-tiny"])
    finally:
        del os.environ["CB_CACHE_DIR"]
    sd = tmp_path / "sd"
    build_random_pipeline(RANDOM["sd-tiny"], 0, torch.float32).save_pretrained(sd)
    hub = tmp_path / "hf" / "hub"
    make_hub_repo(hub, "tiny-org/tiny-llama-GGUF", {"tiny-llama-f16.gguf": gguf})
    sd_files = {p.name: p for p in sd.iterdir()}
    make_hub_repo(hub, "tiny-org/tiny-sd", sd_files)
    shutil.rmtree(sd)
    workflow = tmp_path / "hub.yml"
    workflow.write_text(
        "chat:\n  type: chatbot\n  model: tiny-org/tiny-llama-GGUF\n  num_requests: 1\n  max_tokens: 4\n"
        "image:\n  type: imagegen\n  model: tiny-org/tiny-sd\n  num_requests: 1\n  steps: 2\n"
        "  height: 64\n  width: 64\n"
    )
    out = cli("run", str(workflow), "--out", str(tmp_path / "bundle"), "--monitor-hz", "0", env=bare_env)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads((tmp_path / "bundle" / "result.json").read_text())
    records = {app["name"]: app["loaded"] for app in result["applications"]}
    assert records["chat"]["source"] == "hub" and records["chat"]["hub_id"] == "tiny-org/tiny-llama-GGUF"
    assert records["chat"]["file"] == "tiny-llama-f16.gguf"
    assert records["image"]["hub_id"] == "tiny-org/tiny-sd" and records["image"]["format"] == "diffusers"


def test_models_without_a_file_lists_the_catalogue_with_each_format(bare_env):
    out = cli("models", "--json", env=bare_env)
    listed = {m["name"]: m["format"] for m in json.loads(out.stdout)["catalogue"]}
    assert listed["smollm2-135m"] == "gguf" and listed["llama-3.1-70b@random"] == "gguf"
    assert listed["sdxl@random"] == "diffusers" and listed["whisper-medium@random"] == "transformers"
