"""Before a run: the models of nodes that can run at the same time must fit the CPU's memory together."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from benchmarks.runner import memory_problems
from benchmarks.runner.checks import cpu_model_bytes
from benchmarks.spec.load import load_yaml
from tests.benchmarks.test_cli import cli

GB = 10**9
# llama-3.2-3b: 3.21 B parameters x 2 bytes (f16 GGUF); sd3.5-medium: 3.15 B x 4 bytes (float32).
LLAMA_GB, SD_GB = 6.4, 12.6
SIDE_BY_SIDE = """
chat: {type: chatbot, model: meta-llama/Llama-3.2-3B-Instruct@random, device: cpu}
image: {type: imagegen, model: stabilityai/stable-diffusion-3.5-medium-turbo@random, device: cpu}
"""


def test_two_models_that_fit_alone_but_not_together_are_refused_with_the_set_and_each_size():
    workflow = load_yaml(SIDE_BY_SIDE)
    [problem] = memory_problems(workflow, available_bytes=15 * GB)
    assert problem == (
        "nodes that can run at the same time load random models on the CPU that need about 19.0 GB of "
        "memory together, and this machine has 15.0 GB available: "
        f"chat (meta-llama/Llama-3.2-3B-Instruct@random, {LLAMA_GB} GB), "
        f"image (stabilityai/stable-diffusion-3.5-medium-turbo@random, {SD_GB} GB); "
        "make some depend_on the others, use device: gpu or smaller models"
    )
    assert memory_problems(workflow, available_bytes=20 * GB) == []


def test_models_that_run_one_after_another_are_not_added_up():
    workflow = load_yaml(SIDE_BY_SIDE + "workflows:\n  c: {uses: chat}\n  i: {uses: image, depend_on: [c]}\n")
    assert memory_problems(workflow, available_bytes=15 * GB) == []


def test_a_background_node_runs_beside_its_dependents_so_its_model_counts_with_theirs():
    text = (
        SIDE_BY_SIDE + "workflows:\n  c: {uses: chat, background: true}\n  i: {uses: image, depend_on: [c]}\n"
    )
    [problem] = memory_problems(load_yaml(text), available_bytes=15 * GB)
    assert "c (meta-llama" in problem and "i (stabilityai" in problem


def test_a_shared_model_server_counts_once_whatever_its_clients():
    workflow = load_yaml("""
llm: {type: LLMServer, model: llama-3.2-3b@random, device: cpu, parallel: 3}
chat_a: {type: Chatbot, server: llm}
chat_b: {type: Chatbot, server: llm}
research: {type: DeepResearch, server: llm}
workflows:
  serve: {uses: llm, background: true}
  a: {uses: chat_a, depend_on: [serve]}
  b: {uses: chat_b, depend_on: [serve]}
  r: {uses: research, depend_on: [serve]}
""")
    assert cpu_model_bytes(workflow) == {"serve": round(3.21 * GB * 2)}
    assert memory_problems(workflow, available_bytes=7 * GB) == []


def test_each_session_loads_its_own_copy():
    workflow = load_yaml("chat: {type: chatbot, model: llama-3.2-3b@random, device: cpu, concurrency: 3}\n")
    [problem] = memory_problems(workflow, available_bytes=15 * GB)
    assert "about 19.3 GB" in problem and "chat (llama-3.2-3b@random x 3 sessions, 19.3 GB)" in problem


def test_one_model_that_does_not_fit_alone_is_left_to_its_units_own_check():
    workflow = load_yaml("chat: {type: chatbot, model: llama-3.2-3b@random, device: cpu}\n")
    assert memory_problems(workflow, available_bytes=1 * GB) == []


def test_for_another_machine_one_model_too_large_and_the_machines_gpu_are_its_own():
    # The web's launch for a platform: nothing else checks one model there, and its GPU is its own.
    workflow = load_yaml("chat: {type: chatbot, model: llama-3.2-3b@random}\n")
    [problem] = memory_problems(
        workflow, 4 * GB, gpu=False, machine="platform 'box' has 4.0 GB of memory in all", alone_too=True
    )
    assert problem == (
        f"node chat (llama-3.2-3b@random, {LLAMA_GB} GB) loads a random model on the CPU and platform 'box' "
        "has 4.0 GB of memory in all; use device: gpu or a smaller model"
    )
    assert memory_problems(workflow, 4 * GB, gpu=True, alone_too=True) == []
    assert cpu_model_bytes(workflow, gpu=True) == {}
    # device: cpu stays on the CPU whatever the machine has.
    pinned = load_yaml("chat: {type: chatbot, model: llama-3.2-3b@random, device: cpu}\n")
    assert memory_problems(pinned, 4 * GB, gpu=True, alone_too=True) != []


def test_validate_check_files_adds_the_concurrent_models_up_on_this_machine(tmp_path: Path):
    # Two Llama 3.2 1B twins of 64 sessions each: every copy fits alone (2.5 GB), all of them together
    # need 317.4 GB, more than the machines these tests run on have.
    if psutil.virtual_memory().available > 300 * GB:
        pytest.skip("this machine has room for 317 GB of models")
    unit = "{{type: chatbot, model: llama-3.2-1b@random, device: cpu, concurrency: 64}}"
    path = tmp_path / "many.yml"
    path.write_text(f"a: {unit}\nb: {unit}\n".format())
    out = cli("validate", "--check-files", str(path))
    assert out.returncode == 1, out.stdout
    assert "need about 317.4 GB of memory together" in out.stdout
    assert "a (llama-3.2-1b@random x 64 sessions, 158.7 GB), b (" in out.stdout
