"""Which MPS SM shares compute matrix products right on this GPU: the partition scheduler's check, per share.

Usage: python -m benchmarks.perf.mps_shares [--shares 10,25,33,50,66,100]

Starts a private MPS daemon (as a partitioned run does) and, for each share, runs
``benchmarks.schedulers.mps_check`` in a process that is its client at that share: half-precision
products into outputs filled with a sentinel, each output compared with the float64 product. Prints a
row per share: the SMs the process saw, the outcome, and per product "right" or how many outputs were
wrong (and how many of them never written). Exit 0 when every share passed, 1 when one failed, 2 when
MPS cannot start here, 3 when none failed but some could not be checked (no torch or CUDA device in the
check's process, or the check broke: the row says why). docs/results/mps-gemm-h100.md has an H100's answers.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from benchmarks.schedulers.base import SchedulerError
from benchmarks.schedulers.mps import MpsDaemon, client_env, find_control_binary
from benchmarks.schedulers.mps_check import CASES, ShareCheck, check_share
from benchmarks.table import text_table


def row(check: ShareCheck) -> list[str]:
    """One share's row: share, SMs, outcome, then a cell per product (the reason where none ran)."""
    cells = [f"{p.wrong} wrong ({p.unwritten} unwritten)" if p.wrong else "right" for p in check.products]
    if not cells:
        cells = [check.reason, *[""] * (len(CASES) - 1)]
    return [str(check.share), str(check.sms) if check.sms is not None else "-", check.status, *cells]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shares", default="10,25,33,50,66,100", help="SM shares in percent, comma-separated"
    )
    args = parser.parse_args(argv)
    try:
        shares = [int(s) for s in args.shares.split(",")]
    except ValueError:
        parser.error(f"--shares: whole percentages separated by commas, not {args.shares!r}")
    if bad := [s for s in shares if not 1 <= s <= 100]:
        parser.error(f"--shares: a share is 1 to 100 percent, not {bad[0]}")
    try:
        daemon = MpsDaemon(find_control_binary())
        daemon.start()
    except SchedulerError as exc:
        print(exc, file=sys.stderr)
        return 2
    rows = [["share %", "SMs", "outcome", *(f"{d} {m}x{k} @ {k}x{n}" for d, m, n, k in CASES)]]
    try:
        checks = [check_share(client_env(daemon.env, share, None), share) for share in shares]
    finally:
        daemon.stop()
    print(text_table([*rows, *(row(c) for c in checks)]))
    if any(c.status == "failed" for c in checks):
        return 1
    return 0 if all(c.status == "passed" for c in checks) else 3


if __name__ == "__main__":
    sys.exit(main())
