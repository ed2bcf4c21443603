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

    # cuDNN attention runs on CUDA tensors only: on these CPU tensors it is refused.
    switch = AttentionSwitch("cudnn", None, "cuda")
    q = torch.randn(1, 2, 16, 8)
    with pytest.raises(AttentionUnavailable) as err, switch.mode():
        torch.nn.functional.scaled_dot_product_attention(q, q, q)
    assert str(err.value) == (
        "attention: cudnn cannot serve the call (q (1, 2, 16, 8), k/v (1, 2, 16, 8), float32): "
        "it runs on CUDA tensors only, these are on cpu"
    )
    assert switch.take() == {}


def test_a_pinned_backend_leaves_pytorchs_process_wide_backend_flags_alone():
    # The sessions of one unit are threads of one process: a pin made by switching the other backends
    # off process-wide (torch.nn.attention.sdpa_kernel) leaves another session's VAE or text encoder
    # with the pinned backend alone while it lasts. The pinned operator runs with every flag as it was.
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    flags = (
        torch.backends.cuda.flash_sdp_enabled,
        torch.backends.cuda.mem_efficient_sdp_enabled,
        torch.backends.cuda.cudnn_sdp_enabled,
        torch.backends.cuda.math_sdp_enabled,
    )
    seen: list[tuple[str, tuple[bool, ...]]] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append((func.__name__, tuple(flag() for flag in flags)))
            return func(*args, **(kwargs or {}))

    switch = AttentionSwitch("math", None, "cpu")
    q, k = torch.randn(1, 2, 16, 8), torch.randn(1, 2, 24, 8)
    mask = torch.rand(16, 24) > 0.3
    with Record(), switch.mode():
        out = torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=mask)
    # The math kernel is composite: its batched matmuls are among the operators that ran, every flag on.
    assert "bmm.default" in {name for name, _ in seen}
    assert all(state == (True,) * 4 for _, state in seen)
    assert switch.take() == {"math": 1}
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=mask)
    torch.testing.assert_close(out, expected)


def test_cbkernels_refuses_a_mask_tensor_naming_it():
    import torch

    switch = AttentionSwitch("cbkernels", None, "cuda")
    q = torch.randn(1, 2, 16, 64)
    mask = torch.ones(16, 16, dtype=torch.bool)
    with (
        pytest.raises(
            AttentionUnavailable, match=r"cbkernels cannot serve the call .*: it takes no attn_mask$"
        ),
        switch.mode(),
    ):
        torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)


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
@pytest.mark.parametrize("choice", ["cudnn", "flash", "efficient"])
def test_a_pinned_session_leaves_other_threads_attention_to_pytorch(choice):
    # As in an image generator with two sessions: one thread's denoiser pinned to a backend while
    # another's VAE (float32, one head of 512) calls attention unpinned, which the pinned backend
    # cannot serve. Both run their calls through; nothing fails, and the pinned calls match PyTorch's.
    import threading

    import torch

    switch = AttentionSwitch(choice, None, "cuda")
    q = torch.randn(2, 24, 1024, 64, device="cuda", dtype=torch.bfloat16)
    vae = torch.randn(1, 1, 1024, 512, device="cuda")
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def pinned() -> None:
        try:
            start.wait()
            for _ in range(200):
                with switch.mode():
                    torch.nn.functional.scaled_dot_product_attention(q, q, q)
        except BaseException as exc:
            errors.append(exc)

    def unpinned() -> None:
        try:
            start.wait()
            for _ in range(200):
                torch.nn.functional.scaled_dot_product_attention(vae, vae, vae)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=pinned), threading.Thread(target=unpinned)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    assert errors == []
    assert switch.take() == {choice: 200}
    with switch.mode():
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    expected = torch.nn.functional.scaled_dot_product_attention(q.double(), q.double(), q.double())
    torch.testing.assert_close(out.double(), expected, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_the_pinned_memory_efficient_kernel_serves_a_boolean_mask_as_pytorch_does():
    # A mask row of 77 elements: the kernel needs rows aligned to 16, padded as PyTorch's front end does.
    import torch

    switch = AttentionSwitch("efficient", None, "cuda")
    q = torch.randn(2, 4, 100, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(2, 4, 77, 64, device="cuda", dtype=torch.float16)
    mask = torch.rand(100, 77, device="cuda") > 0.2
    with switch.mode():
        out = torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=mask)
    assert switch.take() == {"efficient": 1}
    expected = torch.nn.functional.scaled_dot_product_attention(
        q.double(), k.double(), k.double(), attn_mask=mask
    )
    torch.testing.assert_close(out.double(), expected, rtol=2e-2, atol=2e-2)


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
