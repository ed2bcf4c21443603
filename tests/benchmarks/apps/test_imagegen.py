"""ImageGen with diffusers on tiny random Stable Diffusion architectures and a local diffusers folder."""

from __future__ import annotations

import pytest

from benchmarks.apps.base import RequestFailed, RequestRecord
from benchmarks.apps.imagegen import APP
from benchmarks.metrics import quality_figures
from benchmarks.models import check_model
from benchmarks.status import RequestStatus

IMAGEGEN = """
images:
  type: ImageGen
  model: {model}
  num_requests: 1
  steps: 10
  height: 64
  width: 64
  guidance_scale: 5
  device: cpu
"""


@pytest.mark.models
@pytest.mark.parametrize("model", ["sd-tiny@random", "sd3-tiny@random"])
def test_ten_denoising_steps_make_a_64px_image_saved_with_its_settings(run_driver, model):
    from PIL import Image

    run = run_driver(IMAGEGEN.format(model=model), seed=11)
    (record,) = run.records
    steps = record["series"]["step"]
    assert len(steps) == 10 and all(s > 0 for s in steps)
    m = record["metrics"]
    assert m["step"] == pytest.approx(sum(steps) / 10)
    assert m["vae_decode"] > 0 and m["image"] >= sum(steps) + m["vae_decode"]
    info = record["info"]
    assert (info["seed"], info["steps"], info["guidance_scale"]) == (11, 10, 5.0)
    assert info["prompt_index"] == 0 and "prompt" not in info
    assert info["finite"] is True and info["nonfinite_in"] == []
    # The image's file name in the node's artifacts folder: results hold no path of this machine.
    with Image.open(run.driver.ctx.out_dir / info["image"]) as image:
        assert image.size == (64, 64)
    assert run.loaded["weights"] == "random" and run.loaded["architecture"] == model.split("@")[0]
    assert run.gate.steps == {"text_encode": 1, "denoise": 10, "vae_decode": 1}


@pytest.mark.models
def test_a_local_diffusers_folder_loads_and_is_recorded_by_hash(run_driver, tmp_path):
    import torch

    from benchmarks.models.catalogue import RANDOM
    from benchmarks.models.random_image import build_random_pipeline

    folder = tmp_path / "sd-tiny"
    build_random_pipeline(RANDOM["sd-tiny"], 0, torch.float32).save_pretrained(folder)
    run = run_driver(IMAGEGEN.format(model=folder))
    assert run.loaded["source"] == "path" and len(run.loaded["sha256"]) == 64
    assert run.loaded["pipeline"] == "StableDiffusionPipeline"
    (record,) = run.records
    assert len(record["series"]["step"]) == 10


def _nan_pipeline(tmp_path, module):
    """A real pipeline with one layer's weights NaN, as a model overflowing in float16 would give them:
    the VAE's decoder or the U-Net (the one the decode, or every denoising step, runs through)."""
    import torch

    from benchmarks.models.catalogue import RANDOM
    from benchmarks.models.random_image import build_random_pipeline

    pipe = build_random_pipeline(RANDOM["sd-tiny"], 0, torch.float32)
    with torch.no_grad():
        layer = pipe.vae.decoder.conv_in if module == "vae" else pipe.unet.conv_in
        layer.weight.fill_(float("nan"))
    folder = tmp_path / f"sd-tiny-nan-{module}"
    pipe.save_pretrained(folder)
    return IMAGEGEN.format(model=folder).replace("steps: 10", "steps: 2")


@pytest.mark.models
@pytest.mark.parametrize(
    ("module", "stages"),
    [("vae", ["vae"]), ("unet", ["denoiser", "vae"])],
    ids=["vae", "denoiser"],
)
def test_with_nonfinite_record_an_image_with_nan_values_is_served_as_not_finite_naming_where(
    run_driver, tmp_path, module, stages
):
    run = run_driver(_nan_pipeline(tmp_path, module) + "  nonfinite: record\n")
    (record,) = run.records
    assert record["status"] == "ok"
    assert record["info"]["finite"] is False and record["info"]["nonfinite_in"] == stages
    assert quality_figures(run.records, APP.quality)["finite_images"] == {
        "value": 0.0,
        "unit": "fraction",
        "count": 1,
    }


@pytest.mark.models
@pytest.mark.parametrize(
    ("module", "where"),
    [("vae", "decoded pixels"), ("unet", "denoiser's latents and the decoded pixels")],
    ids=["vae", "denoiser"],
)
def test_by_default_an_image_with_nan_values_fails_its_request_saying_where_they_came_from(
    run_driver, tmp_path, module, where
):
    with pytest.raises(
        RequestFailed, match=f"image 0 is not finite: NaN or inf in the {where}, so its times"
    ):
        run_driver(_nan_pipeline(tmp_path, module))
    assert not (tmp_path / "artifacts").exists() or not list((tmp_path / "artifacts").glob("*.png"))


@pytest.mark.gpu
@pytest.mark.models
def test_sd35_medium_random_generates_a_1024px_image_on_a_gpu(run_driver):
    spec = IMAGEGEN.format(model="sd3.5-medium@random").replace("steps: 10", "steps: 4")
    spec = spec.replace("64", "1024").replace("device: cpu", "device: gpu")
    run = run_driver(spec, device="gpu")
    (record,) = run.records
    assert len(record["series"]["step"]) == 4
    assert (record["info"]["width"], record["info"]["height"]) == (1024, 1024)
    assert run.loaded["dtype"] == "float16" and run.loaded["device"] == "cuda"


def test_a_full_size_random_model_runs_on_a_cpu_only_if_it_fits_the_memory():
    gb = 1_000_000_000
    (problem,) = check_model("sd3.5-medium@random", ("diffusers",), "ImageGen", "cpu", available_bytes=8 * gb)
    assert "sd3.5-medium@random" in problem and "12.6 GB" in problem and "device: gpu" in problem
    fits = check_model("sd3.5-medium@random", ("diffusers",), "ImageGen", "cpu", available_bytes=16 * gb)
    assert fits == []
    assert check_model("sd3.5-medium@random", ("diffusers",), "ImageGen", "gpu", available_bytes=8 * gb) == []


def test_image_sizes_must_be_multiples_of_8(make_unit):
    from benchmarks.spec.model import WorkflowValidationError

    with pytest.raises(WorkflowValidationError, match="multiple of 8"):
        make_unit(IMAGEGEN.format(model="sd-tiny@random").replace("height: 64", "height: 60"))


def test_quality_counts_the_images_the_denoising_steps_per_second_the_attention_calls_and_finite_images():
    def image(
        index: int,
        steps: list[float],
        warmup: bool = False,
        status: RequestStatus = RequestStatus.OK,
        finite: bool = True,
    ) -> dict:
        record = RequestRecord(index=index, arrival=0.0, series={"step": steps}, warmup=warmup, status=status)
        if record.status is RequestStatus.OK:
            record.metrics.update(step=sum(steps) / len(steps), image=sum(steps) + 0.5)
        record.info.update(steps=len(steps), seed=index, attention_calls=24 * len(steps), finite=finite)
        return record.to_event()

    records = [
        image(0, [1.0, 1.0], warmup=True, finite=False),
        image(1, [0.1, 0.1, 0.2]),
        image(2, [0.2, 0.2, 0.2], finite=False),
        image(3, [0.5], status=RequestStatus.ERROR),
    ]
    assert quality_figures(records, APP.quality) == {
        "images": {"value": 2.0, "unit": "images", "count": 2},
        "steps_per_s": {"value": pytest.approx(6 / 1.0), "unit": "steps/s", "count": 2},
        "attention_calls": {"value": 72.0, "unit": "calls/image", "count": 2},
        "finite_images": {"value": 0.5, "unit": "fraction", "count": 2},
    }
    assert quality_figures([], APP.quality) == {}
