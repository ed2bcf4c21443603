"""The model-servers experiment's cases (benchmarks.perf.model_servers): the same llama.cpp settings
reach every model of every case, and the GPU defaults are the issue's H200 case."""

from __future__ import annotations

from benchmarks.perf import model_servers as tool
from benchmarks.spec.load import load_yaml


def test_each_case_gives_its_models_the_same_llama_settings():
    settings = {"flash_attn": True, "n_ubatch": 256}
    for case in ("shared", "serial", "separate"):
        workflow = load_yaml(tool.workflow_text(case, "smollm2-135m", 2, 8, "gpu", settings), name=case)
        holders = [u for u in workflow.applications.values() if u.model]
        assert holders, case
        for unit in holders:
            assert unit.options.llama_settings() == settings, (case, unit.name)
            assert unit.device == "gpu"
        assert len(holders) == (1 if case != "separate" else 3)


def test_the_gpu_defaults_are_the_3b_model_with_flash_attention_on_both_sides():
    assert tool.DEFAULTS["gpu"]["model"] == "llama-3.2-3b@random"
    assert tool.DEFAULTS["gpu"]["max_tokens"] == 128
    assert tool.DEFAULTS["gpu"]["settings"] == '{"flash_attn": true}'


def test_throughput_is_over_the_serving_window_and_the_load_time_is_apart(tmp_path):
    from benchmarks.runner import run_workflow

    text = (
        "a: {type: Sleep, sleep_time: 0.05, num_requests: 3}\n"
        "b: {type: Sleep, sleep_time: 0.05, num_requests: 2}\n"
    )
    result = run_workflow(load_yaml(text, name="window"), out_dir=tmp_path)
    requests = [r for app in result.applications for r in app.requests]
    # Sleep records no tokens: stand in a count for each request to see what the rate divides by.
    for r in requests:
        r.info["tokens_out"] = 10
    row = tool.figures(result)
    window = max(r.end for r in requests) - min(r.arrival for r in requests)
    assert row["serving_s"] == window and row["tokens_per_s"] == 50 / window
    assert row["load_s"] == max(n.load_time_s for n in result.nodes)
    # The makespan holds the processes' start and the loads besides: the window is inside it.
    assert result.makespan_s is not None and row["serving_s"] < result.makespan_s
