"""Flash-attention forward in Triton for diffusion shapes (docs/kernels.md).

Non-causal, no mask or dropout; q (batch, heads, Sq, D), k and v (batch, heads, Skv, D) with Sq and Skv
free (cross-attention), D up to 256, bf16/fp16 (fp32 too). Importing this package imports neither torch
nor Triton; the first ``attention`` call does.

    from cbkernels.attention import AttentionConfig, attention, default_config, config_from_params
    from cbkernels.attention import config_over
"""

from cbkernels.attention.config import PARAM_NAMES, AttentionConfig, config_from_params, config_over
from cbkernels.attention.op import attention, default_config
from cbkernels.attention.tune import Trial, autotune, candidate_configs

__all__ = [
    "PARAM_NAMES",
    "AttentionConfig",
    "Trial",
    "attention",
    "autotune",
    "candidate_configs",
    "config_from_params",
    "config_over",
    "default_config",
]
