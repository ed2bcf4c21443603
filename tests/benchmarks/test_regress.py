"""The regression comparison: Mann-Whitney U one-sided, a minimum effect on the median ratio."""

from __future__ import annotations

import random
from xml.etree import ElementTree

import pytest

from benchmarks.regress import (
    Verdict,
    compare_runs,
    compare_samples,
    enough_samples,
    junit_xml,
    regressed,
    samples,
    table_rows,
)


def _noisy(median: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [median * rng.uniform(0.98, 1.02) for _ in range(n)]


def test_three_times_slower_values_are_a_regression_with_a_small_p_value() -> None:
    c = compare_samples("nap", "e2e", _noisy(0.1, 10, 1), _noisy(0.3, 10, 2))
    assert c.verdict is Verdict.REGRESSED
    assert c.ratio == pytest.approx(3, rel=0.05) and c.p_value is not None and c.p_value < 1e-4


def test_faster_values_are_an_improvement_and_the_p_value_is_of_the_faster_test() -> None:
    c = compare_samples("nap", "e2e", _noisy(0.3, 10, 1), _noisy(0.1, 10, 2))
    assert c.verdict is Verdict.IMPROVED and c.ratio is not None and c.ratio < 0.4
    assert c.p_value is not None and c.p_value < 1e-4


def test_a_significant_but_small_slowdown_is_unchanged_below_the_minimum_effect() -> None:
    # Every new value is larger (p tiny), but only by 2 %: under the 5 % minimum effect.
    base = [0.100 + i * 1e-5 for i in range(30)]
    new = [v * 1.02 + 1e-3 for v in base]
    c = compare_samples("a", "e2e", base, new)
    assert c.p_value is not None and c.p_value < 0.01
    assert c.verdict is Verdict.UNCHANGED
    assert compare_samples("a", "e2e", base, new, min_effect=0.01).verdict is Verdict.REGRESSED


def test_a_large_but_not_significant_slowdown_is_unchanged() -> None:
    # Medians 50 % apart, but the samples overlap so much the test cannot tell at alpha 0.01.
    base = [0.1, 0.5, 0.2, 0.9, 0.15, 0.3]
    new = [0.45, 0.1, 0.8, 0.2, 0.7, 0.6]
    c = compare_samples("a", "e2e", base, new)
    assert c.ratio is not None and c.ratio > 1.05 and c.p_value is not None and c.p_value > 0.01
    assert c.verdict is Verdict.UNCHANGED


def test_too_few_samples_when_the_exact_test_cannot_reach_alpha() -> None:
    # C(3+3, 3) = 20: the smallest one-sided p-value is 0.05 > 0.01.
    assert not enough_samples(3, 3, 0.01) and enough_samples(5, 5, 0.01)
    c = compare_samples("a", "e2e", [0.1, 0.1, 0.1], [1.0, 1.0, 1.0])
    assert c.verdict is Verdict.TOO_FEW and c.p_value is None and c.ratio == pytest.approx(10)
    assert (
        compare_samples("a", "e2e", [0.1, 0.1, 0.1], [1.0, 1.0, 1.0], alpha=0.1).verdict is Verdict.REGRESSED
    )
    assert compare_samples("a", "e2e", [], [1.0] * 10).verdict is Verdict.TOO_FEW


def test_bad_alpha_or_effect_is_refused() -> None:
    with pytest.raises(ValueError):
        compare_samples("a", "e2e", [1.0], [1.0], alpha=0)
    with pytest.raises(ValueError):
        compare_samples("a", "e2e", [1.0], [1.0], min_effect=-0.1)


def _rows(app: str, values: dict[str, list[float]], **extra: object) -> list[dict[str, object]]:
    n = len(next(iter(values.values())))
    return [
        {
            "application": app,
            "status": "ok",
            "warmup": False,
            "metrics": {m: v[i] for m, v in values.items()},
            **extra,
        }
        for i in range(n)
    ]


def test_compare_runs_groups_per_application_and_metric_and_skips_uncounted_requests() -> None:
    base = _rows("chat", {"ttft": _noisy(0.2, 12, 1), "tpot": _noisy(0.05, 12, 2)})
    new = _rows("chat", {"ttft": _noisy(0.2, 12, 3), "tpot": _noisy(0.15, 12, 4)})
    # Warm-up and failed requests do not count, whatever they measured.
    new += _rows("chat", {"ttft": [50.0] * 5, "tpot": [50.0] * 5}, warmup=True)
    new += _rows("chat", {"ttft": [50.0] * 5, "tpot": [50.0] * 5}, status="error")
    out = compare_runs(base, new)
    assert [(c.application, c.metric) for c in out] == [("chat", "tpot"), ("chat", "ttft")]
    assert [c.verdict for c in out] == [Verdict.REGRESSED, Verdict.UNCHANGED]
    assert [c.metric for c in regressed(out)] == ["tpot"]
    assert samples(new)[("chat", "ttft")] == pytest.approx(_noisy(0.2, 12, 3))


def test_an_application_only_in_one_run_has_too_few_samples() -> None:
    out = compare_runs(_rows("a", {"e2e": [0.1] * 10}), _rows("b", {"e2e": [0.1] * 10}))
    assert [(c.application, c.verdict) for c in out] == [("a", Verdict.TOO_FEW), ("b", Verdict.TOO_FEW)]


def test_table_and_junit_name_the_regressed_metric() -> None:
    out = compare_runs(_rows("nap", {"e2e": _noisy(0.1, 10, 1)}), _rows("nap", {"e2e": _noisy(0.3, 10, 2)}))
    rows = table_rows(out)
    assert rows[0] == [
        "application",
        "metric",
        "baseline median",
        "new median",
        "ratio",
        "p-value",
        "verdict",
    ]
    assert rows[1][:2] == ["nap", "e2e"] and rows[1][-1] == "regressed" and rows[1][4].startswith("3.0")
    xml = ElementTree.fromstring(junit_xml(out, suite="wf", alpha=0.01, min_effect=0.05))
    assert (xml.tag, xml.get("tests"), xml.get("failures")) == ("testsuite", "1", "1")
    case = xml.find("testcase")
    assert case is not None and (case.get("classname"), case.get("name")) == ("nap", "e2e")
    failure = case.find("failure")
    assert failure is not None and "regressed" in (failure.get("message") or "")
