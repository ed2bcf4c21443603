"""Metric definitions (docs/metrics.md) on hand-checked numbers."""

from __future__ import annotations

import pytest

from benchmarks import metrics
from benchmarks.spec.model import parse_slo


def req(e2e: float, *, status: str = "ok", warmup: bool = False, arrival: float = 0.0, **more: float) -> dict:
    return {
        "status": status,
        "warmup": warmup,
        "arrival": arrival,
        "end": arrival + e2e,
        "metrics": {"e2e": e2e, **more},
    }


def test_percentiles_interpolate_linearly_between_ranks() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert metrics.percentile(values, 50) == 2.5
    assert metrics.percentile(values, 90) == pytest.approx(3.7)
    assert metrics.percentile([5.0], 99) == 5.0
    with pytest.raises(ValueError):
        metrics.percentile([], 50)


def test_attainment_counts_only_finished_non_warmup_requests_and_needs_every_slo() -> None:
    slos = [parse_slo("e2e<=1s"), parse_slo("ttft<0.5s")]
    rows = [
        req(0.5, ttft=0.1),  # met
        req(0.9, ttft=0.6),  # ttft missed
        req(2.0, ttft=0.1),  # e2e missed
        req(0.2),  # no ttft at all: missed
        req(0.1, ttft=0.1, warmup=True),  # not counted
        req(0.1, ttft=0.1, status="interrupted"),  # not counted
    ]
    out = metrics.application_metrics(rows, slos)
    assert out["requests_counted"] == 4 and out["requests_met"] == 1
    assert out["slo_attainment"] == 0.25
    assert out["normalized_latency"]["e2e"] == pytest.approx((0.5 + 0.9 + 2.0 + 0.2) / 4)
    assert out["normalized_latency"]["ttft"] == pytest.approx((0.1 + 0.6 + 0.1) / 3 / 0.5)
    assert out["metrics"]["e2e"]["p50"] == pytest.approx(0.7)


def test_no_slo_means_no_attainment_rather_than_a_perfect_one() -> None:
    out = metrics.application_metrics([req(1.0)], [])
    assert out["slo_attainment"] is None and out["requests_met"] is None


def test_throughput_is_counted_requests_over_their_active_span() -> None:
    out = metrics.application_metrics(
        [req(1.0, arrival=0.0), req(1.0, arrival=1.0), req(1.0, arrival=3.0)], []
    )
    assert out["throughput_rps"] == pytest.approx(3 / 4.0)
    # No SLO, no goodput: there is nothing to have met.
    assert out["goodput_rps"] is None


def test_goodput_is_the_requests_that_met_every_slo_over_the_same_window() -> None:
    slos = [parse_slo("e2e<=1.5s"), parse_slo("ttft<=0.5s")]
    rows = [
        req(1.0, arrival=0.0, ttft=0.1),  # met
        req(2.0, arrival=1.0, ttft=0.1),  # e2e missed
        req(1.0, arrival=3.0, ttft=0.9),  # ttft missed
        req(1.0, arrival=4.0, ttft=0.2),  # met; the window ends at 5.0
        req(0.1, arrival=9.0, ttft=0.1, warmup=True),  # not counted, not in the window
    ]
    out = metrics.application_metrics(rows, slos)
    assert out["throughput_rps"] == pytest.approx(4 / 5.0)
    assert out["goodput_rps"] == pytest.approx(2 / 5.0)
    assert out["slo_attainment"] == pytest.approx(0.5)


def test_jain_fairness_is_one_for_equal_and_one_over_n_for_a_single_winner() -> None:
    assert metrics.jain_fairness([2.0, 2.0, 2.0]) == pytest.approx(1.0)
    assert metrics.jain_fairness([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert metrics.jain_fairness([]) is None


def test_requests_never_served_are_misses_when_the_workflow_asked_for_them() -> None:
    slos = [parse_slo("e2e<=1s")]
    out = metrics.application_metrics([req(0.5), req(0.5)], slos, requested=8)
    assert out["requests_counted"] == 2 and out["requests_met"] == 2
    assert out["slo_attainment"] == 0.25
    # An application that served nothing of what it was asked attains 0, not "no figure".
    assert metrics.application_metrics([], slos, requested=3)["slo_attainment"] == 0.0
    # Nothing asked, nothing served: no figure.
    assert metrics.application_metrics([], slos, requested=0)["slo_attainment"] is None


def test_run_summary_averages_attainment_over_applications_with_slos() -> None:
    apps = [{"slo_attainment": 1.0}, {"slo_attainment": 0.5}, {"slo_attainment": None}]
    out = metrics.run_summary(apps, 12.0)
    assert out["mean_attainment"] == 0.75
    # Jain over (1.0, 0.5): 1.5^2 / (2 * 1.25); the application without an SLO is left out.
    assert out["fairness"] == pytest.approx(0.9)
    assert out["makespan_s"] == 12.0


def test_two_applications_one_meeting_every_slo_and_the_other_none_have_fairness_one_half() -> None:
    slos = [parse_slo("e2e<=1s")]
    fast = metrics.application_metrics([req(0.5), req(0.2)], slos, requested=2)
    slow = metrics.application_metrics([req(3.0), req(2.0)], slos, requested=2)
    assert (fast["slo_attainment"], slow["slo_attainment"]) == (1.0, 0.0)
    assert metrics.run_summary([fast, slow], 1.0)["fairness"] == pytest.approx(0.5)


def test_fairness_does_not_depend_on_how_far_under_their_slos_the_applications_are() -> None:
    assert metrics.fairness([1.0, 1.0, 1.0]) == pytest.approx(1.0)
    assert metrics.fairness([None, None]) is None
    # One application with an SLO: its index is 1 whatever it attained, so there is no fairness to show.
    assert metrics.fairness([0.3]) is None and metrics.fairness([0.3, None]) is None
    # Every application met nothing: Jain's index is undefined, not "perfectly fair".
    assert metrics.fairness([0.0, 0.0]) is None


def test_slowdown_fairness_is_jain_over_throughput_relative_to_each_application_alone() -> None:
    # chat keeps half its solo throughput, image all of it; captions has no solo run and is left out.
    out = metrics.slowdown_fairness({"chat": 1.0, "image": 0.5, "captions": 2.0}, {"chat": 2.0, "image": 0.5})
    assert out == pytest.approx(1.5**2 / (2 * 1.25))
    assert metrics.slowdown_fairness({"chat": None}, {"chat": 1.0}) is None
    assert metrics.slowdown_fairness({"chat": 1.0}, {"chat": 0.0}) is None


def test_confidence_interval_uses_student_t() -> None:
    mean, half = metrics.mean_ci95([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / 3**0.5, rel=1e-4)
    assert metrics.mean_ci95([4.0]) == (4.0, None)


# Student t quantiles (0.975) from the printed tables: 1, 10, 30, 31, 60 and 499 degrees of freedom.
@pytest.mark.parametrize(
    ("n", "t"), [(2, 12.706), (11, 2.228), (31, 2.042), (32, 2.040), (61, 2.000), (500, 1.965)]
)
def test_confidence_interval_takes_t_for_n_minus_1_degrees_of_freedom(n: int, t: float) -> None:
    values = [float(i % 2) for i in range(n)]  # alternating 0, 1: the sample deviation is known
    mean = sum(values) / n
    sd = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5
    assert metrics.mean_ci95(values) == (mean, pytest.approx(t * sd / n**0.5, rel=1e-3))


def test_confidence_interval_of_no_values_is_refused() -> None:
    with pytest.raises(ValueError, match="mean of no values"):
        metrics.mean_ci95([])


def record(*, status: str = "ok", warmup: bool = False, **parts: dict) -> dict:
    """A request record as the runner reads it back: status, warm-up flag, metrics/info/series."""
    return {"status": status, "warmup": warmup, "metrics": {}, "info": {}, "series": {}, **parts}


def test_quality_figures_read_only_counted_requests_and_leave_out_what_none_records() -> None:
    measures = (
        metrics.QualityMeasure("tokens", "tokens/request", metrics.info_mean("tokens")),
        metrics.QualityMeasure("missing", "tokens/request", metrics.info_mean("nobody_records_this")),
    )
    requests = [
        record(info={"tokens": 10}),
        record(info={"tokens": 20}),
        record(info={"tokens": 1000}, warmup=True),
        record(info={"tokens": 1000}, status="error"),
        record(info={"tokens": 1000}, status="interrupted"),
    ]
    assert metrics.quality_figures(requests, measures) == {
        "tokens": {"value": 15.0, "unit": "tokens/request", "count": 2}
    }
    assert metrics.quality_figures([], measures) == {}


def test_info_mean_skips_what_is_not_a_finite_number() -> None:
    reduce = metrics.info_mean("wer")
    rows = [record(info={"wer": w}) for w in (0.25, True, "0.5", float("nan"), float("inf"), None, 0.75)]
    assert reduce([*rows, record()]) == (0.5, 2)
    assert reduce([record(info={"wer": "high"})]) is None


def test_info_share_is_the_fraction_of_true_flags_among_the_requests_that_record_one() -> None:
    reduce = metrics.info_share("found")
    rows = [record(info={"found": f}) for f in (True, False, False, True)]
    assert reduce([*rows, record(), record(info={"found": 1})]) == (0.5, 4)
    assert reduce([record()]) is None


def test_series_rate_is_items_over_their_summed_duration_not_a_mean_of_rates() -> None:
    reduce = metrics.series_rate("itl")
    # 4 tokens in 0.4 s and 1 token in 0.6 s: 5 tokens per second (a mean of rates would say 7.5).
    rows = [record(series={"itl": [0.1, 0.1, 0.1, 0.1]}), record(series={"itl": [0.6]}), record()]
    value, count = reduce(rows) or (0.0, 0)
    assert value == pytest.approx(5.0) and count == 2
    assert reduce([record(series={"itl": []})]) is None
    assert reduce([record(series={"itl": [0.0, 0.0]})]) is None


def test_metric_count_counts_the_requests_that_recorded_the_metric() -> None:
    reduce = metrics.metric_count("image")
    assert reduce([record(metrics={"image": 1.5}), record(metrics={"image": 2.0}), record()]) == (2.0, 2)
    assert reduce([record()]) is None


def test_estimate_gives_no_ci_below_three_runs_and_says_so() -> None:
    assert metrics.estimate([]) is None
    one = metrics.estimate([0.8])
    assert one == metrics.Estimate(1, 0.8, None, None, "n=1, no CI")
    two = metrics.estimate([0.8, 0.9])
    assert two is not None and two.low is None and two.note == "n=2, no CI"
    assert two.mean == pytest.approx(0.85) and two.interval == (two.mean, two.mean)


def test_estimate_from_three_runs_is_the_t_interval_clipped_to_the_bounds() -> None:
    e = metrics.estimate([0.5, 0.7, 0.9], bounds=(0.0, 1.0))
    assert e is not None and e.n == 3 and e.note is None
    # s = 0.2, t(0.975, 2) = 4.3027: half-width 0.497, so the upper bound 1.197 is clipped to 1.
    assert e.mean == pytest.approx(0.7) and e.low == pytest.approx(0.7 - 4.3027 * 0.2 / 3**0.5, abs=1e-4)
    assert e.high == 1.0
    unclipped = metrics.estimate([0.5, 0.7, 0.9])
    assert unclipped is not None and unclipped.high == pytest.approx(0.7 + 4.3027 * 0.2 / 3**0.5, abs=1e-4)


def test_a_zero_width_interval_says_that_every_run_was_equal() -> None:
    e = metrics.estimate([1.0, 1.0, 1.0], bounds=(0.0, 1.0))
    assert e == metrics.Estimate(3, 1.0, 1.0, 1.0, "all 3 runs equal")


def test_ranking_puts_overlapping_cis_on_one_rank_and_marks_them_tied() -> None:
    a = metrics.Estimate(3, 0.90, 0.85, 0.95, None)
    b = metrics.Estimate(3, 0.88, 0.80, 0.96, None)  # overlaps a
    c = metrics.Estimate(3, 0.60, 0.55, 0.65, None)  # below both
    ranked = metrics.rank_estimates([("c", c), ("b", b), ("a", a), ("none", None)])
    assert [(r.key, r.rank, r.tied_with) for r in ranked] == [
        ("a", 1, (1,)),
        ("b", 1, (0,)),
        ("c", 3, ()),
        ("none", None, ()),
    ]


def test_ranking_is_not_transitive_in_ties_an_entry_can_overlap_two_that_do_not_overlap() -> None:
    top = metrics.Estimate(3, 0.9, 0.80, 1.00, None)
    mid = metrics.Estimate(3, 0.7, 0.60, 0.85, None)
    low = metrics.Estimate(3, 0.5, 0.40, 0.65, None)
    ranked = metrics.rank_estimates([("top", top), ("mid", mid), ("low", low)])
    # mid overlaps both; low lies entirely below top only.
    assert [(r.key, r.rank, r.tied_with) for r in ranked] == [
        ("top", 1, (1,)),
        ("mid", 1, (0, 2)),
        ("low", 2, (1,)),
    ]


def test_ranking_compares_entries_without_a_ci_by_their_mean_and_lower_can_be_better() -> None:
    fast = metrics.Estimate(1, 2.0, None, None, "n=1, no CI")
    slow = metrics.Estimate(1, 3.0, None, None, "n=1, no CI")
    same = metrics.Estimate(2, 2.0, None, None, "n=2, no CI")
    ranked = metrics.rank_estimates([("slow", slow), ("fast", fast), ("same", same)], higher_is_better=False)
    assert [(r.key, r.rank, r.tied_with) for r in ranked] == [
        ("fast", 1, (1,)),
        ("same", 1, (0,)),
        ("slow", 3, ()),
    ]


# --------------------------------------------------------------------------------------------------
# An attainment's interval, its threshold curve and the claims it supports
# --------------------------------------------------------------------------------------------------


def test_the_wilson_interval_of_8_of_10_is_the_textbook_one() -> None:
    # Wilson's score interval at 95 %: centre (p + z^2/2n) / (1 + z^2/n), half-width
    # z / (1 + z^2/n) * sqrt(p(1 - p)/n + z^2/4n^2) with z = 1.959964: 0.4902 to 0.9433.
    low, high = metrics.proportion_interval(8, 10)
    assert (low, high) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))


def test_the_wilson_interval_stays_inside_0_and_1_at_the_extremes() -> None:
    # With none or all met the interval touches the bound: z^2 / (n + z^2) = 0.3903 for n = 6.
    assert metrics.proportion_interval(0, 6) == (0.0, pytest.approx(0.3903, abs=1e-4))
    assert metrics.proportion_interval(6, 6) == (pytest.approx(0.6097, abs=1e-4), 1.0)
    assert metrics.proportion_interval(0, 0) is None
    with pytest.raises(ValueError):
        metrics.proportion_interval(7, 6)


def test_early_stopping_counts_are_mlperf_loadgens() -> None:
    # LoadGen (loadgen/early_stopping.cc): with no request over the bound, a p99 claim needs 459
    # requests (ceil(log 0.01 / log 0.99)) and a p90 claim 44 (0.9^44 = 0.0097 < 0.01, 0.9^43 = 0.0108).
    assert metrics.requests_needed(0, 0.99) == 459
    assert metrics.requests_needed(0, 0.9) == 44
    # One miss: P(X <= 1) for Binom(64, 0.1) = 0.0095 < 0.01, for Binom(63, 0.1) 0.0104.
    assert metrics.requests_needed(1, 0.9) == 64
    from scipy.stats import binom

    for misses in (0, 1, 5, 20):
        n = metrics.requests_needed(misses, 0.9)
        assert binom.cdf(misses, n, 0.1) < 0.01 <= binom.cdf(misses, n - 1, 0.1)
    with pytest.raises(ValueError):
        metrics.requests_needed(0, 1.0)


def test_met_needs_the_whole_interval_at_the_goal_and_beats_needs_intervals_apart() -> None:
    assert metrics.claim_against_goal(0.91, 0.99, 0.9) is metrics.Claim.MET
    assert metrics.claim_against_goal(0.6, 0.95, 0.9) is metrics.Claim.INCONCLUSIVE
    assert metrics.claim_against_goal(0.5, 0.89, 0.9) is metrics.Claim.MISSED
    assert metrics.claim_between((0.8, 0.95), (0.4, 0.7)) is metrics.Claim.BEATS
    assert metrics.claim_between((0.4, 0.7), (0.8, 0.95)) is metrics.Claim.TRAILS
    assert metrics.claim_between((0.6, 0.9), (0.4, 0.7)) is metrics.Claim.NOT_DISTINGUISHABLE


def test_the_attainment_curve_rescores_the_same_requests_at_scaled_thresholds() -> None:
    slos = [parse_slo("e2e<=1s")]
    requests = [req(x) for x in (0.5, 0.85, 0.95, 1.05, 1.2)]
    figure = metrics.attainment(requests, slos, requested=6)  # one request never served: a miss
    assert figure is not None and (figure.met, figure.due) == (3, 6)
    assert figure.value == 0.5
    assert dict(figure.curve) == pytest.approx({0.8: 1 / 6, 0.9: 2 / 6, 1.0: 3 / 6, 1.1: 4 / 6, 1.25: 5 / 6})
    assert (figure.low, figure.high) == pytest.approx(metrics.proportion_interval(3, 6))
    assert metrics.attainment(requests, [], requested=6) is None


def test_an_attainment_at_its_goal_on_too_few_requests_says_so() -> None:
    slos = [parse_slo("e2e<=1s")]
    six = metrics.attainment([req(0.1)] * 6, slos)
    assert six is not None and six.value == 1.0
    assert six.claim(0.9) is metrics.Claim.INCONCLUSIVE  # Wilson's low bound 0.61
    assert six.requests_needed(0.9) == 44 and six.too_few_for(0.9)
    fifty = metrics.attainment([req(0.1)] * 50, slos)
    assert fifty is not None and not fifty.too_few_for(0.9) and fifty.claim(0.9) is metrics.Claim.MET
    # Below the goal there is no claim to support: missed, not "too few".
    half = metrics.attainment([req(0.1)] * 3 + [req(2.0)] * 3, slos)
    assert half is not None and not half.too_few_for(0.9)
    # No number of requests supports a 100 % claim.
    assert six.requests_needed(1.0) is None and six.too_few_for(1.0)
