"""The chatbot overhead tool (benchmarks.perf.chatbot_overhead): its bandwidth floor, TTFT's breakdown,
and a real run of both sides and the settings grid on the CPU with the packaged model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.perf import chatbot_overhead as tool


def test_the_bandwidth_comes_from_the_spec_sheet_by_name_else_from_nvml_and_says_which():
    assert tool.bandwidth("NVIDIA H200", 4915.2) == (4800.0, "spec sheet (H200)")
    assert tool.bandwidth("NVIDIA H100 80GB HBM3", None) == (3350.0, "spec sheet (H100)")
    assert tool.bandwidth("NVIDIA H100 PCIe", None) == (2000.0, "spec sheet (H100 PCIe)")
    assert tool.bandwidth("NVIDIA A100-SXM4-80GB", None)[0] == 2039.0
    assert tool.bandwidth("Some Future GPU", 1234.5) == (1234.5, "NVML: bus width x peak memory clock x 2")
    assert tool.bandwidth("Some Future GPU", None) == (None, "unknown")


def test_the_breakdown_gives_each_stage_its_median_duration_on_both_sides_and_the_extra():
    def side(*ends: float) -> dict:
        return {"marks": dict(zip(("started", *tool.PHASES), ends, strict=True))}

    bare = [side(0.0, 1.0, 2.0, 2.0, 12.0, 12.0), side(0.0, 1.0, 2.0, 2.0, 14.0, 14.0)]
    harness = [side(0.5, 1.5, 2.5, 3.5, 13.5, 13.5), side(0.5, 1.5, 2.5, 3.5, 15.5, 15.5)]
    rows = {r["stage"]: r for r in tool.breakdown(bare, harness)}
    assert list(rows) == ["started", *tool.PHASES]
    assert rows["started"] == {"stage": "started", "bare_s": 0.0, "harness_s": 0.5, "extra_s": 0.5}
    assert rows["admitted"]["extra_s"] == 1.0  # the gate's stage: 0 against 1
    assert rows["first_token"]["bare_s"] == 11.0 and rows["first_token"]["extra_s"] == 0.0
    # The stages add up to TTFT's median extra here (each side's requests are alike).
    assert sum(r["extra_s"] for r in rows.values()) == pytest.approx(1.5)


def test_every_grid_setting_is_one_a_chatbot_unit_accepts():
    from benchmarks.apps.textgen import LlamaCppOptions

    for settings in tool.GRID:
        assert LlamaCppOptions(**settings).llama_settings() == settings


@pytest.mark.models
def test_a_cpu_run_compares_both_sides_breaks_ttft_down_and_writes_its_json(tmp_path: Path, capsys):
    tool.main(["--rounds", "1", "--requests", "2", "--max-tokens", "6", "--no-grid", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "chatbot-overhead-cpu.json").read_text())
    for name in ("bare", "harness", "harness_no_monitor"):
        assert report["sides"][name]["requests"] == 2
        assert report["sides"][name]["ttft_p50"] > 0 and report["sides"][name]["tpot_p50"] > 0
    assert set(report["ratios"]) == {
        "harness_ttft",
        "harness_tpot",
        "harness_no_monitor_ttft",
        "harness_no_monitor_tpot",
    }
    stages = [s["stage"] for s in report["ttft_breakdown"]]
    assert stages == ["started", *tool.PHASES]
    assert all(s["bare_s"] is not None and s["harness_s"] is not None for s in report["ttft_breakdown"])
    assert report["floor_tpot_s"] is None and report["grid"] == []
    assert "TTFT breakdown" in capsys.readouterr().out
    markdown = (tmp_path / "chatbot-overhead-cpu.md").read_text()
    assert "| stage | bare | harness | harness - bare |" in markdown


@pytest.mark.models
def test_the_grid_loads_each_setting_and_measures_the_decode_alone(tmp_path: Path):
    from benchmarks.apps.chatbot import load_prompts
    from benchmarks.apps.datasets import Input
    from benchmarks.data import DATA_DIR
    from benchmarks.models import resolve

    turns = load_prompts(Input("t", None, DATA_DIR / "prompts.jsonl"))[:3]
    path = resolve("smollm2-135m", ("gguf",), "Chatbot").path
    rows = tool.grid(
        path, "cpu", 2, turns, 4, 0.0, [{}, {"flash_attn": True, "type_k": "q8_0", "type_v": "q8_0"}]
    )
    assert [r["settings"] for r in rows] == [{}, {"flash_attn": True, "type_k": "q8_0", "type_v": "q8_0"}]
    for row in rows:
        assert row["requests"] == 2 and row["tpot_p50"] > 0 and row["decode_only_tpot"] > 0
