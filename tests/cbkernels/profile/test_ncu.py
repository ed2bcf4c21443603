"""Parsing Nsight Compute's CSV and cutting it into the profiler's rows.

The samples under data/ are written by us in ncu's formats (``--csv --page raw``: a column per metric
and a units row; ``--page details``: a row per metric), with the ``==PROF==`` lines ncu prints first
and issue 21's H200 anchors as values (cuDNN 168 registers x 384 threads, FlashAttention-2 255 x 128,
the memory-efficient kernel 128 x 128). They are not a recording of a run on the H200.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cbkernels.profile.ncu import (
    MARKER,
    METRICS,
    NcuError,
    find_ncu,
    ncu_command,
    ncu_extras,
    parse_csv,
    run_ncu,
    split_by_marker,
)

DATA = Path(__file__).parent / "data"


def test_the_raw_page_gives_one_kernel_per_launch_in_our_units() -> None:
    kernels = parse_csv((DATA / "ncu_raw_h200.csv").read_text())
    assert [k.name for k in kernels].count(MARKER) == 5 and len(kernels) == 11
    cudnn = next(k for k in kernels if k.name.startswith("cudnn_generated"))
    assert cudnn.values["regs_per_thread"] == 168 and cudnn.values["threads_per_block"] == 384
    assert cudnn.values["achieved_occupancy_pct"] == pytest.approx(14.02)
    assert cudnn.values["time_us"] == pytest.approx(770.21)
    assert cudnn.values["shared_dynamic_bytes"] == pytest.approx(163840)  # "163.84" Kbyte
    assert cudnn.values["l2_gbps"] == pytest.approx(3660)  # "3.66" Tbyte/second
    pointer = next(k for k in kernels if k.name == "attn_fwd_pointer")
    assert pointer.values["time_us"] == pytest.approx(1003.12)  # "1,003.12": a thousands separator
    assert pointer.values["global_store_gbps"] == pytest.approx(381.09011)  # Mbyte/second
    assert set(pointer.values) == set(METRICS)


def test_the_details_page_gives_the_same_kernels() -> None:
    raw = {k.name: k.values for k in parse_csv((DATA / "ncu_raw_h200.csv").read_text())}
    details = parse_csv((DATA / "ncu_details_h200.csv").read_text())
    assert [k.name[:5] for k in details] == ["cb_pr", "cudnn", "void "]
    for kernel in details:
        for key, value in kernel.values.items():
            assert value == pytest.approx(raw[kernel.name][key]), key


def test_rows_take_the_longest_kernel_between_their_markers() -> None:
    kernels = parse_csv((DATA / "ncu_raw_h200.csv").read_text())
    picked = split_by_marker(kernels, 6)
    names = [k.name.split("(")[0][:24] if k else None for k in picked]
    # the cuDNN row also launched a fill kernel; the sixth row never reached the GPU
    assert names == [
        "attn_fwd_tma",
        "attn_fwd_pointer",
        "cudnn_generated_fort_nat",
        "void flash::flash_fwd_ke",
        "fmha_cutlassF_bf16_align",
        None,
    ]
    extras = ncu_extras(picked[3])  # type: ignore[arg-type]
    assert extras["ncu_regs_per_thread"] == 255 and extras["achieved_occupancy_pct"] == pytest.approx(12.03)
    assert extras["ncu_kernel"].startswith("void flash::flash_fwd_kernel")


def test_output_without_a_table_is_an_error_that_says_so() -> None:
    with pytest.raises(NcuError, match="no ncu CSV table"):
        parse_csv("==ERROR== Failed to initialize the profiler: LibraryNotLoaded\n")


def test_the_command_asks_for_every_metric_leaves_the_clocks_and_caps_the_kernels() -> None:
    command = ncu_command("/usr/bin/ncu", ["python3", "-m", "cbkernels.profile"], 24)
    assert command[:5] == ["/usr/bin/ncu", "--csv", "--page", "raw", "--metrics"]
    assert set(command[5].split(",")) == set(METRICS.values())
    assert command[command.index("--clock-control") + 1] == "none"
    assert command[command.index("-c") + 1] == "24"
    assert command[-3:] == ["python3", "-m", "cbkernels.profile"]


def test_without_ncu_running_it_raises_with_the_places_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if find_ncu() is not None and not os.environ.get("PATH", "").startswith(str(tmp_path)):
        monkeypatch.setenv("PATH", str(tmp_path))
    if find_ncu() is not None:
        pytest.skip("ncu is installed in a standard folder here")
    with pytest.raises(NcuError, match="ncu \\(Nsight Compute\\) not found"):
        run_ncu(["true"], 1, 5.0, tmp_path, {})
