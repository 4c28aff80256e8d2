"""The parent's bounds on reported times, the round statistic, the quiet check and the core plan,
as functions of their figures (no worker, no clock)."""

from __future__ import annotations

import os

import pytest
import torch

from kernelproof.host import cpus
from kernelproof.measure import bounds, busy, stats
from kernelproof.measure.bounds import Differential
from kernelproof.verdict import Reason, ReasonCode


def test_a_round_with_one_long_call_and_free_others_costs_what_its_calls_cost():
    calls = [50.0, 0.01, 0.01, 0.01, 0.01]  # the whole round computed in its first call
    assert stats.round_figure(calls) == pytest.approx(sum(calls) / 5)
    assert stats.round_figure(calls) > 100 * float(sorted(calls)[2])  # its median would hide it


def test_rejects_a_gap_far_beyond_the_baselines_harness_work():
    found = bounds.gap_reason([9.0] * 10, [[0.4, 0.5, 0.45, 0.5]], [], 0.01, cuda=False)
    assert found is not None and found.code.value == "timing_tamper"
    assert "9.000" in found.message and "0.475" in found.message  # both figures


def test_accepts_a_busy_machine_where_the_baselines_gap_is_as_large():
    # The false timing_tamper of a fixed allowance: 28 ms unexplained, where eager showed 58 ms.
    assert bounds.gap_reason([28.0, 30.0, 25.0], [[58.0, 40.0, 61.0]], [], 0.1, cuda=False) is None


def test_accepts_the_candidates_own_harness_work_beside_the_baselines():
    # measured on the CPU machine: an interpreted Triton kernel at 5.6 ms a call, eager's gap 1.0 ms
    assert bounds.gap_reason([7.8] * 5, [[1.04] * 5], [], 5.6, cuda=False) is None
    # the same kernel claiming a thousandth of its time: its real time shows in the gap
    assert bounds.gap_reason([7.8 + 5.6] * 5, [[1.04] * 5], [], 0.0056, cuda=False) is not None


def test_a_static_output_buffers_copies_are_allowed_at_the_parents_own_figure():
    # B4: the worker copies each call's results inside the cycle; no baseline does that work
    over = bounds.gap_reason([3.0] * 5, [[0.5] * 5], [], 0.2, cuda=False)
    assert over is not None and over.code.value == "timing_tamper"
    allowed = bounds.gap_reason([3.0] * 5, [[0.5] * 5], [], 0.2, cuda=False, copy_ms=0.4)
    assert allowed is None
    # one copy's worth, not more: twice the copy's time beyond is still seen
    assert bounds.gap_reason([3.8] * 5, [[0.5] * 5], [], 0.2, cuda=False, copy_ms=0.4) is not None
    assert "copy of the outputs" in bounds.gap_reason([3.8] * 5, [[0.5] * 5], [], 0.2, False, 0.4).detail


def test_the_parents_copy_figure_grows_with_the_bytes_and_is_zero_without_outputs():
    from kernelproof.measure import copy_cost

    cpu = torch.device("cpu")
    assert copy_cost.output_copy_ms([], cpu) == 0.0
    small = copy_cost.output_copy_ms([1 << 12], cpu)
    large = copy_cost.output_copy_ms([1 << 26], cpu)
    assert 0.0 < small < large


@pytest.mark.gpu
def test_the_parents_copy_figure_on_a_gpu_is_timed_by_events_and_scaled_past_its_buffer(monkeypatch):
    from kernelproof.measure import copy_cost

    cuda = torch.device("cuda:0")
    one = copy_cost.output_copy_ms([1 << 26], cuda)
    assert 0.0 < one < 10.0  # 64 MiB on a device that copies hundreds of GB a second
    monkeypatch.setattr(copy_cost, "MAX_COPY_BYTES", 1 << 24)
    copy_cost._copy_ms.cache_clear()
    scaled = copy_cost.output_copy_ms([1 << 28], cuda)  # timed at 16 MiB, scaled by 16
    assert scaled > one


def test_a_gpu_candidate_may_hold_the_stream_for_its_host_time():
    assert bounds.gap_reason([5.0] * 5, [[0.5] * 5], [1.8] * 5, 0.01, cuda=True) is None
    assert bounds.gap_reason([5.0] * 5, [[0.5] * 5], [1.8] * 5, 0.01, cuda=False) is not None


def test_rejects_a_reported_time_below_the_parents_back_to_back_figure():
    cand = Differential(8, 5.0, (45.0, 85.0))
    base = [(0.1, Differential(400, 0.09, (40.0, 76.0)), 0.0)]
    found = bounds.differential_reason(0.005, cand, base, [], cuda=False)
    assert found is not None and found.code.value == "timing_tamper"
    assert "0.005" in found.detail and "5" in found.detail  # reported and measured


def test_accepts_an_honest_report_and_a_launch_bound_gpu_call():
    cand = Differential(8, 5.0, (45.0, 85.0))
    assert bounds.differential_reason(4.0, cand, [], [], cuda=False) is None
    # On a GPU a back-to-back call costs its host time when that is the larger: 20 us of launches
    # around a 2 us kernel is no evidence against a 2 us span.
    launch_bound = Differential(2000, 0.020, (40.0, 80.0))
    assert bounds.differential_reason(0.002, launch_bound, [], [0.019], cuda=True) is None


def test_the_allowance_adds_the_baselines_harness_work_per_call():
    cand = Differential(8, 5.0, (45.0, 85.0))
    busy_harness = [(0.1, Differential(400, 2.1, (40.0, 200.0)), 0.0)]  # 2 ms of harness work a call
    assert bounds.harness_per_call(busy_harness, cuda=False) == pytest.approx(2.0)
    assert bounds.differential_reason(1.0, cand, busy_harness, [], cuda=False) is None  # 5 <= 2 + 4
    assert bounds.differential_reason(1.0, cand, [], [], cuda=False) is not None  # 5 > 2


# Recorded on an H200 (benchmarks/timing_bounds.py, 2026-12-02): (reported mean, the parent's figure,
# reported host time) of the candidate, and of its eager baseline, per call in ms.
H200_5MS_TRUE = (5.003, 4.987, 0.858)
H200_5MS_TENTH = (0.5003, 5.025, 0.0774)  # its windows forged to a tenth
H200_5MS_BASE = (0.00154, 0.04578, 0.061)  # x * 2 over 64 K floats
H200_5US_TRUE = (0.008038, 0.1785, 0.0632)
H200_5US_BASE = (0.008094, 0.1714, 0.0683)


def _base(m, d, h):
    return [(m, Differential(64, d, (1.0, 2.0)), h)]


def test_a_long_kernel_claiming_a_tenth_beside_a_tiny_baseline_is_caught():
    """The ratio the allowance once took from the baselines (30 for a 1.5 us op) let this through."""
    base = _base(*H200_5MS_BASE)
    m, d, h = H200_5MS_TENTH
    found = bounds.differential_reason(m, Differential(64, d, (1.0, 2.0)), base, [h], cuda=True)
    assert found is not None and found.code.value == "timing_tamper"
    m, d, h = H200_5MS_TRUE
    assert bounds.differential_reason(m, Differential(64, d, (1.0, 2.0)), base, [h], cuda=True) is None
    assert not bounds.unbounded(Differential(64, d, (1.0, 2.0)), base, [h], cuda=True)


def test_a_fused_kernel_beating_a_launch_bound_baseline_is_no_cheat():
    # eager: ten launches, 0.05 ms of device time under 0.1 ms of host time; 0.1 ms of harness
    # work a call in a batch. The fused kernel: 5 us on the device, 10 us of host time.
    base = [(0.05, Differential(64, 0.2, (1.0, 2.0)), 0.1)]
    fused = Differential(64, 0.11, (1.0, 2.0))
    assert bounds.differential_reason(0.005, fused, base, [0.01], cuda=True) is None


def test_a_call_within_the_harness_work_cannot_be_bounded_and_says_so():
    base = _base(*H200_5US_BASE)
    m, d, h = H200_5US_TRUE
    cand = Differential(64, d, (1.0, 2.0))
    assert bounds.differential_reason(m, cand, base, [h], cuda=True) is None
    assert bounds.unbounded(cand, base, [h], cuda=True)  # any additive allowance would pass it
    # there the harness work the figure leaves is the evidence: the honest call leaves what eager
    # leaves; the same call claiming half its time (as recorded) leaves more, and is withheld
    assert not bounds.beyond_the_baselines_work(m, cand, base, [h], cuda=True)
    half = Differential(64, 0.1969, (1.0, 2.0))
    assert bounds.beyond_the_baselines_work(0.003989, half, base, [0.0358], cuda=True)


# Recorded on an H200 (the built-in examples timed with a 1 s budget, 2026-12-02, third session): built-in examples faster
# than eager whose calls are shorter than the harness's work in a batch. (reported mean, the parent's
# figure, reported host time) of the candidate, then of eager. The ratio of the figures withheld
# all four; each leaves the harness work eager leaves.
H200_FAST_UNBOUNDED = {
    "level1/08_rms_norm": ((0.4407, 7.224, 0.2276), (1.924, 8.504, 0.2494)),
    "level1/13_cumsum": ((0.413, 7.827, 0.1873), (0.9537, 8.584, 0.0829)),
    "level2/05_attention_fp16": ((0.197, 1.098, 0.2135), (0.9898, 1.872, 0.5069)),
    "level2/06_residual_layernorm": ((0.3735, 5.385, 0.2356), (0.7191, 6.021, 0.2122)),
}


@pytest.mark.parametrize("name", sorted(H200_FAST_UNBOUNDED))
def test_a_fast_honest_call_within_the_harness_work_keeps_its_speedups(name):
    (m, d, h), theirs = H200_FAST_UNBOUNDED[name]
    cand, base = (
        Differential(1, d, (1.0, 2.0)),
        [(theirs[0], Differential(1, theirs[1], (1.0, 2.0)), theirs[2])],
    )
    assert bounds.unbounded(cand, base, [h], cuda=True)
    assert bounds.differential_reason(m, cand, base, [h], cuda=True) is None
    assert not bounds.beyond_the_baselines_work(m, cand, base, [h], cuda=True)
    # claiming a tenth of its time while its figure stays, it would leave too much: withheld
    hidden = Differential(
        1, d + bounds.DIFF_UNBOUNDED_SLACK * bounds.harness_per_call(base, cuda=True), (1.0, 2.0)
    )
    assert bounds.beyond_the_baselines_work(m / 10, hidden, base, [h / 10], cuda=True)


def test_of_a_baselines_measurements_the_larger_figure_calibrates():
    low, high = Differential(8, 0.005, (9.0, 9.04)), Differential(8, 0.17, (9.0, 10.4))
    assert bounds.larger(low, high) is high and bounds.larger(None, low) is low


def test_differential_cancels_fixed_costs_and_keeps_the_smaller_wall():
    walls = iter([30.0, 20.0, 40.0, 35.0])  # n twice, then 2n twice: a neighbour added 10 ms once
    d = bounds.differential(lambda k: next(walls), 10)
    assert d is not None and d.walls_ms == (20.0, 35.0) and d.per_call_ms == pytest.approx(1.5)
    assert bounds.differential(lambda k: None, 10) is None


def test_a_neighbour_in_the_larger_batch_cannot_make_a_call_cost_more_than_the_smaller_batchs_share():
    # measured in CI, an honest interpreted kernel reporting 2.045 ms: 19 calls in 53.73 ms, then
    # 38 calls in 278.6 ms while the other test process ran; the raw difference said 11.8 ms a call
    n = 19
    walls = iter([53.73, 60.0, 278.6, 290.0])
    d = bounds.differential(lambda k: next(walls), n)
    assert d is not None and d.per_call_ms == pytest.approx(53.73 / n)
    assert bounds.differential_reason(2.045, d, [], [], cuda=False) is None
    # the cap never frees a forged window: its real cost is inside the smaller wall as well
    forged = bounds.differential(lambda k: {n: 5.0 * n + 1.0, 2 * n: 10.0 * n + 1.0}[k], n)
    assert forged is not None and bounds.differential_reason(0.005, forged, [], [], cuda=False) is not None


def test_of_two_measurements_the_smaller_figure_decides():
    low, high = Differential(8, 1.0, (9.0, 17.0)), Differential(8, 4.0, (9.0, 41.0))
    assert bounds.smaller(high, low) is low and bounds.smaller(low, high) is low
    assert bounds.smaller(None, high) is high and bounds.smaller(low, None) is low


def test_busy_when_others_want_the_timing_core_or_the_baselines_scatter(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    quiet = busy.judge(0.5, 1, [[1.0, 1.02, 0.99, 1.01]], cuda=False)
    assert not quiet.busy and quiet.why == ""
    loaded = busy.judge(3.0, 1, [[1.0, 1.02, 0.99, 1.01]], cuda=False)
    assert loaded.busy and "3.0 other tasks" in loaded.why
    scattered = busy.judge(0.0, 1, [[1.0, 2.0, 0.5, 1.6, 0.7]], cuda=False)
    assert scattered.busy and "scattered" in scattered.why
    assert "--correctness-only" in scattered.message()
    assert not busy.judge(3.0, 1, [[1.0, 1.0, 1.0]], cuda=True).busy  # a GPU's host load is not its time


def test_cores_are_disjoint_where_there_are_enough(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    two = cpus.plan(2)
    assert two.separated and two.baseline == (0, 1) and two.candidate == (2, 3)
    assert two.env("candidate")["OMP_NUM_THREADS"] == "2"
    three = cpus.plan(3)
    assert not three.separated and three.candidate == three.baseline
    assert "too few cores" in three.describe()


def test_a_forged_fast_figure_cannot_make_the_back_to_back_batch_endless():
    assert bounds.calls_for(0.00001, 20.0) == int(bounds.DIFF_BUDGET_MS / 20.0)  # the parent's cycle caps it
    assert bounds.calls_for(5.0, 6.0) == bounds.DIFF_MIN_CALLS
    assert bounds.calls_for(0.001, float("nan")) == bounds.DIFF_MAX_CALLS


class _Cand:
    """What parent_clock reads of a timed candidate (no worker is asked: the walls are scripted)."""

    def __init__(self, mean_ms: float):
        self.samples_ms, self.cycle_ms, self.host_ms, self.worker = (
            [mean_ms] * 4,
            [mean_ms + 1.0] * 4,
            [],
            None,
        )


def _scripted_walls(monkeypatch, per_call_by_attempt: list[float]) -> list[int]:
    """Each differential measurement of the candidate sees the next per-call cost (ms) in its walls;
    returns the list of batch sizes asked for."""
    from kernelproof.measure import parent_clock

    asked: list[int] = []

    def back_to_back(ctx, prog, rng, calls, timeout_s, check_fp):
        attempt = len(asked) // (2 * bounds.DIFF_REPEATS)
        asked.append(calls)
        return 5.0 + calls * per_call_by_attempt[min(attempt, len(per_call_by_attempt) - 1)], None

    monkeypatch.setattr(parent_clock, "_back_to_back", back_to_back)
    monkeypatch.setattr(parent_clock, "wait_count", lambda prog: None)  # the kernel says nothing here
    return asked


def _differential_verdict(reported_ms: float) -> tuple[list, list[str]]:
    import random

    from kernelproof.measure import parent_clock

    class Ctx:
        variant = "default"
        device = torch.device("cpu")
        slots: list = []
        output_nbytes: list = []

    notes: list[str] = []
    found = parent_clock._differential_reasons(
        Ctx(), _Cand(reported_ms), [], random.Random(0), 10.0, lambda *a: None, notes, False
    )
    return found, notes


def test_a_burst_during_one_measurement_is_not_timing_tamper(monkeypatch):
    asked = _scripted_walls(monkeypatch, [10.0, 2.0])  # a neighbour quintupled the first measurement
    found, notes = _differential_verdict(2.0)
    assert found == [] and len(asked) == 2 * (2 * bounds.DIFF_REPEATS)
    assert any("smallest of 2 measurements" in n for n in notes), notes


def test_a_forged_window_is_timing_tamper_in_every_measurement(monkeypatch):
    asked = _scripted_walls(monkeypatch, [10.0])  # the call always costs 10 ms; the worker says 2
    found, notes = _differential_verdict(2.0)
    assert [r.code.value for r in found] == ["timing_tamper"]
    assert len(asked) == bounds.DIFF_CONFIRMS * (2 * bounds.DIFF_REPEATS)


def _waiting(monkeypatch, per_call_ms: float) -> None:
    """The candidate's worker waits ``per_call_ms`` a call for a core in every scripted batch."""
    from kernelproof.measure import parent_clock

    count = [0.0]
    scripted = parent_clock._back_to_back

    def back_to_back(ctx, prog, rng, calls, timeout_s, check_fp):
        count[0] += calls * per_call_ms
        return scripted(ctx, prog, rng, calls, timeout_s, check_fp)

    monkeypatch.setattr(parent_clock, "_back_to_back", back_to_back)
    monkeypatch.setattr(parent_clock, "wait_count", lambda prog: count[0])


def test_a_back_to_back_excess_the_candidate_spent_waiting_on_a_neighbour_withholds_the_speedups(
    monkeypatch,
):
    """The walls say 10 ms a call against a report of 2 in every measurement, but the kernel counts
    7.5 ms a call the worker waited on others for its core: load explains it, so no timing_tamper,
    and no speed claim either (timing_unconfirmed)."""
    _scripted_walls(monkeypatch, [10.0])
    _waiting(monkeypatch, 7.5)
    found, notes = _differential_verdict(2.0)
    assert found == [], found
    assert any(n.startswith("timing_unconfirmed: back to back") and "waited 7.500 ms" in n for n in notes), (
        notes
    )
    assert not any(n.startswith("timing_unbounded") for n in notes), notes


def test_a_wait_in_some_batches_excuses_no_forged_window_in_the_quiet_ones(monkeypatch):
    """A forged window (6 ms a call, 2 reported) on a machine whose load comes and goes: every
    other batch waited 8 ms a call for its core, the others none. The figure rests on the quiet
    batches' walls, where nothing waited: a wait is taken off its own batch's wall only (a median
    wait of 4 ms off the quietest wall would have excused it)."""
    from kernelproof.measure import parent_clock

    count, asked = [0.0], []

    def back_to_back(ctx, prog, rng, calls, timeout_s, check_fp):
        wait = 8.0 if len(asked) % 2 == 0 else 0.0
        asked.append(calls)
        count[0] += calls * wait
        return 5.0 + calls * (6.0 + wait), None

    monkeypatch.setattr(parent_clock, "_back_to_back", back_to_back)
    monkeypatch.setattr(parent_clock, "wait_count", lambda prog: count[0])
    found, notes = _differential_verdict(2.0)
    assert [r.code.value for r in found] == ["timing_tamper"], notes
    assert not any("timing_unconfirmed" in n for n in notes), notes


def test_a_wait_too_short_to_explain_a_back_to_back_excess_leaves_timing_tamper(monkeypatch):
    _scripted_walls(monkeypatch, [10.0])
    _waiting(monkeypatch, 3.0)  # 10 - 3 = 7 ms a call is still beyond 2 x the report of 2
    found, notes = _differential_verdict(2.0)
    assert [r.code.value for r in found] == ["timing_tamper"]
    assert not any("timing_unconfirmed" in n for n in notes), notes


class _Frozen:
    def frozen(self):
        from contextlib import nullcontext

        return nullcontext("process group")


class _Prog:
    def __init__(self, gaps: list[float], rounds: list[float]):
        self.gap_ms, self.round_ms, self.host_ms, self.worker = gaps, rounds, [], _Frozen()


def _gap_decision(monkeypatch, why: str, confirm):
    from kernelproof.measure import parent_clock

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(busy, "others_runnable", lambda: 0.0)
    first = bounds.gap_reason(
        [12.7] * 8, [[0.37] * 8], [], 2.4, cuda=False
    )  # CI's honest kernel under a burst
    assert first is not None
    cand, base = _Prog([12.7] * 8, [2.4, 2.4]), _Prog([0.37] * 8, [1.0, 1.0])
    notes: list[str] = []
    return parent_clock._confirmed_gap(first, why, cand, [base], 1, confirm, False, notes), notes


def test_a_gap_beyond_the_calibration_on_a_busy_machine_withholds_the_speedups_never_timing_tamper(
    monkeypatch,
):
    asked = []
    got, notes = _gap_decision(monkeypatch, "1.8 other tasks were runnable", lambda: asked.append(1))
    assert got is None and not asked
    (flag,) = notes
    assert flag.startswith("timing_unconfirmed: the machine was busy") and "12.7" in flag


def test_a_gap_excess_not_seen_again_in_a_confirmation_round_withholds_the_speedups(monkeypatch):
    from kernelproof.measure.parent_clock import Gaps

    got, notes = _gap_decision(monkeypatch, "", lambda: Gaps([3.0] * 8, [[0.4] * 8], 2.4))
    assert got is None and notes[0].startswith("timing_unconfirmed:") and "confirmation round" in notes[0]


def test_deferred_work_seen_again_in_the_confirmation_round_is_timing_tamper(monkeypatch):
    from kernelproof.measure.parent_clock import Gaps

    got, notes = _gap_decision(monkeypatch, "", lambda: Gaps([12.5] * 8, [[0.4] * 8], 2.4))
    assert got is not None and got.code.value == "timing_tamper" and not notes
    failed = Reason(ReasonCode.MISMATCH, "the confirmation round's output was wrong")
    assert _gap_decision(monkeypatch, "", lambda: failed)[0] is failed  # the candidate's own failure stands


def test_a_confirmed_excess_the_candidate_spent_waiting_for_a_core_withholds_the_speedups(monkeypatch):
    """A neighbour pinned to the candidate's core reads as a quiet machine (one runnable task on
    two cores) yet makes every call's round trip wait for the core: in CI an honest call's gap
    was 4.6 ms twice. The kernel's count of that wait, beyond the baselines', explains it."""
    from kernelproof.measure.parent_clock import Gaps

    got, notes = _gap_decision(monkeypatch, "", lambda: Gaps([12.5] * 8, [[0.4] * 8], 2.4, 11.2, [0.6]))
    assert got is None, got
    (flag,) = notes
    assert flag.startswith("timing_unconfirmed:") and "waited 10.600 ms a call longer" in flag, flag


def test_waiting_for_a_core_that_the_baselines_waited_as_long_excuses_no_gap(monkeypatch):
    """Waking an idle core costs every program alike (it is in the baselines' gaps already); only
    the candidate's wait beyond theirs is load, and too little of it leaves the excess standing."""
    from kernelproof.measure.parent_clock import Gaps

    for cand_wait, base_wait in ((11.2, 11.0), (3.0, 0.6), (0.0, 0.0)):
        confirm = (lambda c, b: lambda: Gaps([12.5] * 8, [[0.4] * 8], 2.4, c, [b]))(cand_wait, base_wait)
        got, notes = _gap_decision(monkeypatch, "", confirm)
        assert got is not None and got.code.value == "timing_tamper" and not notes, (cand_wait, notes)
    got, notes = _gap_decision(monkeypatch, "", lambda: Gaps([12.5] * 8, [[0.4] * 8], 2.4, None, []))
    assert got is not None and not notes  # where the kernel does not say, nothing is excused


def _pinned(code: str, processes: int) -> tuple[float, float]:
    """For ``processes`` copies of ``code`` pinned to one core, over 0.4 s: busy.waited_ms's growth,
    and their main threads' own run_delay's (the kernel's figure, nothing taken off)."""
    import subprocess
    import sys
    import time

    core = min(os.sched_getaffinity(0))
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(processes)]

    def raw() -> float:
        got = [busy._schedstat(f"/proc/{p.pid}/task/{p.pid}/schedstat") for p in procs]
        return sum(g[1] for g in got if g is not None) / 1e6

    try:
        for p in procs:
            os.sched_setaffinity(p.pid, {core})
        time.sleep(0.1)  # their threads started
        before, raw_before = busy.waited_ms([p.pid for p in procs]), raw()
        time.sleep(0.4)
        after, raw_after = busy.waited_ms([p.pid for p in procs]), raw()
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert before is not None and after is not None
    return after - before, raw_after - raw_before


def test_a_burst_of_waiting_in_one_call_excuses_no_excess_in_the_others(monkeypatch):
    """Seven calls 12.5 ms beyond their windows, one 92.5 ms: the batch waited 80 ms for its core,
    all of it in that one call (10 ms a call on average). Taken off the batch's mean gap the excess
    stands; taken off each call's gap it would have excused the seven it never touched."""
    from kernelproof.measure.parent_clock import Gaps

    burst = Gaps([12.5] * 7 + [92.5], [[0.4] * 8], 2.4, 10.0, [0.0])
    got, notes = _gap_decision(monkeypatch, "", lambda: burst)
    assert got is not None and got.code.value == "timing_tamper" and not notes, notes


@pytest.mark.skipif(
    busy.waited_ms([os.getpid()]) is None or not hasattr(os, "sched_setaffinity"),
    reason="no /proc/<pid>/task/*/schedstat or CPU affinity here",
)
def test_the_wait_for_a_core_counts_a_neighbours_turns_not_a_process_own_threads():
    """Two spinning processes pinned to one core keep each other waiting about half the time: the
    reading grows by that. One process whose two threads (hashing, the GIL let go) share its core
    keeps itself waiting: its other thread's running is taken off its main thread's wait, so a
    solution's own threads never excuse its gap (whatever else loads the machine meanwhile)."""
    spin = "import time\nt = time.time()\nwhile time.time() - t < 5: pass"
    neighbours, _ = _pinned(spin, 2)
    assert neighbours > 150.0, neighbours  # of 800 ms of the two processes' time, about half waited
    threads = (
        "import hashlib, threading, time\n"
        "data = bytes(1 << 20)\n"
        "def spin():\n"
        "    t = time.time()\n"
        "    while time.time() - t < 5: hashlib.sha256(data).digest()\n"
        "threading.Thread(target=spin, daemon=True).start()\n"
        "spin()"
    )
    own, main_waited = _pinned(threads, 1)
    assert main_waited > 100.0, main_waited  # the main thread did wait: on its own other thread
    assert own < main_waited - 40.0, (own, main_waited)  # its other thread ran 90-200 ms of it
    alone = busy.waited_ms([])
    assert alone is not None and alone >= 0.0


def test_a_task_whose_calls_do_not_fit_a_back_to_back_batch_is_not_given_the_differential(monkeypatch):
    """Every call of a back-to-back batch holds its inputs and outputs at once: where 2n of them
    would not fit, the bound is not applied (and says so), rather than running out of memory."""
    import random

    from kernelproof.measure import parent_clock, steady_batch

    asked = _scripted_walls(monkeypatch, [10.0])  # would be timing_tamper were it measured

    class Ctx:
        variant = "default"
        device = torch.device("cpu")
        slots: list = []
        output_nbytes = [steady_batch.BATCH_BYTES["cpu"] // 4]  # with the warm-up calls' inputs: not two

    notes: list[str] = []
    found = parent_clock._differential_reasons(
        Ctx(), _Cand(2.0), [], random.Random(0), 10.0, lambda *a: None, notes, False
    )
    assert found == [] and asked == []
    assert any("back-to-back bound was not applied" in n and "would not fit" in n for n in notes), notes


def test_calls_that_move_much_get_one_call_against_two(monkeypatch):
    """Where 16 calls would not fit but two do (with the warm-up calls' inputs), the differential
    is one call against two: a call that moves that much is long against the walls' noise."""
    from kernelproof.measure import parent_clock, steady_batch

    class Ctx:
        device = torch.device("cpu")
        slots: list = []
        output_nbytes = [steady_batch.BATCH_BYTES["cpu"] // 6]

    assert parent_clock._fitting(Ctx(), 20) == 1
    assert steady_batch.calls_that_fit(Ctx(), 20) == 0  # the steady regime still needs eight


def test_a_crashed_back_to_back_batch_withholds_the_speedups_and_a_wrong_one_fails():
    from kernelproof.measure import parent_clock

    class Ctx:
        variant = "default"

    notes: list[str] = []
    crash = Reason(ReasonCode.CRASH, "a steady-state call raised OutOfMemoryError")
    assert parent_clock._batch_failed(crash, Ctx(), notes) == []
    assert notes[0].startswith("timing_unconfirmed:") and "OutOfMemoryError" in notes[0]
    wrong = Reason(ReasonCode.MISMATCH, "a checked call's output was wrong")
    assert parent_clock._batch_failed(wrong, Ctx(), []) == [wrong]


def _with_a_baseline(monkeypatch, cand_ms: list[float], base_ms: list[float], reported: float, cuda=False):
    """The differential of a candidate beside one baseline (reporting 0.01 ms a call), each program's
    walls scripted per measurement: (found, notes)."""
    import random

    from kernelproof.measure import parent_clock

    cand, base = _Cand(reported), _Cand(0.01)
    seen = {id(cand): 0, id(base): 0}

    def back_to_back(ctx, prog, rng, calls, timeout_s, check_fp):
        script = cand_ms if prog is cand else base_ms
        attempt = seen[id(prog)] // (2 * bounds.DIFF_REPEATS)
        seen[id(prog)] += 1
        return 5.0 + calls * script[min(attempt, len(script) - 1)], None

    monkeypatch.setattr(parent_clock, "_back_to_back", back_to_back)
    monkeypatch.setattr(parent_clock, "wait_count", lambda prog: None)  # the kernel says nothing here
    base.worker = cand.worker = _Frozen()

    class Ctx:
        variant = "default"
        device = torch.device("cpu")
        slots: list = []
        output_nbytes = [4096]

    notes: list[str] = []
    found = parent_clock._differential_reasons(
        Ctx(), cand, [base], random.Random(0), 10.0, lambda *a: None, notes, cuda
    )
    return found, notes


def test_a_call_shorter_than_the_harness_work_is_withheld_when_it_leaves_more_harness_work(monkeypatch):
    # eager: 0.19 ms a call back to back for a 0.01 ms report (0.18 ms of harness work); the
    # candidate's 0.33 ms, within 2 x that, for a 0.001 ms report leaves 0.329 ms: withheld
    found, notes = _with_a_baseline(monkeypatch, [0.33], [0.19], 0.001, cuda=True)
    assert found == [] and any(
        n.startswith("timing_unconfirmed:") and "cannot be bounded" in n for n in notes
    ), notes
    # on the CPU the candidate's worker does harness work a baseline's does not (its audit hook):
    # the same figures stand there, flagged
    found, notes = _with_a_baseline(monkeypatch, [0.33], [0.19], 0.001)
    assert found == [] and any(n.startswith("timing_unbounded:") for n in notes), notes
    # a fused call ten times faster than eager leaving eager's harness work: it stands, flagged
    found, notes = _with_a_baseline(monkeypatch, [0.2], [0.19], 0.001)
    assert found == [] and any(n.startswith("timing_unbounded:") for n in notes), notes
    assert not any(n.startswith("timing_unconfirmed") for n in notes)


def test_one_low_figure_of_a_baseline_cannot_make_an_honest_candidate_a_cheat(monkeypatch):
    # eager's first measurement says no harness work (0.011 ms a call), its second 0.19 ms; the
    # candidate's calls cost 0.25 ms for a 0.05 ms report, harness work included
    found, notes = _with_a_baseline(monkeypatch, [0.25], [0.011, 0.19], 0.05)
    assert found == [], notes


def test_an_unbounded_call_says_how_far_its_report_is_from_the_parents_roofline_floor():
    from kernelproof.evaluate.timing import with_floor
    from kernelproof.verdict import Roofline

    flag = "timing_unbounded: for 'default' the parent's back-to-back figure, 7.05 ms a call, ..."
    roof = Roofline(1e9, 1.6e9, 0.3734, None, 4.2, 0.98, "datasheet")
    said = with_floor(flag, roof)
    assert said.startswith(flag) and "0.3734 ms" in said and "1.02 x" in said
    assert with_floor(flag, None) == flag  # no floor known: nothing to add
    assert with_floor("timing_unconfirmed: ...", roof) == "timing_unconfirmed: ..."
