"""ImageGen: one prompt -> one image with diffusers (Stable Diffusion 1.x/2.x/XL and 3.x families).

Each denoising step runs inside its own scheduler-gate step: the gate of step i+1 is taken in
``callback_on_step_end`` right after step i, so the scheduler can put another application between
two steps. The prompt is encoded and the latents decoded by the driver itself, each in a gated step,
so that the VAE decode time is measured on its own.
Recorded per image: ``step`` (mean denoising step time), ``image`` (arrival to decoded image),
``vae_decode``, ``text_encode``, ``gate_wait`` (what the scheduler held it back), the per-step series
``step``, and the seed, resolution, steps and guidance (every time includes the gate's holds:
docs/metrics.md); the PNG is saved with the result bundle. ``attention:`` picks the kernel that serves the
denoiser's attention (``benchmarks.apps.attention``); each request records how many attention calls it
served and by which backend.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from benchmarks.apps.attention import (
    AttentionChoice,
    AttentionSwitch,
    AttentionUnavailable,
    check_params,
    machine_problems,
)
from benchmarks.apps.base import (
    AppType,
    Driver,
    NonFinite,
    RequestFailed,
    RequestRecord,
    check_unit,
    nonfinite_failure,
)
from benchmarks.apps.datasets import Input, prompts_input, read_jsonl, text_field
from benchmarks.apps.runtime import setup_torch, share_cpu_politely, synchronize
from benchmarks.clock import now
from benchmarks.files import UNRESTRICTED, FilePolicy, bundle_path
from benchmarks.metrics import QualityMeasure, info_mean, info_share, metric_count, series_rate
from benchmarks.models import ResolvedModel
from benchmarks.models.random_image import build_random_pipeline
from benchmarks.platform import gpus
from benchmarks.spec.model import DATA_FILE, AppOptions

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from benchmarks.spec.model import Application

FORMATS: tuple[Any, ...] = ("diffusers",)


class ImageGenOptions(AppOptions):
    steps: int = Field(20, ge=1, le=1000, description="denoising steps per image")
    height: int = Field(512, ge=8, le=4096, multiple_of=8, description="image height in pixels")
    width: int = Field(512, ge=8, le=4096, multiple_of=8, description="image width in pixels")
    guidance_scale: float = Field(
        7.0, ge=0, le=100, description="classifier-free guidance; <= 1 turns it off"
    )
    prompts: Annotated[str | None, DATA_FILE] = Field(
        None, description="JSONL of {prompt: ...}; default: the shipped captions"
    )
    negative_prompt: str | None = None
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        "auto", description="weights and activations; auto: float16 on GPU, float32 on CPU"
    )
    n_threads: int | None = Field(
        None, ge=1, le=1024, description="CPU threads (default: all this process may use)"
    )
    save_images: bool = Field(True, description="save each image as PNG with the result bundle")
    nonfinite: NonFinite = Field(
        "fail",
        description="an image with NaN or inf values (a black image): fail (the request and the node "
        "fail, saying where the values came from) or record (served and timed, info.finite false)",
    )
    attention: AttentionChoice = Field(
        "sdpa",
        description="the denoiser's attention kernel: sdpa (PyTorch's choice), a pinned SDPA backend "
        "(cudnn, flash, efficient, math) or cbkernels (Triton); on the CPU only sdpa and math",
    )
    attention_params: dict[str, int | float | str | bool] | None = Field(
        None, description="cbkernels' parameters, e.g. {block_m: 128, maxnreg: 128} (docs/kernels.md)"
    )

    @field_validator("attention_params")
    @classmethod
    def _params_fit_the_choice(
        cls, value: dict[str, int | float | str | bool] | None, info: ValidationInfo
    ) -> dict[str, int | float | str | bool] | None:
        # No choice in info.data: ``attention`` itself is invalid, and reported.
        if "attention" in info.data:
            check_params(info.data["attention"], value)
        return value


def load_prompts(source: Input, files: FilePolicy = UNRESTRICTED) -> list[str]:
    """Return the prompts of an image prompts input; raise ValueError naming the field and entry."""
    return [text_field(row, "prompt", source, n) for n, row in enumerate(read_jsonl(source, files), 1)]


# The unit's prompts: ``prompts:``, else ``dataset:``, else the shipped captions.
PROMPTS = "image_prompts.jsonl"


def check(unit: Application, files: FilePolicy = UNRESTRICTED) -> list[str]:
    """Return the problems that stop this unit here: its model, its attention choice (a GPU kernel on
    the CPU, cbkernels without Triton) and its prompts file."""
    opts: Any = unit.options
    # Where the unit runs, as the runner resolves it (runner.checks.resolve_device); a unit on a GPU
    # when none is visible is the device check's problem.
    on_gpu = unit.device == "gpu" or (unit.device == "auto" and bool(gpus()))
    return check_unit(
        unit,
        files,
        FORMATS,
        lambda: load_prompts(prompts_input(unit, PROMPTS), files),
        more=lambda: machine_problems(opts.attention, on_gpu, unit.name),
    )


# Where a non-finite image's values came from (info.nonfinite_in), in words.
_NONFINITE_WHERE = {"denoiser": "denoiser's latents", "vae": "decoded pixels"}

# The pipeline arguments encode_prompt's results go to, in its order.
_EMBEDDINGS = (
    "prompt_embeds",
    "negative_prompt_embeds",
    "pooled_prompt_embeds",
    "negative_pooled_prompt_embeds",
)


class ImageGenDriver(Driver):
    def load(self) -> dict[str, Any]:
        share_cpu_politely()
        # transformers warns at import about optional image processors no text-to-image pipeline uses.
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        import torch

        opts = self.options
        self.torch = torch
        self.accelerator, threads = setup_torch(torch, self.ctx.device, opts.n_threads)
        self.device = self.accelerator.torch_device
        prompts = prompts_input(self.unit, PROMPTS)
        self.prompts = load_prompts(prompts, self.ctx.files)
        name = opts.dtype if opts.dtype != "auto" else ("float32" if self.device == "cpu" else "float16")
        dtype = getattr(torch, name)
        model: ResolvedModel = self.ctx.files.resolve_model(self.unit, FORMATS, "ImageGen")
        if model.random is not None:
            self.pipe: Any = build_random_pipeline(model.random, self.ctx.seed, dtype, self.device)
        else:
            from diffusers import DiffusionPipeline

            where = str(model.path) if model.path is not None else model.hub_id
            self.pipe = DiffusionPipeline.from_pretrained(where, dtype=dtype)
            self.pipe.set_progress_bar_config(disable=True)
        family = type(self.pipe).__name__
        if not hasattr(self.pipe, "encode_prompt") or not hasattr(self.pipe, "vae"):
            raise ValueError(
                f"model '{self.unit.model}' loads as {family}, which is not a text-to-image "
                "Stable Diffusion pipeline"
            )
        self.pipe.to(self.device)
        self.sd3 = "StableDiffusion3" in family
        self.attention = AttentionSwitch(opts.attention, opts.attention_params, self.device)
        denoiser = self.pipe.transformer if self.sd3 else self.pipe.unet
        wrapped = self.attention.install(denoiser)
        if "XL" in family and self.pipe.vae.config.get("force_upcast") and dtype == torch.float16:
            # SDXL's VAE overflows in float16 (its pipeline upcasts it for the decode too).
            self.pipe.vae.to(dtype=torch.float32)
        return {
            **model.record(),
            "pipeline": family,
            "dtype": name,
            "device": self.device,
            "accelerator": self.accelerator.label,
            "threads": threads,
            "prompts": prompts.name,
            "attention": {**self.attention.describe(), "processors": wrapped},
        }

    def payloads(self) -> list[str]:
        return self.prompts

    def run_request(self, record: RequestRecord, payload: Any) -> None:
        torch, pipe, opts = self.torch, self.pipe, self.options
        seed = self.ctx.seed + record.index
        guided = opts.guidance_scale > 1
        # Every clock starts before its gate, so that the scheduler's holds are in the times.
        t = now()
        with self.ctx.gpu_step("text_encode"):
            embeds = self._encode(payload, guided)
            self._sync()
        text_encode = now() - t
        step_times: list[float] = []
        state: dict[str, AbstractContextManager[None]] = {}

        def take_gate() -> None:
            gate = self.ctx.gpu_step("denoise")
            gate.__enter__()
            state["gate"] = gate

        # A step runs from the end of the previous one (the first: from the start of denoising) to its
        # own end: the steps tile the denoising, the gate's holds between them included.
        last = now()
        take_gate()

        def on_step_end(pipeline: Any, i: int, timestep: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
            nonlocal last
            self._sync()
            state.pop("gate").__exit__(None, None, None)
            t = now()
            step_times.append(t - last)
            last = t
            # num_timesteps, not steps: second-order schedulers run more iterations than steps.
            if i + 1 < pipeline.num_timesteps:
                take_gate()
            return kwargs

        generator = torch.Generator(device="cpu").manual_seed(seed)
        self.attention.take()
        try:
            with torch.inference_mode():
                latents = pipe(
                    **embeds,
                    num_inference_steps=opts.steps,
                    height=opts.height,
                    width=opts.width,
                    guidance_scale=opts.guidance_scale,
                    generator=generator,
                    output_type="latent",
                    callback_on_step_end=on_step_end,
                ).images
        except AttentionUnavailable as exc:
            raise RequestFailed(str(exc)) from None
        finally:
            if "gate" in state:
                state.pop("gate").__exit__(None, None, None)
        served = self.attention.take()
        t = now()
        with self.ctx.gpu_step("vae_decode"):
            image, pixels = self._decode(latents)
        vae_decode = now() - t
        done = now()
        # Checked after the clock stops, so that the check is in no timed figure.
        nonfinite = [
            stage
            for stage, values in (("denoiser", latents), ("vae", pixels))
            if not bool(torch.isfinite(values).all())
        ]
        record.series["step"] = step_times
        record.metrics.update(
            step=sum(step_times) / len(step_times),
            image=done - record.arrival,
            vae_decode=vae_decode,
            text_encode=text_encode,
        )
        record.info.update(
            # The prompt's entry in the prompts file, not its text: file contents stay out of results.
            prompt_index=record.index % len(self.prompts),
            seed=seed,
            height=image.height,
            width=image.width,
            steps=opts.steps,
            guidance_scale=opts.guidance_scale,
            # The denoiser's attention calls this image took, and the backends that served them.
            attention_calls=sum(served.values()),
            attention_backends=served,
            # Every latent and pixel value a number (not NaN or inf); where not, the stages whose output
            # had one: "denoiser" (its latents), "vae" (the decoded pixels). A non-finite image is black.
            finite=not nonfinite,
            nonfinite_in=nonfinite,
        )
        if nonfinite and opts.nonfinite == "fail":
            raise RequestFailed(
                nonfinite_failure(f"image {record.index}", [_NONFINITE_WHERE[stage] for stage in nonfinite])
            )
        if opts.save_images:
            self.ctx.out_dir.mkdir(parents=True, exist_ok=True)
            path = bundle_path(self.ctx.out_dir, f"image-{record.index:04d}.png")
            image.save(path)
            # The file's name in the node's artifacts folder: results hold no path of this machine.
            record.info["image"] = path.name

    def _sync(self) -> None:
        """Wait for the GPU's queued work, so that times and gate releases mean the work is done."""
        synchronize(self.torch, self.accelerator)

    def _encode(self, prompt: str, guided: bool) -> dict[str, Any]:
        """Return the pipeline's prompt embedding arguments (computed here so their time is known)."""
        pipe, negative = self.pipe, self.options.negative_prompt
        if self.sd3:
            out = pipe.encode_prompt(
                prompt=prompt,
                prompt_2=None,
                prompt_3=None,
                negative_prompt=negative,
                device=self.device,
                do_classifier_free_guidance=guided,
            )
        else:
            out = pipe.encode_prompt(
                prompt=prompt,
                device=self.device,
                num_images_per_prompt=1,
                do_classifier_free_guidance=guided,
                negative_prompt=negative,
            )
        # SD 3 and SDXL return pooled embeddings too (four values), SD 1.x/2.x the first two.
        return dict(zip(_EMBEDDINGS, out, strict=False))

    def _decode(self, latents: Any) -> tuple[Any, Any]:
        """Decode latents with the VAE exactly as the pipeline would; return the PIL image and the
        decoded pixel tensor it was made from."""
        vae = self.pipe.vae
        with self.torch.inference_mode():
            latents = latents / vae.config.scaling_factor
            if getattr(vae.config, "shift_factor", None) is not None:
                latents = latents + vae.config.shift_factor
            pixels = vae.decode(latents.to(vae.dtype), return_dict=False)[0]
        with warnings.catch_warnings():
            # NaN pixels ("invalid value encountered in cast"): recorded per image as info.finite.
            warnings.simplefilter("ignore", RuntimeWarning)
            image = self.pipe.image_processor.postprocess(pixels.float(), output_type="pil")[0]
        return image, pixels

    def close(self) -> None:
        self.pipe = None


# The default SLO of one denoising step; an image's default SLO is its steps times this.
STEP_SLO_S = 1.0


def image_slo(options: Any) -> tuple[str, ...]:
    """Return the default SLO on the whole image: its steps x the step SLO (``image<=20s`` for 20
    steps), which leaves the text encode and the VAE decode to the time the steps do not use."""
    steps = getattr(options, "steps", None)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        return ()
    return (f"image<={steps * STEP_SLO_S:g}s",)


APP = AppType(
    name="ImageGen",
    aliases=("imagegen", "image_gen", "ImageGenApplication"),
    options=ImageGenOptions,
    slo_metrics=("step", "image", "vae_decode", "e2e"),
    default_slo=(f"step<={STEP_SLO_S:g}s",),
    option_slo=image_slo,
    default_priority="medium",
    default_num_requests=3,
    driver="benchmarks.apps.imagegen:ImageGenDriver",
    needs_model=True,
    description="Text-to-image with diffusers (SD 1.x/2.x/XL, SD 3.x); per-step time, VAE decode, image e2e.",
    check=check,
    quality=(
        QualityMeasure("images", "images", metric_count("image")),
        QualityMeasure("steps_per_s", "steps/s", series_rate("step")),
        QualityMeasure("attention_calls", "calls/image", info_mean("attention_calls")),
        QualityMeasure("finite_images", "fraction", info_share("finite")),
    ),
)
