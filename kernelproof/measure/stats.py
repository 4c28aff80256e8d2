"""Statistics of timing samples: robust summaries and bootstrap intervals over paired rounds.

Rounds are the unit of resampling: within a round the candidate and every baseline ran back to
back in rotating order, so drift (clocks, temperature, neighbours) cancels in the per-round ratio;
resampling rounds, not calls, keeps that pairing in the interval (timing-and-baselines.md, sec. 5).
"""

from __future__ import annotations

import math

import numpy as np

from kernelproof.verdict import Speedup, TimeStats

BOOTSTRAP_RESAMPLES = 2000  # enough for a stable 95% percentile interval
CI_LEVEL = 0.95


def summarize(samples_ms: list[float], seed: int = 0) -> TimeStats:
    x = np.asarray(samples_ms, dtype=np.float64)
    if x.size == 0:
        nan = float("nan")
        return TimeStats(0, nan, nan, nan, nan, nan, (nan, nan), 0)
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    iqr = q3 - q1
    outliers = int(((x < q1 - 1.5 * iqr) | (x > q3 + 1.5 * iqr)).sum())
    lo, hi = bootstrap_ci(x, np.median, seed)
    return TimeStats(
        n=int(x.size),
        median_ms=float(med),
        mean_ms=float(x.mean()),
        max_ms=float(x.max()),
        min_ms=float(x.min()),
        iqr_ms=float(iqr),
        ci95_ms=(lo, hi),
        outliers=outliers,
        std_ms=float(x.std()),
    )


def round_figure(calls_ms: list[float]) -> float:
    """One round's figure for one program: the mean of its calls.

    Not their median: a solution that does a whole round's work in one call (having learnt the
    round's inputs) and returns at once from the others has a median of nearly nothing, while its
    mean is what the round cost. The mean answers "how long did these calls take, each", which is
    the claim; noise is handled by the median over rounds of the per-round ratios (docs/timing.md).
    """
    return float(np.mean(np.asarray(calls_ms, dtype=np.float64))) if calls_ms else float("nan")


MIN_ROUNDS_FOR_CI = 3  # fewer paired rounds than this: a median, no interval


def bootstrap_ci(x: np.ndarray, stat, seed: int = 0) -> tuple[float, float]:
    if x.size == 0:
        return (float("nan"), float("nan"))
    if x.size == 1:
        v = float(stat(x))
        return (v, v)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(BOOTSTRAP_RESAMPLES, x.size))
    vals = np.apply_along_axis(stat, 1, x[idx]) if stat is not np.median else np.median(x[idx], axis=1)
    a = (1 - CI_LEVEL) / 2
    lo, hi = np.quantile(vals, [a, 1 - a])
    return float(lo), float(hi)


def paired_speedup(
    baseline_rounds_ms: list[float], candidate_rounds_ms: list[float], name: str, seed: int = 0
) -> Speedup:
    """Median of per-round ratios baseline/candidate, its bootstrap CI, and their geometric mean."""
    b = np.asarray(baseline_rounds_ms, dtype=np.float64)
    c = np.asarray(candidate_rounds_ms, dtype=np.float64)
    ok = (b > 0) & (c > 0) & np.isfinite(b) & np.isfinite(c)
    if not ok.any():
        return Speedup(name, None, None, None, "no valid paired rounds")
    r = b[ok] / c[ok]
    gm = float(np.exp(np.log(r).mean()))
    ratios = tuple(float(x) for x in r)
    if r.size < MIN_ROUNDS_FOR_CI:
        # Resampling one or two rounds gives an "interval" that is only those values: no interval.
        too_few = f"{r.size} paired round(s): too few for an interval"
        return Speedup(name, float(np.median(r)), None, gm, too_few, round_ratios=ratios)
    lo, hi = bootstrap_ci(r, np.median, seed)
    return Speedup(name, float(np.median(r)), (lo, hi), gm, round_ratios=ratios)


def ci_halfwidth_rel(s: Speedup) -> float:
    if s.median is None or s.ci95 is None or s.median <= 0:
        return math.inf
    return (s.ci95[1] - s.ci95[0]) / 2 / s.median


def geomean(values: list[float]) -> float | None:
    v = [x for x in values if x is not None and x > 0 and math.isfinite(x)]
    if not v:
        return None
    return float(math.exp(sum(math.log(x) for x in v) / len(v)))
