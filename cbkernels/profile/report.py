"""The profile document as a plain-text table (the JSON is the document itself)."""

from __future__ import annotations

from typing import Any

COLUMNS = (
    ("kernel", "kernel", "{}"),
    ("backend", "backend", "{}"),
    ("time_us", "time us", "{:.1f}"),
    ("tflops", "TFLOP/s", "{:.0f}"),
    ("vs_cudnn", "x cuDNN", "{:.2f}"),
    ("regs_per_thread", "regs", "{:.0f}"),
    ("spills", "spills", "{:.0f}"),
    ("shared_bytes", "smem KiB", "{:.0f}"),
    ("threads_per_block", "threads", "{:.0f}"),
    ("blocks_per_sm", "blk/SM", "{}"),
    ("theoretical_occupancy_pct", "theo occ%", "{:.1f}"),
    ("achieved_occupancy_pct", "ach occ%", "{:.1f}"),
    ("dram_throughput_pct", "DRAM%", "{:.1f}"),
    ("global_load_gbps", "ld GB/s", "{:.0f}"),
    ("global_store_gbps", "st GB/s", "{:.0f}"),
    ("l2_gbps", "L2 GB/s", "{:.0f}"),
    ("max_abs_error", "max err", "{:.1e}"),
)


def _cell(row: dict[str, Any], key: str, fmt: str) -> str:
    value = row.get(key)
    if value is None:
        return "-"
    if key == "shared_bytes":
        value = value / 1024
    return fmt.format(value)


def table(doc: dict[str, Any]) -> str:
    """Return the rows as aligned text columns, then each failed row's reason and the ncu status."""
    s = doc["shape"]
    lines = [
        f"{doc['gpu']} (sm{doc['capability'].replace('.', '')}), q ({s['batch']}, {s['heads']}, "
        f"{s['seq_q']}, {s['head_dim']}) kv {s['seq_kv']} {s['dtype']}"
        f"{', laid out (batch, seq, heads, dim)' if s.get('layout') == 'bshd' else ''}; "
        f"median of {doc['repeats']} warm calls (CUDA events)"
    ]
    grid = [[title for _, title, _ in COLUMNS]]
    grid += [[_cell(row, key, fmt) for key, _, fmt in COLUMNS] for row in doc["rows"]]
    widths = [max(len(r[i]) for r in grid) for i in range(len(COLUMNS))]
    for n, cells in enumerate(grid):
        lines.append(
            "  ".join(
                c.ljust(w) if i < 2 else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            ).rstrip()
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    for row in doc["rows"]:
        if row.get("error"):
            lines.append(f"{row['kernel']} ({row['backend']}): {row['error']}")
    ncu = doc.get("ncu", {})
    lines.append("ncu: " + ("used" if ncu.get("used") else f"not used ({ncu.get('reason', '?')})"))
    return "\n".join(lines)
