"""The credit scheduler's admission rule, credit arithmetic and SLO pressure, with explicit times."""

from __future__ import annotations

import math

import pytest

from benchmarks.schedulers import ledger
from benchmarks.schedulers.ledger import CreditParams, CreditTable, Grant, Priority
from benchmarks.spec.model import parse_slo

# The rules at θ = 0.5 (the figures below are worked out for it; the default is 0.3).
P = CreditParams(pressure_threshold=0.5)


def table(*apps: tuple[Priority, float] | tuple[Priority, float, str], t: float = 0.0) -> CreditTable:
    """A table in plain memory with one slot per (priority, pressure[, device])."""
    tab = CreditTable(bytearray(CreditTable.nbytes(len(apps))), len(apps))
    for slot, app in enumerate(apps):
        device = app[2] if len(app) == 3 else "gpu"
        tab.enable(slot, app[0], app[1], t, P, device)
    return tab


def run_step(tab: CreditTable, slot: int, start: float, duration: float) -> Grant:
    """Admit and finish one step of ``slot``; return its grant (which must not be WAIT)."""
    ledger.begin_wait(tab, slot)
    grant = ledger.decide(tab, slot, start, 0.0, P)
    assert grant, f"slot {slot} was not admitted at t={start}"
    ledger.admit(tab, slot, grant, 0.0)
    ledger.finish(tab, slot, start + duration, duration, P)
    return grant


def hold_running(tab: CreditTable, slot: int) -> None:
    ledger.begin_wait(tab, slot)
    ledger.admit(tab, slot, Grant.RESERVED, 0.0)


# -- priority --------------------------------------------------------------------------------------


def test_high_is_admitted_even_while_everyone_else_is_pressured_and_running() -> None:
    tab = table((Priority.HIGH, 0.0), (Priority.MEDIUM, 3.0), (Priority.LOW, 3.0))
    hold_running(tab, 1)
    hold_running(tab, 2)
    assert ledger.decide(tab, 0, 1.0, 0.0, P) is Grant.RESERVED


def test_low_waits_while_a_pressured_high_app_is_running() -> None:
    tab = table((Priority.HIGH, 0.9), (Priority.LOW, 0.0))
    hold_running(tab, 0)
    assert ledger.decide(tab, 1, 1.0, 0.0, P) is Grant.WAIT


def test_low_runs_alongside_a_high_app_that_has_slack() -> None:
    tab = table((Priority.HIGH, 0.2), (Priority.LOW, 0.0))
    hold_running(tab, 0)
    assert ledger.decide(tab, 1, 1.0, 0.0, P) is Grant.LENT


def test_low_yields_between_two_close_steps_of_a_pressured_app_then_runs_after_linger() -> None:
    tab = table((Priority.HIGH, 0.9), (Priority.LOW, 0.0))
    run_step(tab, 0, 1.0, 0.01)  # released at 1.01
    assert ledger.decide(tab, 1, 1.01 + P.linger_s / 2, 0.0, P) is Grant.WAIT
    assert ledger.decide(tab, 1, 1.01 + P.linger_s * 2, 0.0, P) is Grant.LENT


def test_medium_with_credit_yields_only_to_a_pressured_high_app_that_is_waiting() -> None:
    tab = table((Priority.HIGH, 0.9), (Priority.MEDIUM, 0.0))
    hold_running(tab, 0)
    assert ledger.decide(tab, 1, 0.001, 0.0, P) is Grant.CREDIT
    ledger.finish(tab, 0, 0.002, 0.002, P)
    ledger.begin_wait(tab, 0)  # HIGH is queued at its gate
    assert ledger.decide(tab, 1, 0.003, 0.0, P) is Grant.WAIT


def test_a_less_urgent_app_never_holds_back_a_more_urgent_one() -> None:
    tab = table((Priority.MEDIUM, 0.0), (Priority.LOW, 5.0))
    hold_running(tab, 1)
    assert ledger.decide(tab, 0, 1.0, 0.0, P) in (Grant.CREDIT, Grant.LENT)


def test_applications_on_different_devices_do_not_hold_each_other_back() -> None:
    tab = table((Priority.HIGH, 2.0, "gpu"), (Priority.LOW, 0.0, "cpu"))
    hold_running(tab, 0)
    assert ledger.decide(tab, 1, 1.0, 0.0, P) is Grant.LENT


def test_the_starvation_guard_admits_a_step_that_waited_max_wait() -> None:
    tab = table((Priority.HIGH, 2.0), (Priority.LOW, 0.0))
    hold_running(tab, 0)
    assert ledger.decide(tab, 1, 5.0, P.max_wait_s - 0.01, P) is Grant.WAIT
    assert ledger.decide(tab, 1, 5.0, P.max_wait_s, P) is Grant.FORCED


# -- credit allocation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("threat", "rate"),
    [(0.0, 1.0), (0.5, 1.0), (0.75, 0.6), (1.0, 0.2), (4.0, 0.2)],
)
def test_refill_rate_falls_linearly_from_the_threshold_to_the_floor_at_the_slo(
    threat: float, rate: float
) -> None:
    assert ledger.throttle(threat, P.medium_floor, P) == pytest.approx(rate)


def test_medium_credit_refills_at_the_throttled_rate_and_is_capped_at_burst() -> None:
    tab = table((Priority.HIGH, 0.75), (Priority.MEDIUM, 0.0))
    hold_running(tab, 0)
    tab.set(1, ledger.BUCKET, -0.1)
    # 0.1 s at the rate a 0.75 threat leaves (0.6) refills 0.06 s of credit.
    assert ledger.refill(tab, 1, 0.1, P) == pytest.approx(0.6)
    assert tab.get(1, ledger.BUCKET) == pytest.approx(-0.04)
    ledger.refill(tab, 1, 100.0, P)
    assert tab.get(1, ledger.BUCKET) == pytest.approx(P.burst_s)


def test_a_finished_step_is_charged_its_duration_and_medium_waits_until_repaid() -> None:
    tab = table((Priority.HIGH, 1.0), (Priority.MEDIUM, 0.0))
    hold_running(tab, 0)  # a HIGH app at its SLO holds MEDIUM to the floor rate (0.2)
    assert run_step(tab, 1, 0.0, 0.15) is Grant.CREDIT  # 0.05 burst - 0.15 + 0.2 * 0.15 = -0.07
    assert tab.get(1, ledger.BUCKET) == pytest.approx(-0.07)
    assert ledger.decide(tab, 1, 0.15 + 0.3, 0.0, P) is Grant.WAIT  # -0.07 + 0.06 < 0
    assert ledger.decide(tab, 1, 0.15 + 0.36, 0.0, P) is Grant.CREDIT


def test_medium_duty_cycle_under_a_pressured_high_app_converges_to_the_floor() -> None:
    tab = table((Priority.HIGH, 1.5), (Priority.MEDIUM, 0.0))
    hold_running(tab, 0)
    t, busy, step = 0.0, 0.0, 0.02
    while t < 20.0:
        ledger.begin_wait(tab, 1)
        grant = ledger.decide(tab, 1, t, 0.0, P)
        tab.add(1, ledger.WAITING, -1)
        if grant:
            tab.add(1, ledger.WAITING, 1)
            ledger.admit(tab, 1, grant, 0.0)
            ledger.finish(tab, 1, t + step, step, P)
            t, busy = t + step, busy + step
        else:
            t += 0.001
    assert busy / t == pytest.approx(P.medium_floor, abs=0.01)


def test_medium_peers_time_slice_toward_the_more_pressured_one() -> None:
    tab = table((Priority.MEDIUM, 1.0), (Priority.MEDIUM, 0.2))
    hold_running(tab, 0)
    assert ledger.refill(tab, 1, 1.0, P) == pytest.approx(P.medium_floor)
    # The more pressured peer is not held back by the relaxed one.
    ledger.finish(tab, 0, 1.0, 1.0, P)
    hold_running(tab, 1)
    assert ledger.refill(tab, 0, 1.0, P) == 1.0


# -- lending ---------------------------------------------------------------------------------------


def test_medium_out_of_credit_borrows_when_no_pressured_app_is_active() -> None:
    tab = table((Priority.HIGH, 1.5), (Priority.MEDIUM, 0.0))
    tab.set(1, ledger.BUCKET, -10.0)
    assert ledger.decide(tab, 1, 1.0, 0.0, P) is Grant.LENT
    hold_running(tab, 0)
    assert ledger.decide(tab, 1, 1.0, 0.0, P) is Grant.WAIT


def test_idle_credit_keeps_the_device_busy_low_runs_back_to_back_when_alone() -> None:
    tab = table((Priority.HIGH, 3.0), (Priority.LOW, 0.0))
    grants = [run_step(tab, 1, 0.1 * i, 0.1) for i in range(20)]
    assert set(grants) == {Grant.LENT}
    assert tab.stats(1)["steps"] == 20
    assert tab.stats(1)["step_s"] == pytest.approx(2.0)


def test_stats_count_each_grant_kind_and_the_time_waited() -> None:
    tab = table((Priority.LOW, 0.0))
    ledger.begin_wait(tab, 0)
    ledger.admit(tab, 0, Grant.FORCED, 2.5)
    stats = tab.stats(0)
    assert (stats["steps"], stats["forced"], stats["delayed"], stats["wait_s"]) == (1, 1, 1, 2.5)


# -- SLO pressure ----------------------------------------------------------------------------------


def test_normalised_latency_is_the_worst_ratio_to_the_slos_and_a_missing_metric_is_a_miss() -> None:
    slos = (parse_slo("ttft<=1s"), parse_slo("tpot<=250ms"))
    assert ledger.normalised_latency({"ttft": 0.5, "tpot": 0.2}, slos) == pytest.approx(0.8)
    assert ledger.normalised_latency({"tpot": 0.1}, slos) == 2.0
    assert ledger.normalised_latency({"e2e": 1.0}, ()) is None


def test_pressure_is_the_quantile_of_the_last_window_and_starts_at_the_initial_value() -> None:
    params = CreditParams(window=4, quantile=50)
    assert ledger.pressure([], params) == params.initial_pressure
    assert ledger.pressure([9.0, 9.0, 0.1, 0.2, 0.3, 0.4], params) == pytest.approx(0.25)


def test_bad_parameters_are_reported_together() -> None:
    with pytest.raises(ValueError, match=r"(?s)pressure_threshold.*burst_s.*window"):
        CreditParams(pressure_threshold=1.0, burst_s=0, window=0)


def test_a_new_slot_has_full_burst_and_has_never_run() -> None:
    tab = table((Priority.MEDIUM, 0.5), t=3.0)
    assert tab.get(0, ledger.BUCKET) == P.burst_s
    assert tab.get(0, ledger.LAST_RELEASE) == -math.inf
    assert not ledger.is_active(tab, 0, 3.0, P)


# -- static priority (the priority scheduler's rule) ------------------------------------------------


def test_static_priority_admits_high_at_once_and_holds_each_class_behind_any_active_more_urgent_one() -> None:
    # Pressures do not enter the rule: the HIGH app has slack (credit would lend to LOW), yet LOW waits.
    tab = table((Priority.HIGH, 0.0), (Priority.MEDIUM, 0.0), (Priority.LOW, 0.0))
    hold_running(tab, 0)
    assert ledger.decide_by_priority(tab, 0, 1.0, 0.0, P) is Grant.RESERVED
    assert ledger.decide_by_priority(tab, 1, 1.0, 0.0, P) is Grant.WAIT
    assert ledger.decide_by_priority(tab, 2, 1.0, 0.0, P) is Grant.WAIT
    ledger.end_step(tab, 0, 1.0, 0.5)
    # Within linger_s of its last step the HIGH app is still active; after it, the device is free.
    assert ledger.decide_by_priority(tab, 1, 1.0 + P.linger_s / 2, 0.0, P) is Grant.WAIT
    assert ledger.decide_by_priority(tab, 1, 1.0 + 2 * P.linger_s, 0.0, P) is Grant.LENT
    hold_running(tab, 1)
    assert ledger.decide_by_priority(tab, 2, 2.0, 0.0, P) is Grant.WAIT
    assert ledger.decide_by_priority(tab, 2, 2.0, P.max_wait_s, P) is Grant.FORCED


def test_static_priority_does_not_order_one_class_nor_hold_across_devices() -> None:
    tab = table((Priority.MEDIUM, 5.0), (Priority.MEDIUM, 0.0), (Priority.HIGH, 0.0, "cpu"))
    hold_running(tab, 0)
    hold_running(tab, 2)
    assert ledger.decide_by_priority(tab, 1, 1.0, 0.0, P) is Grant.LENT
