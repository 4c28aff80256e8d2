"""Which candidate is best: only verified ones, ranked by what they can show with 95% confidence.

A candidate ranks only if its verdict is PASS and judged the candidate's own bytes (the verdict's
solution hash is the candidate's): a rejected or unjudged candidate is never selected, however
fast it claims to be (the exploit classes are all "fast and wrong"). Passing ones are ranked by
the lower bound of the 95% CI of the speedup over the best baseline (the quantity the verdict's
reward is built on), then by the median, then the earliest wins a tie, so a noisy lucky sample
cannot displace a steady one it does not beat.

A verdict without a speed claim (``speedup`` null, or no "best" figure: a correctness-only
evaluation, or a CPU verdict of a candidate that launches interpreted Triton kernels, whose
speed says nothing about the kernel) ranks by correctness alone: below every candidate with a
claim, and among its peers the earliest first.

A candidate flagged ``reference_ops_outside_kernels`` (it calls the reference's own ATen
operations outside its kernel launches: on the CPU a one-element Triton store followed by the
reference's ``torch.softmax`` passes, and would win on the reference's speed) is never chosen.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from kernelproof.agent.call_records import Candidate
from kernelproof.verdict import Speedup, Verdict

Score = tuple[float, float]

NEVER_CHOSEN_FLAGS = frozenset({"reference_ops_outside_kernels"})  # a verdict flag that bars a pass


def best_speedup(v: Verdict | None) -> Speedup | None:
    """The verdict's headline speedup over the best baseline; None when it makes no speed claim."""
    if v is None:
        return None
    sp = (v.speedup or {}).get("best")
    return sp if sp is not None and sp.median is not None else None


def speed_claimed(v: Verdict | None) -> bool:
    return best_speedup(v) is not None


def score(v: Verdict | None) -> Score | None:
    """(lower CI bound, median) of the best speedup; None unless the verdict is PASS."""
    if v is None or not v.passed:
        return None
    best = best_speedup(v)
    if best is None:
        return (-math.inf, -math.inf)  # no speed claim: passing, ranked by correctness alone
    low = best.ci95[0] if best.ci95 and best.ci95[0] is not None else -math.inf
    median = best.median if best.median is not None else -math.inf
    return (low, median)


def judged_own_bytes(c: Candidate) -> bool:
    """Whether the candidate's verdict judged the candidate's own source (by content hash)."""
    return c.verdict is not None and bool(c.source_sha256) and c.verdict.solution.sha256 == c.source_sha256


def barred(c: Candidate) -> tuple[str, ...]:
    """The verdict flags that keep a passing candidate from being chosen (empty: none)."""
    if c.verdict is None:
        return ()
    return tuple(f for f in c.verdict.flags if f in NEVER_CHOSEN_FLAGS)


def eligible(c: Candidate) -> bool:
    """Whether ``c`` may be chosen: it passed, on its own bytes, and carries no barring flag."""
    return c.passed and judged_own_bytes(c) and not barred(c)


def rank(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Eligible candidates, best first; ties keep the earlier one first."""
    passing = [(score(c.verdict), i, c) for i, c in enumerate(candidates) if eligible(c)]
    passing.sort(key=lambda t: (t[0][0], t[0][1], -t[1]), reverse=True)  # type: ignore[index]
    return [c for _, _, c in passing]


def best(candidates: Iterable[Candidate]) -> Candidate | None:
    ranked = rank(candidates)
    return ranked[0] if ranked else None


def speedup_text(c: Candidate | None) -> str:
    """'1.84x [1.80-1.88]' for a passing candidate, 'pass (no speed claim)' without one, '-' otherwise."""
    if c is None or c.verdict is None or not c.passed:
        return "-"
    s = best_speedup(c.verdict)
    if s is None:
        return "pass (no speed claim)"
    return f"{s.median:.2f}x" + (f" [{s.ci95[0]:.2f}-{s.ci95[1]:.2f}]" if s.ci95 else "")


def sol_fraction(c: Candidate | None) -> float | None:
    if c is None or c.verdict is None or c.verdict.roofline is None:
        return None
    return c.verdict.roofline.sol_fraction
