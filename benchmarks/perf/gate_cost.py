"""Gate cost: acquire/release pairs per second and the latency each gate adds to a GPU step.

Usage: python -m benchmarks.perf.gate_cost [--pairs 200000] [--rounds 5] [--step-us 100]
Every figure is measured side by side in the same run (rounds interleaved, best round kept), so the
ratios hold on a loaded machine even when the absolute numbers move. Goal: the credit gate adds
< 50 us per step. Rows:
- greedy: the open gate (a method call; the floor any gate pays);
- credit, alone: the credit gate of a HIGH application, three applications in the table;
- credit, medium: a MEDIUM application's gate, which evaluates the whole rule (refill, threat, yield);
- credit, contended: the MEDIUM gate while another process steps through its own gate non-stop;
- wake-up: a LOW step blocked behind a HIGH step, from the HIGH release to the LOW admission.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from collections.abc import Callable
from typing import Any

from benchmarks.clock import now
from benchmarks.schedulers.base import Gate, NodePlan, OpenGate
from benchmarks.schedulers.credit import CreditScheduler
from benchmarks.schedulers.ledger import CreditParams
from benchmarks.spec.load import load_yaml
from benchmarks.table import text_table

GOAL_US = 50.0
WORKFLOW = """
chat: {type: Synthetic, priority: high, slo: ["e2e<=1s"]}
image: {type: Synthetic, priority: medium, slo: ["step<=1s"]}
research: {type: Synthetic, priority: low}
workflows:
  chat: {uses: chat}
  image: {uses: image}
  research: {uses: research, background: true}
"""


def _plans() -> dict[str, NodePlan]:
    return {
        "chat": NodePlan("chat", "chat", "gpu", "high", None, False),
        "image": NodePlan("image", "image", "gpu", "medium", None, False),
        "research": NodePlan("research", "research", "gpu", "low", None, True),
    }


def _spin(us: float) -> None:
    deadline = now() + us * 1e-6
    while now() < deadline:
        pass


def pairs_time(gate: Gate | None, pairs: int, step_us: float) -> float:
    """Return seconds for ``pairs`` steps of ``step_us`` through ``gate`` (None: no gate at all)."""
    t = time.perf_counter()
    if gate is None:
        for _ in range(pairs):
            _spin(step_us)
    else:
        acquire, release = gate.acquire, gate.release
        for _ in range(pairs):
            acquire("app", "step")
            _spin(step_us)
            release("app", "step")
    return time.perf_counter() - t


def _hammer(spec: Any, stop: Any) -> None:
    gate = spec.open()
    while not stop.is_set():
        for _ in range(1000):
            gate.acquire("other", "step")
            gate.release("other", "step")


def _low_waiter(spec: Any, ready: Any, admitted: Any) -> None:
    gate = spec.open()
    ready.set()
    gate.acquire("research", "step")
    admitted.value = now()
    gate.release("research", "step")


def wake_latencies(scheduler: CreditScheduler, plans: dict[str, NodePlan], rounds: int) -> list[float]:
    """Return seconds from a pressured HIGH release to the admission of the LOW step it held back."""
    ctx = mp.get_context("spawn")
    high = scheduler.gate_for(plans["chat"]).open()
    out = []
    for _ in range(rounds):
        ready, admitted = ctx.Event(), ctx.Value("d", 0.0)
        high.acquire("chat", "step")
        proc = ctx.Process(target=_low_waiter, args=(scheduler.gate_for(plans["research"]), ready, admitted))
        proc.start()
        ready.wait(30)
        time.sleep(0.05)  # the LOW step is now waiting (spinning, then sleeping in short slices)
        released = now()
        high.release("chat", "step")
        proc.join(30)
        out.append(admitted.value - released)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=200_000, help="acquire/release pairs per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--step-us", type=float, default=100.0, help="simulated step length for latency rows")
    args = parser.parse_args()

    workflow = load_yaml(WORKFLOW, name="gate-cost")
    plans = _plans()
    # No linger: the wake-up row then measures the gate's wait loop alone.
    scheduler = CreditScheduler(CreditParams(linger_s=0.0))
    scheduler.start(workflow, plans)
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    try:
        gates: dict[str, Callable[[], Gate | None]] = {
            "none": lambda: None,
            "greedy": OpenGate,
            "credit, alone": lambda: scheduler.gate_for(plans["chat"]).open(),
            "credit, medium": lambda: scheduler.gate_for(plans["image"]).open(),
        }
        opened = {name: make() for name, make in gates.items()}
        best: dict[str, float] = {}
        best_step: dict[str, float] = {}
        for _ in range(args.rounds):
            for name, gate in opened.items():
                best[name] = min(best.get(name, 1e9), pairs_time(gate, args.pairs, 0.0))
                steps = max(1, args.pairs // 20)
                best_step[name] = min(best_step.get(name, 1e9), pairs_time(gate, steps, args.step_us) / steps)
        # The contended row needs a second process stepping through its own slot all the time.
        hammer = ctx.Process(target=_hammer, args=(scheduler.gate_for(plans["chat"]), stop), daemon=True)
        hammer.start()
        time.sleep(1.0)
        contended = min(pairs_time(opened["credit, medium"], args.pairs, 0.0) for _ in range(args.rounds))
        stop.set()
        hammer.join(10)
        wakes = sorted(wake_latencies(scheduler, plans, rounds=10))
    finally:
        stop.set()
        scheduler.stop()

    per_pair = {name: t / args.pairs for name, t in best.items()}
    per_pair["credit, contended"] = contended / args.pairs
    greedy = per_pair["greedy"]
    print(f"{args.pairs} acquire/release pairs per round, best of {args.rounds}, measured side by side")
    rows = [["gate", "pairs/s", "us/pair", "added vs greedy", "x greedy"]]
    rows += [
        [name, f"{1 / t:,.0f}", f"{t * 1e6:.2f}", f"{(t - greedy) * 1e6:.2f} us", f"{t / greedy:.1f}"]
        for name, t in per_pair.items()
        if name != "none"
    ]
    print(text_table(rows))
    print()
    bare = best_step["none"]
    print(f"latency added to a {args.step_us:g} us step (best of {args.rounds}), against no gate")
    rows = [["gate", "added"]]
    rows += [[name, f"{(t - bare) * 1e6:.2f} us"] for name, t in best_step.items() if name != "none"]
    print(text_table(rows))
    worst = max(per_pair[n] for n in per_pair if n.startswith("credit")) * 1e6
    print()
    print(
        f"credit gate, worst row: {worst:.2f} us per pair -> {'meets' if worst < GOAL_US else 'MISSES'} "
        f"the {GOAL_US:g} us goal"
    )
    median_us, max_us = wakes[len(wakes) // 2] * 1e6, wakes[-1] * 1e6
    print(
        f"wake-up of a held-back LOW step after the HIGH release: median {median_us:.0f} us, "
        f"max {max_us:.0f} us (bounded by max_sleep_s = {scheduler.params.max_sleep_s * 1e3:g} ms)"
    )


if __name__ == "__main__":
    main()
