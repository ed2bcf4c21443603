"""ImageGen with diffusers on tiny random Stable Diffusion architectures and a local diffusers folder."""

from __future__ import annotations

import threading
import time

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


# Two units for the gate tests: the images (low priority, so that a pressured chat holds them back
# under credit) and a chat whose steps the test takes by hand on its real gate.
HELD = """
images:
  type: ImageGen
  model: sd-tiny@random
  num_requests: 1
  steps: 4
  height: 64
  width: 64
  guidance_scale: 1
  device: cpu
  priority: low
chat:
  type: Synthetic
  priority: high
  slo: ["e2e<=1s"]
  device: cpu
workflows:
  images: {uses: images}
  chat: {uses: chat}
"""


class ChatTakesTheDeviceAtStep:
    """The images' real gate, with one addition: when the images ask for their ``at``-th denoising
    step, the chat (high priority, pressured: no request measured yet) starts a step on its own real
    gate and holds it ``hold_s``. What the images then wait is decided by the scheduler's rule alone."""

    def __init__(self, gate, chat_gate, at: int, hold_s: float) -> None:
        self.gate, self.chat_gate, self.at, self.hold_s = gate, chat_gate, at, hold_s
        self.denoise = 0
        self.chat = None

    def _chat_step(self, began) -> None:
        self.chat_gate.acquire("chat", "step")
        began.set()
        time.sleep(self.hold_s)
        self.chat_gate.release("chat", "step")

    def acquire(self, app: str, kind: str) -> float:
        if kind == "denoise":
            self.denoise += 1
            if self.denoise == self.at:
                began = threading.Event()
                self.chat = threading.Thread(target=self._chat_step, args=(began,))
                self.chat.start()
                assert began.wait(10)
        return self.gate.acquire(app, kind)

    def release(self, app: str, kind: str) -> None:
        self.gate.release(app, kind)


def _image_with_chat_holding_the_device(scheduler_name: str, tmp_path):
    """Generate one image while the chat takes the device for 1 s before its second denoising step,
    under ``scheduler_name``; return the image's record and the seconds its driver says were held."""
    from benchmarks.apps.base import AppContext
    from benchmarks.apps.imagegen import ImageGenDriver
    from benchmarks.schedulers import get_scheduler
    from benchmarks.schedulers.base import NodePlan
    from benchmarks.spec.load import load_yaml

    workflow = load_yaml(HELD, name="t")
    plans = {
        "images": NodePlan("images", "images", "cpu", "low", None, False),
        "chat": NodePlan("chat", "chat", "cpu", "high", None, False),
    }
    scheduler = get_scheduler(scheduler_name)
    scheduler.start(workflow, plans)
    try:
        chat_gate = scheduler.gate_for(plans["chat"]).open()
        gate = ChatTakesTheDeviceAtStep(scheduler.gate_for(plans["images"]).open(), chat_gate, 2, 1.0)
        events: list = []
        ctx = AppContext(
            node="images",
            emit=lambda kind, **f: events.append((kind, f)),
            gate=gate,
            stop_requested=lambda: False,
            device="cpu",
            out_dir=tmp_path / "artifacts",
            seed=0,
        )
        driver = ImageGenDriver(workflow.applications["images"], ctx)
        try:
            driver.load()
            driver.run()
        finally:
            driver.close()
        gate.chat.join()
        (record,) = [f["record"] for kind, f in events if kind == "request_end"]
        return record, driver.gate_wait_s()
    finally:
        scheduler.stop()


@pytest.mark.models
def test_under_credit_a_second_held_at_the_gate_is_in_the_step_times_and_in_gate_wait(tmp_path):
    record, total = _image_with_chat_holding_the_device("credit", tmp_path)
    held = record["metrics"]["gate_wait"]
    assert 0.95 <= held < 1.6 and total == pytest.approx(held)
    steps = record["series"]["step"]
    # The second step starts when the first ends: the hold before it is in it, and in no other step
    # (compared with the others, not with a fixed time: a loaded machine slows every step alike).
    assert steps[1] >= held and steps[1] - max(steps[:1] + steps[2:]) >= 0.5 * held
    m = record["metrics"]
    assert m["step"] == pytest.approx(sum(steps) / 4)
    assert m["image"] >= m["text_encode"] + sum(steps) + m["vae_decode"]


@pytest.mark.models
def test_under_greedy_the_same_image_shows_no_gate_wait(tmp_path):
    record, total = _image_with_chat_holding_the_device("greedy", tmp_path)
    assert record["metrics"]["gate_wait"] == 0.0 and total == 0.0
    # No step carries the chat's second (compared with the other steps: a loaded machine slows all).
    steps = record["series"]["step"]
    assert max(steps) - min(steps) < 0.5


def test_an_images_default_slos_are_its_step_and_the_whole_image_at_steps_times_the_step_slo(make_unit):
    unit = make_unit(IMAGEGEN.format(model="sd-tiny@random"))
    assert [(s.metric, s.threshold_s) for s in unit.slo] == [("step", 1.0), ("image", 10.0)]
    given = make_unit(IMAGEGEN.format(model="sd-tiny@random") + '  slo: ["step<=0.25s"]\n')
    assert [(s.metric, s.threshold_s) for s in given.slo] == [("step", 0.25)]
