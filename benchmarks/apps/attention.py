"""ImageGen's attention switch: which kernel serves the denoiser's attention (docs/applications.md).

``sdpa`` leaves the choice to PyTorch per call (today's behaviour); ``cudnn``, ``flash``,
``efficient`` and ``math`` pin one PyTorch SDPA backend: the call goes to that backend's own operator
(``aten::_scaled_dot_product_flash_attention`` and its siblings) as PyTorch's front end would send it
once it had picked that backend, after the backend's own check of the call
(``torch.backends.cuda.can_use_*``); ``cbkernels`` calls ``cbkernels.attention`` (the Triton kernel)
with the unit's ``attention_params``.

Not ``torch.nn.attention.sdpa_kernel``: it pins by switching the other backends off in flags of the
whole process, and the sessions of one unit run in threads of one process (benchmarks/runner/process.py).
Another session's VAE or text encoder then found only the pinned backend, which cannot serve it, and two
sessions' pins ending out of order left it on for good: every flash and cudnn run of
studies/h200/kernels-sharing.yml on an H100 failed with "No available kernel".

The switch wraps each attention processor of the pipeline's denoiser (the U-Net of SD 1.x/2.x/XL, the
MMDiT of SD 3.x): the processor runs as diffusers wrote it (``AttnProcessor2_0``,
``JointAttnProcessor2_0``), and its ``F.scaled_dot_product_attention`` call is intercepted with a
``TorchFunctionMode`` and served by the chosen kernel. Every choice goes through the same wrapper, so
that their step times differ by the kernel alone, and every served call is counted (per request in
the result: the kernel did run). The VAE and the text encoders keep PyTorch's own choice: their
attention is outside the denoising steps.

A kernel that cannot serve a call (flash with a head dim over 256 or float32 inputs, any pinned backend
on CPU tensors but math, cbkernels with a mask) raises ``AttentionUnavailable`` with PyTorch's or the
kernel's reason: the request fails, never served by another kernel under this one's name.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from collections import Counter
from collections.abc import Mapping
from typing import Any, Literal, get_args

AttentionChoice = Literal["sdpa", "cudnn", "flash", "efficient", "math", "cbkernels"]
CHOICES: tuple[str, ...] = get_args(AttentionChoice)
# The choices a CPU serves: PyTorch's choice and its reference kernel. PyTorch has a CPU flash kernel
# too, but it is not the CUDA FlashAttention-2 the name means on a GPU, so ``flash`` asks for a GPU.
CPU_CHOICES: tuple[str, ...] = ("sdpa", "math")
# The pinned choices: the name of their ``torch.nn.attention.SDPBackend`` member.
SDPA_BACKENDS: dict[str, str] = {
    "cudnn": "CUDNN_ATTENTION",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "math": "MATH",
}
# F.scaled_dot_product_attention's parameters, in order.
_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
# SDPBackend member name -> the choice's name, as results record the backend that served.
_BACKEND_NAMES = {member: choice for choice, member in SDPA_BACKENDS.items()}
# PyTorch's front end pads the head dim to a multiple of 8 for flash, and a mask's rows to a multiple of
# 16 elements for the memory-efficient kernel (ATen's sdp_utils: pad_last_dim, preprocess_mask).
_FLASH_HEAD_DIM_ALIGNMENT = 8
_MEM_EFF_MASK_ALIGNMENT = 16


class AttentionUnavailable(RuntimeError):
    """The chosen attention kernel cannot serve a call (or cannot run here); the message says why."""


def cbkernels_attention() -> Any:
    """Return the ``cbkernels.attention`` module; raise ValueError saying what is missing when it
    cannot be imported (the package is a plug-in: the engine runs without it)."""
    try:
        import cbkernels.attention as module
    except ImportError as exc:
        raise ValueError(
            f"attention: cbkernels needs cbkernels.attention, which cannot be imported here ({exc})"
        ) from None
    return module


def check_params(choice: str, params: Mapping[str, Any] | None) -> None:
    """Check a unit's ``attention_params`` against its ``attention`` choice; raise ValueError saying
    what is wrong (parameters of another choice, or a key or value ``config_from_params`` refuses)."""
    if not params:
        return
    if choice != "cbkernels":
        raise ValueError(f"only attention: cbkernels takes parameters (this unit has attention: {choice})")
    cbkernels_attention().config_from_params(params)


def machine_problems(choice: str, on_gpu: bool, unit: str) -> list[str]:
    """Return why ``choice`` cannot run where the unit runs (``on_gpu``: a CUDA GPU), as sentences:
    only ``sdpa`` and ``math`` run on the CPU; ``cbkernels`` needs Triton besides a GPU."""
    if not on_gpu and choice not in CPU_CHOICES:
        return [
            f"unit '{unit}' asks for attention: {choice}, which needs a CUDA GPU, but it runs on this "
            f"machine's CPU (there: {' or '.join(CPU_CHOICES)}); run it on a GPU worker"
        ]
    if choice != "cbkernels":
        return []
    try:
        cbkernels_attention()
    except ValueError as exc:
        return [f"unit '{unit}': {exc}"]
    if importlib.util.find_spec("triton") is None:
        return [f"unit '{unit}' asks for attention: cbkernels, which needs Triton, not installed here"]
    return []


def _describe(call: Mapping[str, Any]) -> str:
    """Return the shapes and dtype of an attention call's q, k, v (its arguments by name), as errors
    name them."""
    q, k = call["query"], call["key"]
    return f"q {tuple(q.shape)}, k/v {tuple(k.shape)}, {str(q.dtype).removeprefix('torch.')}"


class AttentionSwitch:
    """Serves the attention of one denoiser with the chosen kernel and counts the calls it served.

    ``install(denoiser)`` wraps its processors; ``calls`` counts the served calls by the backend that
    served them (for ``sdpa``, the one PyTorch picked); ``take()`` returns and resets them.
    """

    def __init__(self, choice: str, params: Mapping[str, Any] | None, device: str) -> None:
        import torch
        from torch.overrides import TorchFunctionMode

        if choice not in CHOICES:
            raise ValueError(f"attention: unknown choice {choice!r}; known: {', '.join(CHOICES)}")
        if device != "cuda" and choice not in CPU_CHOICES:
            raise AttentionUnavailable(f"attention: {choice} needs a CUDA GPU; this unit runs on {device}")
        self.choice = choice
        self.params = dict(params or {})
        self.calls: Counter[str] = Counter()
        # The kernel's config per head dim, as resolved at the first call of each: the GPU's default
        # with ``params`` over it (cbkernels.attention.config_over).
        self.configs: dict[int, Any] = {}
        self._resolve: Any = None
        self._sdpa = torch.nn.functional.scaled_dot_product_attention
        self._pin: str | None = None  # the pinned SDPA backend's choice name
        self._kernel: Any = None
        self._torch = torch
        if choice in SDPA_BACKENDS:
            self._pin = choice
        elif choice == "cbkernels":
            module = cbkernels_attention()
            self._kernel = module.attention
            module.config_from_params(self.params)  # the keys and values, checked before the first call
            self._resolve = lambda q: module.config_over(
                module.default_config(q.shape[-1], q.dtype, q.device), self.params
            )
        switch = self

        class Serve(TorchFunctionMode):
            def __torch_function__(
                self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
            ) -> Any:
                kwargs = kwargs or {}
                if func is switch._sdpa:
                    return switch.serve(args, kwargs)
                return func(*args, **kwargs)

        self._mode = Serve

    def install(self, denoiser: Any) -> int:
        """Wrap every attention processor of ``denoiser`` (a diffusers U-Net or SD3 transformer);
        return how many were wrapped."""
        processors = denoiser.attn_processors
        denoiser.set_attn_processor({name: _Processor(p, self) for name, p in processors.items()})
        return len(processors)

    def serve(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Return the attention of one call by the chosen kernel; count it under the backend that
        served it. Raise AttentionUnavailable when that kernel cannot serve the call."""
        if self._kernel is not None:
            out = self._serve_cbkernels(args, kwargs)
            self.calls["cbkernels"] += 1
            return out
        if self._pin is None:  # sdpa: PyTorch's choice, recorded as the backend it picks
            out = self._sdpa(*args, **kwargs)
            self.calls[self._picked(args, kwargs)] += 1
            return out
        out = self._serve_pinned(args, kwargs)
        self.calls[self.choice] += 1
        return out

    def _serve_pinned(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Return the attention of one call by the pinned backend's operator, prepared as PyTorch's
        front end prepares it for that backend (the module's docstring says why not ``sdpa_kernel``).
        Raise AttentionUnavailable, with PyTorch's reasons, when the backend's check refuses the call."""
        torch = self._torch
        aten = torch.ops.aten
        call = dict(zip(_SDPA_ARGS, args, strict=False)) | kwargs
        q, k, v = call["query"], call["key"], call["value"]
        mask = call.get("attn_mask")
        dropout_p = float(call.get("dropout_p") or 0.0)
        is_causal = bool(call.get("is_causal"))
        scale = call.get("scale")
        gqa = bool(call.get("enable_gqa"))
        if mask is not None and mask.dtype == torch.bool:  # as an additive mask, as the front end does
            mask = torch.zeros(mask.shape, dtype=q.dtype, device=mask.device).masked_fill_(
                mask.logical_not(), -math.inf
            )
        if self._pin == "math":
            return aten._scaled_dot_product_attention_math(
                q, k, v, mask, dropout_p, is_causal, scale=scale, enable_gqa=gqa
            )[0]
        from torch.backends.cuda import SDPAParams

        self._check(call, SDPAParams(q, k, v, mask, dropout_p, is_causal, gqa))
        logsumexp = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
        if self._pin == "flash":
            head_dim = q.shape[-1]
            pad = -head_dim % _FLASH_HEAD_DIM_ALIGNMENT
            if scale is None:  # the unpadded head dim's
                scale = 1.0 / math.sqrt(head_dim)
            if pad:
                q, k, v = (torch.nn.functional.pad(t, (0, pad)) for t in (q, k, v))
            flash = aten._scaled_dot_product_flash_attention
            out = flash(q, k, v, dropout_p, is_causal, False, scale=scale)[0]
            return out[..., :head_dim] if pad else out
        if self._pin == "cudnn":
            return aten._scaled_dot_product_cudnn_attention(
                q, k, v, mask, logsumexp, dropout_p, is_causal, False, scale=scale
            )[0]
        if mask is not None:
            mask = self._aligned_bias(mask, q, k)
        return aten._scaled_dot_product_efficient_attention(
            q, k, v, mask, logsumexp, dropout_p, is_causal, scale=scale
        )[0]

    def _check(self, call: Mapping[str, Any], params: Any) -> None:
        """Raise AttentionUnavailable when the pinned fused backend cannot serve the call (``params``:
        its ``SDPAParams``, the mask as the operator gets it): on CPU tensors, or refused by the
        backend's own check (``torch.backends.cuda.can_use_*``, whose debug warnings are its reasons)."""
        device = call["query"].device.type
        if device != "cuda":
            raise AttentionUnavailable(
                f"attention: {self.choice} cannot serve the call ({_describe(call)}): it runs on "
                f"CUDA tensors only, these are on {device}"
            )
        from torch.backends import cuda

        can_use = getattr(cuda, f"can_use_{self._pin}_attention")
        if can_use(params, False):
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            can_use(params, True)
        reasons = [str(w.message).splitlines()[0] for w in caught] or ["PyTorch's check refused it"]
        raise AttentionUnavailable(
            f"attention: {self.choice} cannot serve the call ({_describe(call)}): "
            f"{'; '.join(dict.fromkeys(reasons))}"
        )

    def _aligned_bias(self, mask: Any, q: Any, k: Any) -> Any:
        """Return ``mask`` broadcast to (..., L, S) with each row's stride a multiple of 16 elements
        (padded, then sliced back), as the memory-efficient kernel needs and the front end makes it."""
        bias = mask.expand(*q.shape[:-1], k.shape[-2])
        if all(stride % _MEM_EFF_MASK_ALIGNMENT == 0 for stride in bias.stride()[:-1]):
            return bias
        length = bias.shape[-1]
        pad = -length % _MEM_EFF_MASK_ALIGNMENT or _MEM_EFF_MASK_ALIGNMENT
        return self._torch.nn.functional.pad(bias, (0, pad))[..., :length]

    def _serve_cbkernels(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = dict(zip(_SDPA_ARGS, args, strict=False)) | kwargs
        given = {
            "attn_mask": call.get("attn_mask") is not None,  # a tensor: never its truth value
            "dropout_p": bool(call.get("dropout_p")),
            "is_causal": bool(call.get("is_causal")),
            "enable_gqa": bool(call.get("enable_gqa")),
        }
        refused = [key for key, present in given.items() if present]
        if refused:
            raise AttentionUnavailable(
                f"attention: cbkernels cannot serve the call ({_describe(call)}): it takes no "
                f"{', '.join(refused)}"
            )
        try:
            query = call["query"]
            if query.shape[-1] not in self.configs:
                self.configs[query.shape[-1]] = self._resolve(query)
            return self._kernel(
                query, call["key"], call["value"], scale=call.get("scale"), params=self.params
            )
        except ValueError as exc:
            raise AttentionUnavailable(
                f"attention: cbkernels cannot serve the call ({_describe(call)}): {exc}"
            ) from None

    def _picked(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """Return the backend PyTorch picks for a call (its dispatcher's own choice function)."""
        from torch.nn.attention import SDPBackend

        try:
            index = self._torch._fused_sdp_choice(*args, **kwargs)
            name = SDPBackend(index).name
        except (RuntimeError, TypeError, ValueError):
            return "unknown"
        return _BACKEND_NAMES.get(name, name.lower())

    def take(self) -> dict[str, int]:
        """Return the calls served since the last ``take`` by backend, and reset the count."""
        calls, self.calls = dict(self.calls), Counter()
        return calls

    def describe(self) -> dict[str, Any]:
        """Return what a result records of the switch: the choice, its parameters, and the backend
        (a pinned one, ``cbkernels`` with its configuration, or PyTorch's choice per call)."""
        if self.choice == "sdpa":
            backend = "PyTorch's choice per call (the backends that served: attention_backends per request)"
        else:
            backend = self.choice
        out: dict[str, Any] = {"choice": self.choice, "params": self.params, "backend": backend}
        if self.configs:
            # By head dim: the GPU's default for it with the unit's params over it (before the kernel's
            # fallback from tma to pointer for a layout the copy engine cannot take).
            out["configs"] = {str(d): cfg.params() for d, cfg in sorted(self.configs.items())}
        return out

    def mode(self) -> Any:
        """Return a fresh interception context for one processor call."""
        return self._mode()


class _Processor:
    """A diffusers attention processor run under the switch: the wrapped processor does the
    projections as diffusers wrote them; its attention call is served by the switch.

    diffusers passes a processor only the keyword arguments its ``__call__`` names, so this one names
    those of the processors it wraps (``temb`` of ``AttnProcessor2_0``) and passes the rest on.
    """

    def __init__(self, inner: Any, switch: AttentionSwitch) -> None:
        self.inner = inner
        self.switch = switch

    def __call__(
        self,
        attn: Any,
        hidden_states: Any,
        encoder_hidden_states: Any = None,
        attention_mask: Any = None,
        temb: Any = None,
        **kwargs: Any,
    ) -> Any:
        if temb is not None:
            kwargs["temb"] = temb
        with self.switch.mode():
            return self.inner(
                attn,
                hidden_states,
                encoder_hidden_states=encoder_hidden_states,
                attention_mask=attention_mask,
                **kwargs,
            )
