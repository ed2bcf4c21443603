"""ImageGen's attention switch on real tiny diffusers pipelines: which kernel serves each call, the
count per request, the checks of a choice and its parameters, and a kernel that cannot serve a call.
The cbkernels kernel itself runs on a GPU here (tests/cbkernels run it in Triton's CPU interpreter)."""

from __future__ import annotations

import sys

import pytest

from benchmarks.apps.attention import AttentionSwitch, AttentionUnavailable
from benchmarks.apps.base import RequestFailed
from benchmarks.apps.imagegen import check
from benchmarks.runner.checks import machine_problems
from benchmarks.spec.model import WorkflowValidationError

IMAGEGEN = """
images:
  type: ImageGen
  model: {model}
  num_requests: 1
  steps: 2
  height: 64
  width: 64
  device: {device}
  save_images: false
"""


def unit_yaml(model: str = "sd3-tiny@random", device: str = "cpu", **options: str) -> str:
    return IMAGEGEN.format(model=model, device=device) + "".join(f"  {k}: {v}\n" for k, v in options.items())


@pytest.mark.models
@pytest.mark.parametrize(
    ("model", "processors"), [("sd-tiny@random", 8), ("sd3-tiny@random", 2)], ids=["unet", "mmdit"]
)
def test_each_denoiser_attention_call_is_served_by_the_pinned_math_kernel_and_counted(
    run_driver, model, processors
):
    run = run_driver(unit_yaml(model, attention="math"))
    (record,) = run.records
    # Guidance batches the two branches: one call per processor per step.
    calls = 2 * processors
    assert record["info"]["attention_calls"] == calls
    assert record["info"]["attention_backends"] == {"math": calls}
    assert run.loaded["attention"] == {
        "choice": "math",
        "params": {},
        "backend": "math",
        "processors": processors,
    }


@pytest.mark.models
def test_sdpa_records_the_backend_pytorch_picked_for_each_call(run_driver):
    run = run_driver(unit_yaml())
    (record,) = run.records
    # PyTorch picks its CPU flash kernel for these shapes (float32, no mask).
    assert record["info"]["attention_backends"] == {"flash": 4}
    assert run.loaded["attention"]["choice"] == "sdpa"
    assert "PyTorch's choice" in run.loaded["attention"]["backend"]


@pytest.mark.models
def test_the_switch_leaves_the_denoiser_output_as_diffusers_computes_it():
    import torch

    from benchmarks.models.catalogue import RANDOM
    from benchmarks.models.random_image import build_random_pipeline

    pipe = build_random_pipeline(RANDOM["sd3-tiny"], 0, torch.float32)

    def latents() -> torch.Tensor:
        with torch.inference_mode():
            out = pipe(
                prompt="a red fox",
                num_inference_steps=2,
                height=64,
                width=64,
                output_type="latent",
                generator=torch.Generator().manual_seed(3),
            )
        return out.images

    plain = latents()
    switch = AttentionSwitch("math", None, "cpu")
    switch.install(pipe.transformer)
    served = latents()
    assert switch.take() == {"math": 4}
    torch.testing.assert_close(served, plain, rtol=1e-4, atol=1e-4)
    assert not torch.equal(served, torch.zeros_like(served))


@pytest.mark.models
def test_the_full_size_denoisers_have_only_processors_the_switch_serves():
    # Each wrapped processor makes one F.scaled_dot_product_attention call per forward (the count
    # per request relies on it); the shapes alone are built (meta device), no weights.
    import torch

    from benchmarks.models.catalogue import RANDOM
    from benchmarks.models.random_image import build_random_pipeline

    for name in ("sd2.1", "sdxl", "sd3.5-medium"):
        pipe = build_random_pipeline(RANDOM[name], 0, torch.float32, device="meta")
        denoiser = pipe.transformer if RANDOM[name].family == "sd3" else pipe.unet
        kinds = {type(p).__name__ for p in denoiser.attn_processors.values()}
        assert kinds <= {"AttnProcessor2_0", "JointAttnProcessor2_0"}, (name, kinds)
        wrapped = AttentionSwitch("sdpa", None, "cpu").install(denoiser)
        assert wrapped == len(denoiser.attn_processors) > 0
        assert {type(p).__name__ for p in denoiser.attn_processors.values()} == {"_Processor"}


def test_a_pinned_backend_that_cannot_serve_a_call_says_why():
    import torch

    # cuDNN attention runs on CUDA tensors only: on these CPU tensors PyTorch refuses it.
    switch = AttentionSwitch("cudnn", None, "cuda")
    q = torch.randn(1, 2, 16, 8)
    with pytest.raises(AttentionUnavailable) as err, switch.mode():
        torch.nn.functional.scaled_dot_product_attention(q, q, q)
    message = str(err.value)
    assert message.startswith(
        "attention: cudnn cannot serve the call (q (1, 2, 16, 8), k/v (1, 2, 16, 8), float32)"
    )
    assert "No viable backend" in message
    assert switch.take() == {}


def test_a_gpu_kernel_is_refused_on_the_cpu_when_the_driver_loads():
    with pytest.raises(
        AttentionUnavailable, match="attention: efficient needs a CUDA GPU; this unit runs on cpu"
    ):
        AttentionSwitch("efficient", None, "cpu")


@pytest.mark.parametrize("choice", ["cudnn", "flash", "efficient", "cbkernels"])
def test_the_machine_check_refuses_a_gpu_kernel_for_a_unit_on_the_cpu(make_unit, choice):
    unit = make_unit(unit_yaml(attention=choice))
    problems = [message for _, message in machine_problems(unit)]
    assert (
        f"unit 'images' asks for attention: {choice}, which needs a CUDA GPU, but it runs on this "
        "machine's CPU (there: sdpa or math); run it on a GPU worker"
    ) in problems


@pytest.mark.parametrize("choice", ["sdpa", "math"])
def test_the_machine_check_accepts_sdpa_and_math_on_the_cpu(make_unit, choice):
    assert machine_problems(make_unit(unit_yaml(attention=choice))) == []


def test_validate_offline_accepts_a_gpu_kernel_for_a_gpu_unit(make_unit):
    # The plain validate reads the file, not this machine (as with device: gpu).
    unit = make_unit(unit_yaml(device="gpu", attention="flash"))
    assert unit.options.attention == "flash"


def test_attention_params_of_another_choice_are_an_error_at_the_field(make_unit):
    with pytest.raises(WorkflowValidationError) as err:
        make_unit(unit_yaml(attention="cudnn", attention_params="{maxnreg: 128}"))
    assert (
        "line 12: images.attention_params: 'attention_params' in unit 'images': only attention: "
        "cbkernels takes parameters (this unit has attention: cudnn)"
    ) in str(err.value)


def test_cbkernels_params_say_so_when_cbkernels_attention_cannot_be_imported(make_unit, monkeypatch):
    monkeypatch.setitem(sys.modules, "cbkernels.attention", None)  # what an absent module raises
    with pytest.raises(WorkflowValidationError) as err:
        make_unit(unit_yaml(device="gpu", attention="cbkernels", attention_params="{maxnreg: 128}"))
    message = str(err.value)
    assert "images.attention_params" in message
    assert "attention: cbkernels needs cbkernels.attention, which cannot be imported here" in message
    unit = make_unit(unit_yaml(device="gpu", attention="cbkernels"))
    assert any("cannot be imported here" in p for p in check(unit))


def test_cbkernels_params_are_checked_by_the_kernel_naming_the_bad_key(make_unit):
    with pytest.raises(WorkflowValidationError) as err:
        make_unit(unit_yaml(device="gpu", attention="cbkernels", attention_params="{no_such_knob: 1}"))
    assert "images.attention_params" in str(err.value) and "no_such_knob" in str(err.value)
    unit = make_unit(unit_yaml(device="gpu", attention="cbkernels", attention_params="{maxnreg: 128}"))
    assert unit.options.attention_params == {"maxnreg": 128}


@pytest.mark.gpu
@pytest.mark.models
def test_flash_on_float32_fails_the_request_with_pytorchs_reason(run_driver):
    spec = unit_yaml(device="gpu", attention="flash", dtype="float32")
    with pytest.raises(RequestFailed, match="attention: flash cannot serve the call"):
        run_driver(spec, device="gpu")


@pytest.mark.gpu
@pytest.mark.models
@pytest.mark.parametrize("choice", ["sdpa", "cudnn", "flash", "efficient", "math"])
def test_each_sdpa_choice_serves_the_sd3_denoiser_on_a_gpu(run_driver, choice):
    run = run_driver(unit_yaml(device="gpu", attention=choice), device="gpu")
    (record,) = run.records
    assert record["info"]["attention_calls"] == 4
    if choice != "sdpa":
        assert record["info"]["attention_backends"] == {choice: 4}


@pytest.mark.gpu
def test_cbkernels_serves_each_call_with_its_params_and_refuses_a_mask():
    import torch

    switch = AttentionSwitch("cbkernels", {"maxnreg": 128}, "cuda")
    q = torch.randn(2, 4, 256, 64, device="cuda", dtype=torch.float16)
    with switch.mode():
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    expected = torch.nn.functional.scaled_dot_product_attention(q.double(), q.double(), q.double())
    torch.testing.assert_close(out.double(), expected, rtol=2e-2, atol=2e-2)
    assert switch.take() == {"cbkernels": 1} and switch.describe()["params"] == {"maxnreg": 128}
    # The GPU's default for head dim 64 under the budget, not the dataclass's own columns.
    from cbkernels.attention import config_over, default_config

    expected_config = config_over(default_config(64, q.dtype, q.device), {"maxnreg": 128})
    assert switch.describe()["configs"] == {"64": expected_config.params()}
    mask = torch.ones(256, 256, device="cuda", dtype=torch.bool)
    with (
        pytest.raises(
            AttentionUnavailable, match=r"cbkernels cannot serve the call .* it takes no attn_mask"
        ),
        switch.mode(),
    ):
        torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
