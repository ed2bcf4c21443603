"""Did a run get slower than its baseline? The comparison behind ``consumerbench submit --baseline``
and the regression marks of the web's history page (definitions: docs/ci.md).

Per application and latency metric (the keys of each counted request's ``metrics``: e2e, ttft,
tpot, step, chunk...), the new run's per-request values are compared with the baseline's:
- a one-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``, exact for small samples without
  ties) of "the new values tend to be larger" (regression) or "smaller" (improvement), and
- the effect size as the ratio of the medians, new / baseline.
A metric *regressed* when the test's p-value is below ``alpha`` AND the median ratio is at least
``1 + min_effect``; it *improved* when the opposite test's p-value is below ``alpha`` AND the ratio
is at most ``1 / (1 + min_effect)``; otherwise it is *unchanged*. With so few values that even the
most extreme ordering could not reach ``alpha`` (``C(n1 + n2, n1) <= 1 / alpha``), or with none on
one side, the verdict is *too few samples*.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from xml.etree import ElementTree

from benchmarks import metrics

DEFAULT_ALPHA = 0.01
DEFAULT_MIN_EFFECT = 0.05


class Verdict(StrEnum):
    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    TOO_FEW = "too few samples"


@dataclass(frozen=True)
class Comparison:
    """One application's metric in the baseline and the new run, with the verdict."""

    application: str
    metric: str
    n_baseline: int
    n_new: int
    baseline_median: float | None
    new_median: float | None
    ratio: float | None
    p_value: float | None  # of the one-sided test in the direction of the change
    verdict: Verdict


def samples(requests: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], list[float]]:
    """Return each (application, metric)'s values over the counted requests (``metrics.counted``:
    finished normally, not warm-up). Each request is ``{application, status, warmup, metrics}``."""
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for request in metrics.counted(requests):
        for metric, value in (request.get("metrics") or {}).items():
            if isinstance(value, int | float) and math.isfinite(value):
                out[(str(request["application"]), metric)].append(float(value))
    return dict(out)


def enough_samples(n_baseline: int, n_new: int, alpha: float) -> bool:
    """Return whether the exact one-sided test could reach ``alpha`` with these sample sizes at all
    (its smallest p-value is 1 / C(n1 + n2, n1))."""
    return n_baseline > 0 and n_new > 0 and math.comb(n_baseline + n_new, n_baseline) * alpha > 1


def compare_samples(
    application: str,
    metric: str,
    baseline: Sequence[float],
    new: Sequence[float],
    *,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
) -> Comparison:
    """Return the comparison of one metric's values (module docstring: the test and the verdicts)."""
    if not 0 < alpha < 1 or min_effect < 0:
        raise ValueError("alpha must lie in (0, 1) and min_effect must not be negative")
    b_med = metrics.percentile(baseline, 50) if baseline else None
    n_med = metrics.percentile(new, 50) if new else None
    ratio = n_med / b_med if b_med and n_med is not None else None
    if not enough_samples(len(baseline), len(new), alpha):
        return Comparison(
            application, metric, len(baseline), len(new), b_med, n_med, ratio, None, Verdict.TOO_FEW
        )
    from scipy.stats import mannwhitneyu  # scipy loads in ~0.3 s: only when a comparison is made

    slower = float(mannwhitneyu(new, baseline, alternative="greater").pvalue)
    faster = float(mannwhitneyu(new, baseline, alternative="less").pvalue)
    verdict = Verdict.UNCHANGED
    if ratio is not None and slower < alpha and ratio >= 1 + min_effect:
        verdict = Verdict.REGRESSED
    elif ratio is not None and faster < alpha and ratio <= 1 / (1 + min_effect):
        verdict = Verdict.IMPROVED
    p_value = faster if ratio is not None and ratio < 1 else slower
    return Comparison(application, metric, len(baseline), len(new), b_med, n_med, ratio, p_value, verdict)


def compare_runs(
    baseline: Iterable[Mapping[str, Any]],
    new: Iterable[Mapping[str, Any]],
    *,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
) -> list[Comparison]:
    """Return one comparison per application and metric found in either run, sorted by both, from
    the two runs' request rows (``samples``)."""
    before, after = samples(baseline), samples(new)
    return [
        compare_samples(app, metric, before.get((app, metric), []), after.get((app, metric), []),
                        alpha=alpha, min_effect=min_effect)
        for app, metric in sorted(set(before) | set(after))
    ]  # fmt: skip


def regressed(comparisons: Iterable[Comparison]) -> list[Comparison]:
    """Return the comparisons whose verdict is a regression."""
    return [c for c in comparisons if c.verdict is Verdict.REGRESSED]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} s"


def table_rows(comparisons: Iterable[Comparison]) -> list[list[str]]:
    """Return the comparison as table rows, header first: application, metric, baseline median,
    new median, ratio, p-value, verdict (``benchmarks.table`` lays them out)."""
    rows = [["application", "metric", "baseline median", "new median", "ratio", "p-value", "verdict"]]
    for c in comparisons:
        rows.append(
            [
                c.application,
                c.metric,
                _seconds(c.baseline_median) + f" (n={c.n_baseline})",
                _seconds(c.new_median) + f" (n={c.n_new})",
                "-" if c.ratio is None else f"{c.ratio:.3f}",
                "-" if c.p_value is None else f"{c.p_value:.2g}",
                c.verdict.value,
            ]
        )
    return rows


def junit_xml(comparisons: Sequence[Comparison], *, suite: str, alpha: float, min_effect: float) -> str:
    """Return a JUnit XML report: one testcase per application x metric, a failure for a regression,
    skipped for too few samples (CI systems show these as test results)."""
    root = ElementTree.Element(
        "testsuite",
        name=suite,
        tests=str(len(comparisons)),
        failures=str(len(regressed(comparisons))),
        skipped=str(sum(c.verdict is Verdict.TOO_FEW for c in comparisons)),
    )
    for c in comparisons:
        case = ElementTree.SubElement(root, "testcase", classname=c.application, name=c.metric)
        detail = (
            f"median {_seconds(c.baseline_median)} -> {_seconds(c.new_median)}"
            f" (ratio {'-' if c.ratio is None else f'{c.ratio:.3f}'},"
            f" p={'-' if c.p_value is None else f'{c.p_value:.2g}'}, n={c.n_baseline}/{c.n_new};"
            f" alpha {alpha:g}, min effect {min_effect:.0%}): {c.verdict.value}"
        )
        if c.verdict is Verdict.REGRESSED:
            ElementTree.SubElement(
                case, "failure", message=f"{c.application} {c.metric} regressed"
            ).text = detail
        elif c.verdict is Verdict.TOO_FEW:
            ElementTree.SubElement(case, "skipped", message=detail)
        else:
            ElementTree.SubElement(case, "system-out").text = detail
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"
