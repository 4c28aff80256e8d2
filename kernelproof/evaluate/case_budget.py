"""Fewer seeds, never fewer shapes or distributions, where Triton's interpreter makes cases slow.

On the CPU a Triton kernel runs in Triton's interpreter, Python over NumPy: a 256 x 256 matmul
with a k-loop took 2.5 s a case on an idle 2-core machine and 8-25 s on a busy one, so the default
plan (every shape x every distribution x 2 seeds: 16 cases) ran for minutes before a verdict.
The plan's coverage is its shapes and its value distributions (A4-A6); its seeds are repeats of
the same (shape, distribution) under other hidden values. So where the parent's own clock says
the plan would run past :data:`CPU_CASES_BUDGET_S`, the cases still to run keep one seed per
(shape, distribution) and drop the rest, and the verdict's flag ``cases_reduced`` says so, with
the figures. The first case is always run whole; a case that fails ends the run as before (I9:
every case that is run must pass, and a reduced plan is said, never hidden).

Decided from the parent's facts only: the device the evaluation runs on, the time the parent
measured for the first case, and the solution's static backend (Triton is the one backend that
runs interpreted on the CPU; the launch count that follows, under timing, records what ran).
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelproof.verify.case_plan import Case

CPU_CASES_BUDGET_S = 30.0  # the whole plan's projected time above which its seeds are reduced
CASES_REDUCED = "cases_reduced"  # the flag's name (docs/verdict.md)


@dataclass(frozen=True)
class Reduced:
    """The cases to run after the first, and the flag that says what was left out ("" for none)."""

    rest: tuple[Case, ...]
    flag: str = ""


def reduce_if_slow(
    cases: tuple[Case, ...], first_s: float, device_type: str, backend: str, budget_s: float | None = None
) -> Reduced:
    """`cases[1:]`, thinned to one seed per (shape, distribution) when the first case (`first_s`
    seconds on the parent's clock) says that an interpreted plan would take longer than `budget_s`.

    Nothing changes on a GPU, for a backend the interpreter does not run, or within the budget."""
    budget_s = CPU_CASES_BUDGET_S if budget_s is None else budget_s
    rest = tuple(cases[1:])
    if device_type != "cpu" or backend != "triton" or first_s * len(cases) <= budget_s:
        return Reduced(rest)
    seen = {(cases[0].variant, cases[0].distribution)} if cases else set()
    kept = []
    for case in rest:
        key = (case.variant, case.distribution)
        if key not in seen:
            seen.add(key)
            kept.append(case)
    if len(kept) == len(rest):
        return Reduced(rest)
    run = len(kept) + 1
    shapes = len({c.variant for c in cases})
    dists = len({c.distribution for c in cases})
    flag = (
        f"{CASES_REDUCED}: {run} of {len(cases)} planned cases run, one seed per shape and distribution "
        f"({shapes} shape(s) x {dists} distribution(s), all kept): the first case took {first_s:.1f} s in "
        f"Triton's interpreter on the CPU, and the whole plan would have taken about "
        f"{first_s * len(cases):.0f} s (budget {budget_s:g} s); on a GPU every seed runs"
    )
    return Reduced(tuple(kept), flag)
