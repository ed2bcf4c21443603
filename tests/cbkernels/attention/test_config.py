"""AttentionConfig's checks, config_from_params and the default table (plain Python: no torch, no Triton)."""

from __future__ import annotations

import pytest

from cbkernels.attention import PARAM_NAMES, AttentionConfig, config_from_params, config_over
from cbkernels.attention.config import DEFAULTS, arch_key, default_for, head_dim_bucket


def test_params_from_flags_are_converted_and_round_trip() -> None:
    config = config_from_params(
        {"block_m": "64", "block_n": 32, "num_warps": "8", "maxnreg": "128", "variant": "tma",
         "warp_specialize": "true"}
    )  # fmt: skip
    assert config == AttentionConfig(64, 32, 8, 3, 128, "tma", True)
    assert config_from_params(config.params()) == config
    assert config.label == "tma-64x32-w8-s3-r128-ws"


def test_maxnreg_none_is_accepted_as_text_and_missing_keys_keep_their_defaults() -> None:
    assert config_from_params({"maxnreg": "none"}) == AttentionConfig()
    assert config_from_params({}) == AttentionConfig()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"block_k": 64}, "unknown attention parameter 'block_k' \\(known: block_m, block_n,"),
        (
            {"block_m": 100},
            "attention parameter 'block_m': block_m must be one of \\[16, 32, 64, 128, 256\\]",
        ),
        ({"block_n": "wide"}, "attention parameter 'block_n': expected an integer, not 'wide'"),
        ({"num_warps": 3}, "attention parameter 'num_warps': num_warps must be one of"),
        ({"num_stages": 0}, "attention parameter 'num_stages': num_stages must be an integer from 1 to 8"),
        (
            {"maxnreg": 300},
            "attention parameter 'maxnreg': maxnreg must be None or an integer from 24 to 255",
        ),
        ({"variant": "cuda"}, "attention parameter 'variant': variant must be one of \\['pointer', 'tma'\\]"),
        ({"warp_specialize": "maybe"}, "attention parameter 'warp_specialize': warp_specialize must be true"),
        (
            {"warp_specialize": True},
            "attention parameter 'warp_specialize': warp_specialize needs variant 'tma'",
        ),
        ({"block_m": True}, "attention parameter 'block_m'"),
    ],
)
def test_a_bad_parameter_is_refused_with_its_key_named(params: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        config_from_params(params)


def test_the_param_names_are_the_dataclass_fields() -> None:
    assert set(PARAM_NAMES) == set(AttentionConfig().params())


def test_the_default_table_covers_every_architecture_and_bucket() -> None:
    for arch in ("sm90", "sm80", "cpu"):
        for bucket in (64, 128, 256):
            assert isinstance(DEFAULTS[(arch, bucket)], AttentionConfig)
    assert arch_key((9, 0)) == "sm90" and arch_key((10, 0)) == "sm90" and arch_key((8, 9)) == "sm80"
    assert arch_key(None) == "cpu"
    assert [head_dim_bucket(d) for d in (1, 40, 64, 65, 128, 129, 256)] == [64, 64, 64, 128, 128, 256, 256]
    # The H100 profile's winner at head dim 64 (docs/results/kernels-h100.json); tma above it.
    assert default_for(64, (9, 0)) == AttentionConfig(64, 64, 4, 3, None, "pointer")
    assert default_for(128, (9, 0)).variant == "tma"
    assert default_for(64, (9, 0), fp32=True).variant == "pointer"
    with pytest.raises(ValueError, match=r"head_dim must be 1\.\.256, not 257"):
        head_dim_bucket(257)


def test_params_over_a_gpus_default_change_only_the_keys_they_give() -> None:
    h100 = default_for(64, (9, 0))
    assert config_over(h100, {"maxnreg": "128"}) == AttentionConfig(64, 64, 4, 3, 128, "pointer")
    # config_from_params fills in the dataclass's columns instead: another tile altogether.
    assert config_from_params({"maxnreg": 128}) == AttentionConfig(128, 64, 4, 3, 128, "pointer")
    assert config_over(h100, {}) == h100
    with pytest.raises(ValueError, match="attention parameter 'warp_specialize'"):
        config_over(h100, {"warp_specialize": True})  # the default is a pointer tile
