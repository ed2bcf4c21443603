"""Every number ConsumerBench reports, computed in one place (definitions: docs/metrics.md)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from statistics import NormalDist
from typing import Any, Generic, TypeVar

from benchmarks.spec.model import SLO
from benchmarks.status import RequestStatus

PERCENTILES = (50, 90, 99)
K = TypeVar("K")


def percentile(values: Sequence[float], q: float) -> float:
    """Return the q-th percentile (0-100) by linear interpolation between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(values: Sequence[float]) -> dict[str, float]:
    """Return count, mean, min, max and p50/p90/p99 of a list of values (seconds)."""
    if not values:
        return {"count": 0}
    out = {
        "count": float(len(values)),
        "mean": sum(values) / len(values),
        "min": min(values),
        "max": max(values),
    }
    for q in PERCENTILES:
        out[f"p{q}"] = percentile(values, q)
    return out


def counted(requests: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Return the requests that count towards metrics: finished normally and not warm-up."""
    return [r for r in requests if r.get("status") == RequestStatus.OK and not r.get("warmup")]


def request_slo_met(record: Mapping[str, Any], slos: Sequence[SLO]) -> bool | None:
    """Return whether a request met every SLO of its application (None when there is no SLO).

    A request that lacks a metric an SLO names (e.g. no token came back, so no TTFT) missed it.
    """
    if not slos:
        return None
    metrics = record.get("metrics", {})
    return all(s.metric in metrics and s.met(float(metrics[s.metric])) for s in slos)


def application_metrics(
    requests: Sequence[Mapping[str, Any]], slos: Sequence[SLO], requested: int | None = None
) -> dict[str, Any]:
    """Return per-application figures: attainment, per-metric summaries, normalised latency, throughput
    and goodput.

    ``requested`` is how many requests the workflow asked of the application (docs/metrics.md); the
    attainment is over them, so a request never served is a miss. None: over the counted requests.
    Throughput and goodput are over the application's serving window (``serving_window``): counted
    requests, and those of them that met every SLO, per second; the model load is not in the window.
    """
    rows = counted(requests)
    names = sorted({k for r in rows for k in r.get("metrics", {})})
    summaries = {m: summarize([float(r["metrics"][m]) for r in rows if m in r["metrics"]]) for m in names}
    met = [request_slo_met(r, slos) for r in rows]
    n_met = sum(1 for m in met if m)
    due = len(rows) if requested is None else max(requested, len(rows))
    attainment = n_met / due if slos and due else None
    normalized = {
        s.metric: summaries[s.metric]["mean"] / s.threshold_s
        for s in slos
        if summaries.get(s.metric, {}).get("count")
    }
    throughput = goodput = None
    span = serving_window(rows)
    if span:
        throughput = len(rows) / span
        goodput = n_met / span if slos else None
    return {
        "requests_counted": len(rows),
        "requests_met": n_met if slos else None,
        "slo_attainment": attainment,
        "metrics": summaries,
        "normalized_latency": normalized,
        "throughput_rps": throughput,
        "goodput_rps": goodput,
    }


def serving_window(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """Return the serving window of some requests in seconds: the last one's end minus the first one's
    arrival (when it was sent, or due in an open loop); None for no requests or no time between."""
    if not rows:
        return None
    span = max(float(r["end"]) for r in rows) - min(float(r["arrival"]) for r in rows)
    return span if span > 0 else None


def jain_fairness(values: Sequence[float]) -> float | None:
    """Return Jain's fairness index (sum x)^2 / (n * sum x^2), in (0, 1]; None for no values or all 0."""
    if not values:
        return None
    square_sum = sum(v * v for v in values)
    if square_sum == 0:
        return None
    return sum(values) ** 2 / (len(values) * square_sum)


def fairness(attainments: Iterable[float | None]) -> float | None:
    """Return a run's fairness: Jain's index over the SLO attainment of the applications that have an
    SLO (``None`` entries, applications without one, are left out); None when fewer than two have one
    (the index of one application is 1 whatever it attained, so it would say nothing) or every one met
    nothing. 1/n when one of n applications meets every SLO and the others none."""
    present = [a for a in attainments if a is not None]
    return jain_fairness(present) if len(present) >= 2 else None


def slowdown_fairness(
    throughput: Mapping[str, float | None], solo: Mapping[str, float | None]
) -> float | None:
    """Return Jain's index over the applications' solo-normalised throughput (throughput in the run /
    throughput alone), over the applications that have both figures; None when none has."""
    ratios = [t / s for name, t in throughput.items() if t is not None and (s := solo.get(name))]
    return jain_fairness(ratios)


def run_summary(applications: Sequence[Mapping[str, Any]], makespan_s: float | None) -> dict[str, Any]:
    """Return run-level figures of the applications' ``slo_attainment``: their mean over the
    applications that have an SLO, the fairness, and the makespan as given."""
    attainments = [a["slo_attainment"] for a in applications if a.get("slo_attainment") is not None]
    return {
        "mean_attainment": sum(attainments) / len(attainments) if attainments else None,
        "fairness": fairness(attainments),
        "makespan_s": makespan_s,
    }


def mean_ci95(values: Sequence[float]) -> tuple[float, float | None]:
    """Return the mean and the half-width of its 95 % confidence interval (Student t; None for n < 2)."""
    n = len(values)
    if n == 0:
        raise ValueError("mean of no values")
    mean = sum(values) / n
    if n < 2:
        return mean, None
    from scipy.special import stdtrit  # scipy loads in ~0.3 s: only when an interval is asked for

    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    t = float(stdtrit(n - 1, 0.975))
    return mean, t * math.sqrt(var / n)


# --------------------------------------------------------------------------------------------------
# Quality figures: what an application produced, summarised from its counted requests' records
# --------------------------------------------------------------------------------------------------

# A quality reducer reads the counted requests of one application and returns (value, how many
# requests or streams the value is computed from), or None when none of them holds the figure.
Reducer = Callable[[Sequence[Mapping[str, Any]]], tuple[float, int] | None]


@dataclass(frozen=True)
class QualityMeasure:
    """One quality figure an application type summarises (``AppType.quality``): its name in the
    result, its unit, and the reducer that computes it (docs/metrics.md defines each one)."""

    name: str
    unit: str
    reduce: Reducer


def _number(value: Any) -> float | None:
    """Return ``value`` as a finite float, or None when it is not a number (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def info_mean(key: str) -> Reducer:
    """Return a reducer: the mean of the numeric ``info[key]`` over the requests that record it."""

    def reduce(requests: Sequence[Mapping[str, Any]]) -> tuple[float, int] | None:
        values = [v for r in requests if (v := _number(r.get("info", {}).get(key))) is not None]
        return (sum(values) / len(values), len(values)) if values else None

    return reduce


def info_share(key: str) -> Reducer:
    """Return a reducer: the fraction (0-1) of the requests recording a boolean ``info[key]`` where
    it is true."""

    def reduce(requests: Sequence[Mapping[str, Any]]) -> tuple[float, int] | None:
        flags = [v for r in requests if isinstance(v := r.get("info", {}).get(key), bool)]
        return (sum(flags) / len(flags), len(flags)) if flags else None

    return reduce


# A quality figure named finite_* is the share of an application's outputs that were numbers at all
# (info_share of ``info.finite``: ImageGen's finite_images, LiveCaptions' finite_chunks). Below 1, those
# requests computed on NaN or inf, and their times are not of real work.
FINITE_PREFIX = "finite_"


def not_finite(applications: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Return {application: its finite share} for the applications of a result whose outputs were not
    all finite (a ``finite_*`` quality figure below 1)."""
    out = {}
    for app in applications:
        for key, figure in (app.get("quality") or {}).items():
            if key.startswith(FINITE_PREFIX) and figure["value"] < 1:
                out[app["name"]] = figure["value"]
    return out


def series_rate(key: str) -> Reducer:
    """Return a reducer: items per second over every request's ``series[key]`` of durations (seconds
    each): the number of items divided by their summed duration."""

    def reduce(requests: Sequence[Mapping[str, Any]]) -> tuple[float, int] | None:
        durations = [
            [v for x in r.get("series", {}).get(key, []) if (v := _number(x)) is not None] for r in requests
        ]
        used = [d for d in durations if d]
        total = sum(sum(d) for d in used)
        return (sum(len(d) for d in used) / total, len(used)) if total > 0 else None

    return reduce


def metric_count(metric: str) -> Reducer:
    """Return a reducer: how many requests recorded ``metrics[metric]`` (None when none did)."""

    def reduce(requests: Sequence[Mapping[str, Any]]) -> tuple[float, int] | None:
        n = sum(1 for r in requests if metric in r.get("metrics", {}))
        return (float(n), n) if n else None

    return reduce


def quality_figures(
    requests: Sequence[Mapping[str, Any]], measures: Iterable[QualityMeasure]
) -> dict[str, dict[str, Any]]:
    """Return an application's quality figures, ``{name: {value, unit, count}}``, each computed by its
    measure from the counted requests (finished normally, not warm-up); a figure that no counted
    request records is left out."""
    rows = counted(requests)
    figures = {}
    for measure in measures:
        out = measure.reduce(rows)
        if out is not None:
            figures[measure.name] = {"value": out[0], "unit": measure.unit, "count": out[1]}
    return figures


# --------------------------------------------------------------------------------------------------
# Over repeated runs: estimates with their confidence interval, and rankings (the leaderboard's,
# the platform comparison's)
# --------------------------------------------------------------------------------------------------

# Fewer runs than this give a mean but no interval: with n = 2 the t interval is 12.7 standard
# errors wide and says little; the pages say "n=2, no CI" instead.
MIN_RUNS_FOR_CI = 3


@dataclass(frozen=True)
class Estimate:
    """A figure over n runs: its mean and, from ``MIN_RUNS_FOR_CI`` runs on, the bounds of its 95 %
    Student t interval (clipped to the figure's range); ``note`` says why there is no interval
    ("n=1, no CI") or why it has zero width ("all 3 runs equal")."""

    n: int
    mean: float
    low: float | None
    high: float | None
    note: str | None

    @property
    def interval(self) -> tuple[float, float]:
        """The interval the ranking compares: the CI, or the mean alone when there is none."""
        if self.low is None or self.high is None:
            return self.mean, self.mean
        return self.low, self.high


def estimate(
    values: Sequence[float], *, bounds: tuple[float, float] | None = None, min_runs: int = MIN_RUNS_FOR_CI
) -> Estimate | None:
    """Return the mean of ``values`` with its 95 % CI (``mean_ci95``) when there are at least
    ``min_runs`` of them, the interval clipped to ``bounds`` (e.g. (0, 1) for an attainment); None for
    no values."""
    if not values:
        return None
    n = len(values)
    mean, half = mean_ci95(values)
    if n < min_runs or half is None:
        return Estimate(n, mean, None, None, f"n={n}, no CI")
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    note = f"all {n} runs equal" if half == 0 else None
    return Estimate(n, mean, low, high, note)


@dataclass(frozen=True)
class Ranked(Generic[K]):
    """One entry of a ranking: its key, its estimate, its rank and the positions (0-based, in the
    ranking's order) of the entries it is tied with."""

    key: K
    estimate: Estimate | None
    rank: int | None
    tied_with: tuple[int, ...]


def rank_estimates(
    entries: Sequence[tuple[K, Estimate | None]], *, higher_is_better: bool = True
) -> list[Ranked[K]]:
    """Return the entries ordered best mean first, each with its rank: 1 + the number of entries
    whose interval lies entirely on the better side of its own (so entries whose 95 % CIs overlap
    are not ranked apart), and the entries whose intervals overlap its own (its ties). An entry
    without a CI is compared by its mean alone (a point interval). Entries without an estimate come
    last, unranked; equal means keep the given order."""
    sign = 1.0 if higher_is_better else -1.0
    measured: list[tuple[K, Estimate]] = [(k, e) for k, e in entries if e is not None]
    measured.sort(key=lambda ke: -sign * ke[1].mean)
    ranked: list[Ranked[K]] = []
    for i, (key, est) in enumerate(measured):
        low, high = est.interval
        better = 0
        ties = []
        for j, (_, other) in enumerate(measured):
            if j == i:
                continue
            o_low, o_high = other.interval
            if (o_low > high) if higher_is_better else (o_high < low):
                better += 1
            elif o_low <= high and low <= o_high:
                ties.append(j)
        ranked.append(Ranked(key, est, 1 + better, tuple(ties)))
    ranked.extend(Ranked(k, None, None, ()) for k, e in entries if e is None)
    return ranked


# --------------------------------------------------------------------------------------------------
# An attainment's interval, its curve against the SLO threshold, and the claims it supports
# --------------------------------------------------------------------------------------------------

# The SLO thresholds' scales of the attainment curve: a verdict on a knife edge (attainment that moves
# a lot between 0.9x and 1.1x) is visible at a glance.
THRESHOLD_SCALES = (0.8, 0.9, 1.0, 1.1, 1.25)
# The attainment goal a summary judges an application's attainment against when its sweep sets none
# (a sweep's search threshold is its goal).
DEFAULT_ATTAINMENT_GOAL = 0.9
# The confidence of a "met" claim's early-stopping count, MLPerf LoadGen's (loadgen/early_stopping.cc).
EARLY_STOPPING_CONFIDENCE = 0.99


def proportion_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Return the Wilson score interval of a proportion ``successes / trials`` at ``confidence`` (the
    same as scipy's ``binomtest(...).proportion_ci(method="wilson")``, in closed form: every run's
    table shows it, and the GPU machines need no scipy), always inside [0, 1]; None for no trials.
    Raises ValueError for counts out of range."""
    if trials < 0 or not 0 <= successes <= max(trials, 0):
        raise ValueError(f"{successes} successes out of {trials} trials")
    if trials == 0:
        return None
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p, n = successes / trials, trials
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def requests_needed(misses: int, percentile: float, confidence: float = EARLY_STOPPING_CONFIDENCE) -> int:
    """Return the fewest requests that support the claim "at least ``percentile`` (0-1) of requests meet
    the SLO" when ``misses`` of them missed it: MLPerf LoadGen's early-stopping count, the smallest
    n = h + misses whose one-sided binomial bound holds, P(Binom(n, 1 - percentile) <= misses) below
    1 - confidence. With no miss, a p90 claim needs 44 requests and a p99 claim 459."""
    if misses < 0 or not 0 < percentile < 1 or not 0 < confidence < 1:
        raise ValueError("misses must not be negative and percentile and confidence must lie in (0, 1)")
    from scipy.special import betainc

    def passes(h: int) -> bool:
        # P(at most ``misses`` misses in h + misses requests) = I_percentile(h, misses + 1).
        return float(betainc(h, misses + 1, percentile)) < 1 - confidence

    high = max(1, math.ceil(math.log(1 - confidence) / math.log(percentile)))
    while not passes(high):
        high *= 2
    low = 1
    while low < high:
        mid = (low + high) // 2
        if passes(mid):
            high = mid
        else:
            low = mid + 1
    return low + misses


class Claim(StrEnum):
    """What an interval says against a goal, or of one figure against another."""

    MET = "met"  # the whole interval at or above the goal
    MISSED = "missed"  # the whole interval below the goal
    INCONCLUSIVE = "inconclusive"  # the interval holds the goal
    BEATS = "beats"  # the intervals separate, this one above
    TRAILS = "trails"  # the intervals separate, this one below
    NOT_DISTINGUISHABLE = "not distinguishable"  # the intervals overlap


def claim_against_goal(low: float, high: float, goal: float) -> Claim:
    """Return "met" only when the interval's lower bound reaches ``goal``, "missed" when its upper
    bound is below it, else "inconclusive"."""
    if low >= goal:
        return Claim.MET
    if high < goal:
        return Claim.MISSED
    return Claim.INCONCLUSIVE


def claim_between(interval: tuple[float, float], other: tuple[float, float]) -> Claim:
    """Return "beats" only when ``interval`` lies entirely above ``other``, "trails" when entirely
    below, else "not distinguishable"."""
    if interval[0] > other[1]:
        return Claim.BEATS
    if interval[1] < other[0]:
        return Claim.TRAILS
    return Claim.NOT_DISTINGUISHABLE


def scaled_slos(slos: Sequence[SLO], scale: float) -> list[SLO]:
    """Return the SLOs with their thresholds multiplied by ``scale``."""
    return [s.model_copy(update={"threshold_s": s.threshold_s * scale}) for s in slos]


@dataclass(frozen=True)
class Attainment:
    """An application's SLO attainment over the requests due (asked for, or counted when more were
    served): ``met`` of ``due``, its 95 % Wilson interval, and its curve, the attainment at each SLO
    threshold scaled by ``THRESHOLD_SCALES`` (computed from the same requests' latencies)."""

    met: int
    due: int
    low: float
    high: float
    curve: tuple[tuple[float, float], ...]

    @property
    def value(self) -> float:
        """The attainment, met / due."""
        return self.met / self.due

    def claim(self, goal: float) -> Claim:
        """Return what the interval says of "attainment >= ``goal``" (``claim_against_goal``)."""
        return claim_against_goal(self.low, self.high, goal)

    def requests_needed(self, goal: float) -> int | None:
        """Return how many requests the claim "attainment >= ``goal``" needs with these misses
        (``requests_needed``, MLPerf LoadGen's early stopping); None for a goal of 100 %, which no
        finite number of requests supports."""
        return requests_needed(self.due - self.met, goal) if goal < 1 else None

    def too_few_for(self, goal: float) -> bool:
        """Return whether the observed attainment claims ``goal`` (it is at least the goal) on fewer
        requests than early stopping needs for it."""
        needed = self.requests_needed(goal)
        return self.value >= goal and (needed is None or self.due < needed)


def attainment(
    requests: Sequence[Mapping[str, Any]], slos: Sequence[SLO], requested: int | None = None
) -> Attainment | None:
    """Return an application's ``Attainment`` from its requests (``application_metrics``' rules: over
    the requests asked for, a request never served a miss); None without an SLO or a request due."""
    rows = counted(requests)
    due = len(rows) if requested is None else max(requested, len(rows))
    if not slos or not due:
        return None
    curve = []
    for scale in THRESHOLD_SCALES:
        scaled = scaled_slos(slos, scale)
        curve.append((scale, sum(1 for r in rows if request_slo_met(r, scaled)) / due))
    met = sum(1 for r in rows if request_slo_met(r, slos))
    interval = proportion_interval(met, due)
    assert interval is not None
    return Attainment(met, due, interval[0], interval[1], tuple(curve))
