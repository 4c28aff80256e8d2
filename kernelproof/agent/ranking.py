"""Which candidate is best: only verified ones, ranked by what they can show with 95% confidence.

A candidate ranks only if its verdict is PASS: a rejected or unjudged candidate is never
selected, however fast it claims to be (the exploit classes are all "fast and wrong"). Passing
ones are ranked by the lower bound of the 95% CI of the speedup over the best baseline (the
quantity the verdict's reward is built on), then by the median, then the earliest wins a tie, so
a noisy lucky sample cannot displace a steady one it does not beat.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from kernelproof.agent.records import Candidate
from kernelproof.verdict import Verdict

Score = tuple[float, float]


def score(v: Verdict | None) -> Score | None:
    """(lower CI bound, median) of the best speedup; None unless the verdict is PASS."""
    if v is None or not v.passed:
        return None
    best = v.speedup.get("best")
    if best is None:
        return (-math.inf, -math.inf)  # correctness-only evaluations: passing, but unranked by speed
    low = best.ci95[0] if best.ci95 and best.ci95[0] is not None else -math.inf
    median = best.median if best.median is not None else -math.inf
    return (low, median)


def rank(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Passing candidates, best first; ties keep the earlier one first."""
    passing = [(score(c.verdict), i, c) for i, c in enumerate(candidates) if c.passed]
    passing.sort(key=lambda t: (t[0][0], t[0][1], -t[1]), reverse=True)  # type: ignore[index]
    return [c for _, _, c in passing]


def best(candidates: Iterable[Candidate]) -> Candidate | None:
    ranked = rank(candidates)
    return ranked[0] if ranked else None


def speedup_text(c: Candidate | None) -> str:
    """'1.84x [1.80-1.88]' for a passing candidate, '-' otherwise."""
    if c is None or c.verdict is None or not c.passed:
        return "-"
    s = c.verdict.speedup.get("best")
    if s is None or s.median is None:
        return "pass"
    return f"{s.median:.2f}x" + (f" [{s.ci95[0]:.2f}-{s.ci95[1]:.2f}]" if s.ci95 else "")


def sol_fraction(c: Candidate | None) -> float | None:
    if c is None or c.verdict is None or c.verdict.roofline is None:
        return None
    return c.verdict.roofline.sol_fraction
