"""The parent's clock bounds what a worker reports (I10): two checks, each calibrated in the same run.

1. **The gap.** For every timed call the parent measures a *cycle* on its own clock: from sending
   the call's seed to receiving its fingerprint (kernelproof.measure.batch). What the worker's
   window does not explain (cycle minus reported time) is harness work: fresh inputs, the checks,
   the fingerprint, three messages. A baseline worker does the same harness work on the same
   shapes in the same rounds, so its gap is the calibration. A candidate whose gap is well beyond
   the baselines' (``GAP_RATIO`` times their median plus ``GAP_SPREADS`` times their spread, plus
   its own reported mean) did work the window does not show. The ratio is wide because the
   candidate's worker does harness work a baseline's does not (its audit hook sees every event,
   the checks after each call look for replaced code and hooks): on the CPU machine a plain-torch
   candidate's gap was 4.4 ms against eager's 1.7 ms, an interpreted Triton kernel's 7.8 ms
   against 1.0 ms. So the gap is coarse; forged windows on short kernels are the differential's. No fixed allowance: a fixed 10 ms hid any forged window on a
   kernel shorter than that, and flagged honest code on a busy CPU where the baseline's own gap
   was 58 ms. On a GPU the worker holds the stream while it queues a call (a spin of
   ``SPIN_MARGIN`` times its host time), so that much of the candidate's reported host time is
   allowed on top; on the CPU the host time is the window.
2. **The differential.** For kernels shorter than the harness's per-call work, the gap cannot see
   a forged window. So the parent times two back-to-back batches of ``n`` and ``2n`` calls on its
   own clock (the worker's ``steady`` request: every call on values of its own, any call checked,
   kernelproof/measure/steady_batch.py) and takes
   ``(wall(2n) - wall(n)) / n``: every fixed cost cancels and what is left is one call's cost,
   its own time plus the harness's per-call work in a batch (drawing, keeping, checking and
   fingerprinting each call's values). Each size is timed twice and the smaller wall kept (a
   neighbour only ever adds time). A call never costs more than the smaller batch's wall per call
   (its fixed costs are not negative), so the figure is capped there. The harness's per-call work
   is calibrated on the baselines, whose batches do the same on the same shapes: their figure less
   their own reported time. A reported mean is ``timing_tamper`` when the parent's figure exceeds
   ``DIFF_MIN_FACTOR`` times it plus ``DIFF_HARNESS_SLACK`` times that harness work, with both
   figures, once ``DIFF_CONFIRMS`` fresh measurements agree (the smallest figure decides): a
   neighbour's burst comes and goes, a forged window is there every time. On a GPU a back-to-back
   call costs the larger of its host time and its device time, so the candidate's reported host
   time per call is taken off the parent's figure first, and a baseline's reported host time
   counts as its own time.

   The allowance is additive, not a ratio: the harness's work per call does not grow with the
   kernel's time. A ratio taken from the baselines let a 5 ms kernel claim a tenth of its time on
   an H200 beside a 1.5 us baseline (whose figure was 30 times its report), and would call a fused
   kernel faster than eager on a small shape a cheat. A call whose whole cost on the parent's clock
   is within the harness's allowance (:func:`unbounded`) cannot be bounded that way at all: the
   verdict says so (``timing_unbounded``). There the one evidence left is additive too: what the
   call's figure leaves beyond its own reported cost is harness work, and the harness does the same
   work for the candidate as for the baselines; more than ``DIFF_UNBOUNDED_SLACK`` times theirs
   (:func:`beyond_the_baselines_work`) is not a claim (``timing_unconfirmed``: the speedups are
   withheld), never ``timing_tamper``. A ratio of the two figures served there before: on an H200
   it withheld the speedups of four honest built-in examples faster than eager (a fast call's
   figure is nearly all harness work, so its ratio to a small report is large).

A gap beyond the calibration is ``timing_tamper`` only when seen again in a confirmation round on a
machine still quiet (kernelproof/measure/parent_clock.py); else the speedups are withheld
(``timing_unconfirmed``): no speed claim, and no cheat called where a neighbour burst once.

Both checks are skipped when the machine was too busy to time (kernelproof.measure.busy decides
that first): an honest solution on a busy machine gets ``machine_busy`` or a pass, never
``timing_tamper``; timed anyway (``--time-when-busy``), only the gap applies. Their resolution on an H200 (a 5 us and a 5 ms kernel) is measured by
benchmarks/timing_bounds.py; docs/timing.md gives the figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernelproof.verdict import Reason, ReasonCode

GAP_RATIO = 5.0  # the candidate's harness time per call may be this many times the baselines'
GAP_SPREADS = 4.0  # ... plus this many times the spread (IQR) of the baselines' per-call gaps
SPIN_MARGIN = 1.5  # kernelproof.worker.clock: the stream is held this many times the host time
DIFF_TARGET_MS = 40.0  # the smaller back-to-back batch lasts about this long
DIFF_MIN_CALLS = 8
DIFF_MAX_CALLS = 20_000
DIFF_BUDGET_MS = 2_000.0  # the smaller batch at the parent's per-call cycle lasts at most this long
DIFF_REPEATS = 2  # each batch size timed this often; the smallest wall is kept
DIFF_MIN_FACTOR = 2.0  # a reported mean may fall this far below the parent's figure,
DIFF_HARNESS_SLACK = 2.0  # ... plus this many times the baselines' harness work per call in a batch
# where that cannot bound a call: harness work beyond this many times the baselines' withholds. On
# an H200 the built-in examples' harness work was 0.82-1.17 x eager's; on the CPU the candidate's
# worker does work a baseline's does not (its audit hook sees every event: GAP_RATIO's reasons)
DIFF_UNBOUNDED_SLACK = 1.5
DIFF_UNBOUNDED_SLACK_CPU = GAP_RATIO
DIFF_CONFIRMS = 3  # timing_tamper only when this many measurements of the candidate's figure agree


@dataclass(frozen=True)
class Differential:
    calls: int  # n: the smaller batch
    per_call_ms: float  # (wall(2n) - wall(n)) / n on the parent's clock
    walls_ms: tuple[float, float]  # the smallest wall of each batch size

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "per_call_ms": round(self.per_call_ms, 6),
            "walls_ms": list(self.walls_ms),
        }


def calls_for(reported_ms: float, cycle_ms: float) -> int:
    """Back-to-back calls for the smaller batch: about ``DIFF_TARGET_MS`` at the reported speed,
    and no more than ``DIFF_BUDGET_MS`` at the parent's own per-call cycle (which bounds a call
    from above): a forged figure cannot make the batch run for minutes."""
    per = max(reported_ms, 1e-4) if math.isfinite(reported_ms) else 1.0
    most = DIFF_BUDGET_MS / cycle_ms if math.isfinite(cycle_ms) and cycle_ms > 0 else DIFF_MAX_CALLS
    return int(max(DIFF_MIN_CALLS, min(DIFF_MAX_CALLS, DIFF_TARGET_MS / per, most)))


def differential(timed: Callable[[int], float | None], n: int) -> Differential | None:
    """``timed(k)`` runs ``k`` back-to-back calls and returns the parent's wall in ms (None: the
    batch failed)."""
    walls = []
    for k in (n, 2 * n):
        got = [timed(k) for _ in range(DIFF_REPEATS)]
        if any(g is None for g in got):
            return None
        walls.append(min(float(g) for g in got if g is not None))
    per_call = min((walls[1] - walls[0]) / n, walls[0] / n)  # a call costs at most the smaller batch's share
    return Differential(n, max(0.0, per_call), (round(walls[0], 4), round(walls[1], 4)))


def smaller(a: Differential | None, b: Differential | None) -> Differential | None:
    """Of two measurements of one program's figure, the smaller: noise only ever adds time."""
    if a is None or b is None:
        return a or b
    return a if a.per_call_ms <= b.per_call_ms else b


def gap_reason(
    cand_gap_ms: list[float],
    base_gaps_ms: list[list[float]],
    cand_host_ms: list[float],
    cand_mean_ms: float,
    cuda: bool,
    copy_ms: float = 0.0,
) -> Reason | None:
    """timing_tamper when the candidate's per-call gap is beyond what the baselines' calibrates,
    plus the candidate's own reported time a call (work it claims is in its windows), plus
    ``copy_ms``: the parent's own figure for copying the outputs, where the worker copies each
    call's results (a static output buffer: kernelproof/measure/copy_cost.py)."""
    bases = [np.asarray(g) for g in base_gaps_ms if g]
    if not cand_gap_ms or not bases:
        return None
    cand = float(np.median(cand_gap_ms))
    base = float(np.median([np.median(b) for b in bases]))
    spread = float(np.median([np.subtract(*np.percentile(b, [75, 25])) for b in bases]))
    host = SPIN_MARGIN * float(np.median(cand_host_ms)) if cuda and cand_host_ms else 0.0
    own = cand_mean_ms if math.isfinite(cand_mean_ms) else 0.0
    copy = max(0.0, copy_ms)
    allowed = GAP_RATIO * base + GAP_SPREADS * spread + host + own + copy
    if cand <= allowed:
        return None
    return Reason(
        ReasonCode.TIMING_TAMPER,
        f"each timed call took {cand:.3f} ms of the parent's wall time beyond its reported window, where the "
        f"baselines' harness work took {base:.3f} ms (allowed {allowed:.3f} ms): work is happening outside "
        "the timed window (host-side compute, deferred work, or altered timers)",
        f"per call, medians: candidate gap {cand:.4f} ms; baselines' gap {base:.4f} ms, spread (IQR) "
        f"{spread:.4f} ms; allowance {GAP_RATIO:g} x gap + {GAP_SPREADS:g} x spread + the candidate's "
        f"reported mean {own:.4f} ms"
        + (f" + {SPIN_MARGIN:g} x the candidate's host time ({host:.4f} ms)" if host else "")
        + (
            f" + the parent's copy of the outputs ({copy:.4f} ms; the calls reused one buffer)"
            if copy
            else ""
        ),
    )


# A baseline's (reported mean, the parent's figure, reported host time) per call
Baseline = tuple[float, Differential, float]


def larger(a: Differential | None, b: Differential | None) -> Differential | None:
    """Of two measurements of a baseline's figure, the larger: it calibrates the harness's work."""
    if a is None or b is None:
        return a or b
    return a if a.per_call_ms >= b.per_call_ms else b


def harness_per_call(base: list[Baseline], cuda: bool) -> float:
    """The baselines' harness work per call in a back-to-back batch (the most of any): the parent's
    figure less the call's own reported cost, the larger of host and device time on a GPU."""
    return max(
        (max(0.0, d.per_call_ms - _own_cost(m, h, cuda)) for m, d, h in base if math.isfinite(m)), default=0.0
    )


def _own_cost(mean_ms: float, host_ms: float, cuda: bool) -> float:
    """A call's own cost back to back: on a GPU the larger of its device and host time."""
    return max(mean_ms, host_ms) if cuda else mean_ms


def allowed_ms(cand_mean_ms: float, base: list[Baseline], cuda: bool) -> float:
    """The most the parent's per-call figure (less the reported host time) may be for this report."""
    return DIFF_MIN_FACTOR * cand_mean_ms + DIFF_HARNESS_SLACK * harness_per_call(base, cuda)


def _beyond_host(cand_diff: Differential, cand_host_ms: list[float], cuda: bool) -> float:
    """The parent's per-call figure less the reported host time (on a GPU a back-to-back call costs
    the larger of host and device time)."""
    host = float(np.median(cand_host_ms)) if cuda and cand_host_ms else 0.0
    return cand_diff.per_call_ms - host


def unbounded(
    cand_diff: Differential | None, base: list[Baseline], cand_host_ms: list[float], cuda: bool
) -> bool:
    """Whether the parent's figure lies within the harness's allowance even for a report of zero:
    then no reported time, however small, could be told from the truth (the call is shorter than
    the harness's own per-call work), and the speed is not a claim."""
    if cand_diff is None:
        return False
    return _beyond_host(cand_diff, cand_host_ms, cuda) <= allowed_ms(0.0, base, cuda)


def beyond_the_baselines_work(
    cand_mean_ms: float, cand_diff: Differential, base: list[Baseline], cand_host_ms: list[float], cuda: bool
) -> bool:
    """Whether the parent's figure leaves more harness work a call beyond the reported cost (on a
    GPU the larger of the reported mean and host time) than :func:`unbounded_slack` times the
    baselines' (:func:`harness_per_call`): evidence only where the call is too short to bound
    (:func:`unbounded`). Additive, like the bound: a fused kernel far faster than eager leaves
    the same harness work as eager does, however small its report."""
    if not math.isfinite(cand_mean_ms):
        return False
    host = float(np.median(cand_host_ms)) if cuda and cand_host_ms else 0.0
    own = _own_cost(cand_mean_ms, host, cuda)
    return cand_diff.per_call_ms - own > unbounded_slack(cuda) * harness_per_call(base, cuda)


def unbounded_slack(cuda: bool) -> float:
    """How many times the baselines' harness work an unbounded call may leave (see the constants)."""
    return DIFF_UNBOUNDED_SLACK if cuda else DIFF_UNBOUNDED_SLACK_CPU


def differential_reason(
    cand_mean_ms: float,
    cand_diff: Differential | None,
    base: list[Baseline],
    cand_host_ms: list[float],
    cuda: bool,
) -> Reason | None:
    """timing_tamper when the parent's own per-call figure is beyond what the reported mean and the
    baselines' harness work per call explain."""
    if cand_diff is None or not math.isfinite(cand_mean_ms):
        return None
    host = float(np.median(cand_host_ms)) if cuda and cand_host_ms else 0.0
    bound = _beyond_host(cand_diff, cand_host_ms, cuda)
    harness = harness_per_call(base, cuda)
    allowed = allowed_ms(cand_mean_ms, base, cuda)
    if bound <= 0 or bound <= allowed:
        return None
    return Reason(
        ReasonCode.TIMING_TAMPER,
        f"the worker reported {cand_mean_ms:.4g} ms a call, but back to back a call took {cand_diff.per_call_ms:.4g} ms "
        f"on the parent's clock ((wall(2n) - wall(n)) / n, n = {cand_diff.calls}): the reported window is "
        "not the call's time",
        f"reported mean {cand_mean_ms:.6g} ms; parent's per-call figure {cand_diff.per_call_ms:.6g} ms"
        + (f" less {host:.4g} ms of reported host time" if host else "")
        + f"; walls {cand_diff.walls_ms[0]:.4g} ms (n) and {cand_diff.walls_ms[1]:.4g} ms (2n); allowed "
        f"{allowed:.4g} ms = {DIFF_MIN_FACTOR:g} x the reported mean + {DIFF_HARNESS_SLACK:g} x the baselines' "
        f"harness work per call ({harness:.4g} ms)",
    )
