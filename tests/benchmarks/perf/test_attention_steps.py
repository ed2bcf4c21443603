"""The attention step-time script on a tiny SD3 pipeline on the CPU (only sdpa and math run there)."""

from __future__ import annotations

import json

import pytest

from benchmarks.perf.attention_steps import main


@pytest.mark.models
def test_each_choice_gets_its_median_step_time_beside_sdpa_or_its_error(tmp_path, capsys):
    out = tmp_path / "steps.json"
    argv = ["--model", "sd3-tiny@random", "--size", "64", "--steps", "2", "--warmup", "1"]
    assert (
        main(
            [
                *argv,
                "--choices",
                "sdpa,math,flash,cbkernels:maxnreg=128",
                "--device",
                "cpu",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    assert (report["pipeline"], report["dtype"], report["gpu"]) == (
        "StableDiffusion3Pipeline",
        "float32",
        None,
    )
    unwrapped, sdpa, math, flash, lean = report["rows"]
    assert (
        unwrapped["label"] == "unwrapped" and unwrapped["choice"] is None and unwrapped["median_step_s"] > 0
    )
    assert sdpa["choice"] == "sdpa" and sdpa["ratio_to_sdpa"] == 1.0
    # sd3-tiny has 2 attention processors; 3 steps (1 warm-up) of one guided call each.
    assert math["backends"] == {"math": 6} and math["attention_calls_per_step"] == 2
    assert math["steps"] == 2 and math["median_step_s"] > 0
    assert math["ratio_to_sdpa"] == pytest.approx(math["median_step_s"] / sdpa["median_step_s"])
    assert flash == {
        "label": "flash",
        "choice": "flash",
        "params": {},
        "error": "attention: flash needs a CUDA GPU; this unit runs on cpu",
    }
    # Refused here either way: cbkernels.attention is absent, or it needs a CUDA GPU.
    assert (lean["label"], lean["choice"], lean["params"]) == (
        "cbkernels:maxnreg=128",
        "cbkernels",
        {"maxnreg": 128},
    )
    assert "median_step_s" not in lean and lean["error"].startswith("attention: cbkernels needs")
    printed = capsys.readouterr().out
    assert printed.splitlines()[1].split() == [
        "attention",
        "median",
        "step",
        "ratio",
        "to",
        "sdpa",
        "calls/step",
        "served",
        "by",
    ]
    assert "1.000x" in printed
    assert "diffusers' processors, no switch" in printed


def test_an_unknown_choice_or_model_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--choices", "sdpa,turbo", "--device", "cpu"])
    assert exit_.value.code == 2 and "--choices: unknown 'turbo'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--choices", "math:maxnreg=128", "--device", "cpu"])
    assert "math:maxnreg=128: only cbkernels takes parameters" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--model", "llama-tiny@random", "--device", "cpu"])
    assert "not an image NAME@random model" in capsys.readouterr().err
