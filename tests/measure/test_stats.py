"""Statistics: paired per-round ratios and bootstrap intervals that cover the truth."""

from __future__ import annotations

import numpy as np

from kernelproof.measure.stats import ci_halfwidth_rel, paired_speedup, summarize


def test_paired_ratios_cancel_drift_shared_by_both_programs():
    rng = np.random.default_rng(0)
    drift = np.linspace(1.0, 1.5, 40)  # the machine slows down during the run
    base = 2.0 * drift * (1 + 0.01 * rng.standard_normal(40))
    cand = 1.0 * drift * (1 + 0.01 * rng.standard_normal(40))
    s = paired_speedup(list(base), list(cand), "eager")
    assert s.ci95[0] <= 2.0 <= s.ci95[1]
    assert ci_halfwidth_rel(s) < 0.01


def test_summary_keeps_mean_and_max_beside_the_median():
    x = [1.0] * 99 + [100.0]  # all the work in one call
    st = summarize(x)
    assert st.median_ms == 1.0 and st.max_ms == 100.0 and st.mean_ms > 1.9 and st.outliers == 1


def test_missing_rounds_give_no_speedup_rather_than_a_number():
    s = paired_speedup([], [], "eager")
    assert s.median is None and s.note


def test_too_few_rounds_give_a_median_but_no_interval():
    s = paired_speedup([2.0], [1.0], "eager")
    assert s.median == 2.0 and s.ci95 is None and "too few" in s.note
    assert ci_halfwidth_rel(s) == float("inf")  # adaptive stopping keeps going
    assert paired_speedup([2.0, 2.1, 1.9], [1.0, 1.0, 1.0], "eager").ci95 is not None
