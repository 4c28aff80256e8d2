"""Timing the candidate cannot shape, and honest CPU timing: each defence shown against its attack.

Where a defence has a test-only switch, the attack's effect is shown with it off first (seeds sent
with the batch and a median of calls, as kernelproof once did; the parent's clock checks skipped),
then failing or not inflating with it on. No timing thresholds are asserted beyond the attack's
own orders of magnitude.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernelproof.api import evaluate
from kernelproof.host import cpus
from kernelproof.host.process import SpawnSpec, WorkerProcess
from kernelproof.measure import batch, busy, parent_clock, stats
from kernelproof.options import EvalOptions

DATA = Path(__file__).resolve().parents[1] / "data"
TASK = str(DATA / "tasks" / "scale_relu.py")
TIMED = EvalOptions(
    device="cpu",
    db="",
    seed=11,
    seeds_per_case=1,
    timeout_s=120,
    time_budget_s=2,
    min_rounds=3,
    max_rounds=4,
    time_interpreted=True,  # these defences live in the timing rounds, interpreted kernels' too
)


def sol(name: str) -> str:
    return str(DATA / "solutions" / f"{name}.py")


def measured_ratio(v, baseline: str = "eager") -> float:
    """The paired ratio of the timed shape, as measured: kept under ``timing`` also where the
    headline speedup is withheld (an interpreted Triton kernel's speed is no claim on the CPU, but
    these attacks shape what the harness measures, and the measurement is what they are judged on)."""
    (speedup,) = [s for s in v.timing.shapes[0].speedups if s.baseline == baseline]
    return speedup.median


def test_seeds_read_ahead_inflate_a_round_only_with_the_defence_off(monkeypatch):
    """The solution reads the batch's seeds from the harness's locals (a torch helper walks the
    frames), computes the whole round in its first call and returns at once from the others."""
    with monkeypatch.context() as off:
        off.setattr(batch, "SEEDS_AHEAD", True)  # every seed in the batch's first request
        off.setattr(stats, "round_figure", lambda calls: float(np.median(calls)))  # a median of calls
        shaped = evaluate(TASK, sol("seeds_read_ahead"), TIMED)
    honest = evaluate(TASK, sol("seeds_read_ahead"), TIMED)
    assert shaped.passed and honest.passed, (shaped.reasons, honest.reasons)
    off_speedup, on_speedup = measured_ratio(shaped), measured_ratio(honest)
    # Inflated by the attack: orders of magnitude on an idle machine, 4.8x once beside the other
    # test process in CI (the free calls' harness work stretches with the load).
    assert off_speedup > 3 * on_speedup, (off_speedup, on_speedup)
    # The attack's signature, whatever the load: with the defence off most calls are nearly free
    # beside the one that computed the round; with it on, each call is the kernel's.
    off_calls, calls = shaped.timing.shapes[0].candidate, honest.timing.shapes[0].candidate
    assert off_calls.max_ms > 20 * off_calls.median_ms, off_calls
    assert calls.min_ms > calls.median_ms / 20, calls


def _forging(monkeypatch, divide_by: float) -> None:
    """The candidate's batch replies claim 1/divide_by of each measured window (a forged reply, as a
    solution that writes its own frame to the socket or rebinds the harness's clock would send)."""
    real = WorkerProcess.request

    def forged(self, header, tensors=None, timeout_s=600.0, expect=None):
        reply, out = real(self, header, tensors, timeout_s, expect)
        if self.spec.role == "candidate" and header.get("op") == "end" and reply.get("ok"):
            for key in ("span_ms", "event_ms", "host_ms"):
                reply[key] = [float(x) / divide_by for x in reply[key]]
        return reply, out

    monkeypatch.setattr(WorkerProcess, "request", forged)


def test_a_forged_tiny_span_on_a_slow_kernel_is_timing_tamper(monkeypatch):
    """The interpreted Triton kernel takes milliseconds a call on the CPU; its worker claims a
    thousandth of that. Without the parent's clock checks the claim passes, far faster than eager.
    The machine is taken as quiet (the checks' precondition; a busy one is machine_busy, or timed
    anyway with the gap check alone)."""
    _forging(monkeypatch, 1000.0)
    monkeypatch.setattr(
        busy, "judge", lambda others, cores, rounds, cuda: busy.Quiet(False, others, 2, None, "")
    )
    with monkeypatch.context() as off:
        off.setattr(parent_clock, "CHECKS_OFF", True)
        believed = evaluate(TASK, sol("scale_relu_triton"), TIMED)
    assert believed.passed, believed.reasons
    assert measured_ratio(believed) > 1.0  # a fast kernel, on the worker's word

    checked = evaluate(TASK, sol("scale_relu_triton"), TIMED)
    assert checked.verdict.value == "fail"
    (tamper,) = [r for r in checked.reasons if r.code.value == "timing_tamper"]
    assert "ms" in tamper.message and tamper.detail  # both figures: what was reported, what the parent saw


def _affinities(pid: int) -> set[tuple[int, ...]]:
    """The cores each thread of `pid` may run on."""
    out = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out.add(tuple(sorted(os.sched_getaffinity(int(tid)))))
        except OSError:
            pass
    return out


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to separate")
def test_a_candidate_cannot_widen_its_cores_nor_reach_the_baselines(monkeypatch):
    """It asks for every core and raises its thread count; its threads stay on its own core, apart
    from the baseline's, while the baselines are timed."""
    seen: dict[str, set[tuple[int, ...]]] = {}
    real = parent_clock.judge

    def spy(ctx, programs, *args, **kwargs):
        for p in programs:
            seen[p.name] = _affinities(p.worker.proc.pid)
        return real(ctx, programs, *args, **kwargs)

    monkeypatch.setattr(parent_clock, "judge", spy)
    v = evaluate(TASK, sol("widens_its_cores"), TIMED)
    plan = cpus.plan(1)
    assert plan.separated
    assert seen["candidate"] == {plan.candidate}, seen  # every thread, the OpenMP ones included
    assert seen["eager"] == {plan.baseline}, seen
    assert not set(plan.candidate) & set(plan.baseline)
    assert any("cpu: 1 core(s) each" in f for f in v.flags), v.flags


def test_a_worker_stands_still_while_frozen():
    w = WorkerProcess(SpawnSpec("candidate", "cpu"))
    try:
        w.wait_ready()
        with w.frozen() as how:
            assert how in ("cgroup", "process group")
            if how == "cgroup":  # a frozen process is not in state T: its cgroup's events say it
                assert any("frozen 1" in (p / "cgroup.events").read_text() for p in w.cgroup.paths)
            else:
                assert _state(w.proc.pid) == "T"
        assert _state(w.proc.pid) != "T"
    finally:
        w.close()


class _FrozenCgroup:
    """A cgroup whose freeze the events file confirmed (as on an H100 host with cgroup v2): its
    processes are then in no state ``T``, which a wait for a signal's stop would wait out."""

    paths: list[Path] = []  # no hierarchy to list: the worker's members are its descendants

    def __init__(self, confirms: bool) -> None:
        self.confirms = confirms
        self.calls: list[bool] = []

    def freeze(self, on: bool) -> bool:
        self.calls.append(on)
        return self.confirms if on else True


@pytest.mark.parametrize("confirms", [True, False])
def test_a_confirmed_cgroup_freeze_is_not_waited_out_as_a_signals_stop(monkeypatch, confirms):
    """Confirmed: no wait for the stopped state (it cost 0.5 s a freeze, eleven a timed shape, on
    an H100); not confirmed: the signals' stop, waited for as before."""
    from kernelproof.host import members

    waited: list[set[int]] = []
    monkeypatch.setattr(members, "wait_stopped", lambda pids, *a: waited.append(set(pids)))
    w = WorkerProcess(SpawnSpec("candidate", "cpu"))
    try:
        w.wait_ready()
        w.cgroup = cgroup = _FrozenCgroup(confirms)
        with w.frozen() as how:
            assert how == ("cgroup" if confirms else "process group")
        assert cgroup.calls == ([True, False] if confirms else [True])
        assert [pids for pids in waited if pids] == ([] if confirms else [{w.proc.pid}])
    finally:
        w.cgroup = None
        w.close()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_plain_torch_against_eager_with_two_spinners_alongside_is_near_one_or_busy(monkeypatch):
    """A/A: the same computation on both sides, two CPU-bound processes alongside. The answer is a
    speedup near 1 or the error machine_busy; never a large factor either way, never tamper."""
    monkeypatch.setattr(parent_clock, "BUSY_IS_ERROR", True)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        v = evaluate(TASK, sol("plain_torch"), TIMED.replace(max_rounds=6))
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    codes = set(v.codes)
    assert "timing_tamper" not in codes, v.reasons
    if "machine_busy" in codes:
        assert v.verdict.value == "error" and v.codes == ["machine_busy"]
        assert "--correctness-only" in v.reasons[0].message and "runnable" in v.reasons[0].detail
        return
    eager = v.speedup["eager"].median
    assert 0.5 <= eager <= 2.0, eager
    assert 0.8 <= eager <= 1.25, eager


def test_candidate_and_baselines_are_timed_with_the_same_allocator():
    """The perturbed heap (which poisons the candidate's fresh blocks for correctness) is the
    baselines' heap too: a comparison of two programs, not of two allocators."""
    from kernelproof.host import launch
    from kernelproof.sandbox.private import PrivateDir

    dirs = PrivateDir.create("alloc-")
    try:
        env = {r: launch.worker_env(SpawnSpec(r, "cpu"), dirs) for r in ("candidate", "baseline")}
    finally:
        dirs.remove()
    assert (
        env["candidate"]["GLIBC_TUNABLES"] == env["baseline"]["GLIBC_TUNABLES"] == launch.CPU_MALLOC_TUNABLES
    )
    assert (
        "OMP_NUM_THREADS" not in env["candidate"]
    )  # the parent's count, sent with each load, not the user's


def test_a_gap_excess_seen_once_passes_the_correct_solution_with_its_speedups_withheld(monkeypatch):
    """Not confirmed in the confirmation round: no speed claim and no speed reward, never a
    timing_tamper for an honest solution whose neighbour burst once (docs/timing.md)."""
    from kernelproof.measure import bounds
    from kernelproof.verdict import SPEED_WITHHELD_UNCONFIRMED

    real = bounds.gap_reason
    calls = []

    def once(cand, base, host, mean, cuda, copy_ms=0.0):
        calls.append(len(cand))
        if len(calls) == 1:  # the rounds' figures: an excess, as a neighbour's burst made one in CI
            return real([g + 100.0 for g in cand], base, host, mean, cuda, copy_ms)
        return None  # the confirmation round's: clean (what it measured is not this test's subject)

    monkeypatch.setattr(bounds, "gap_reason", once)
    monkeypatch.setattr(
        busy, "judge", lambda others, cores, rounds, cuda: busy.Quiet(False, others, 2, None, "")
    )
    v = evaluate(TASK, sol("plain_torch"), TIMED)
    assert v.passed, v.reasons
    assert len(calls) == 2  # the rounds, then one confirmation round
    assert (
        v.claims is not None and not v.claims.speed and v.claims.speed_withheld == SPEED_WITHHELD_UNCONFIRMED
    )
    assert all(s.median is None for s in v.speedup.values()) and v.reward == 0.0
    assert any(f.startswith("timing_unconfirmed: ") and "confirmation round" in f for f in v.flags), v.flags
    assert v.timing is not None and v.timing.shapes[0].candidate.n > 0  # the measured times stay


def test_a_forged_window_whose_gap_is_not_confirmed_is_still_caught_by_the_differential(monkeypatch):
    """The confirmation round's few calls can miss an excess on a loaded machine: the back-to-back
    bound still runs, and a thousandth of the real time is timing_tamper there."""
    _forging(monkeypatch, 1000.0)
    monkeypatch.setattr(
        busy, "judge", lambda others, cores, rounds, cuda: busy.Quiet(False, others, 2, None, "")
    )
    monkeypatch.setattr(parent_clock, "_confirmed_gap", lambda found, why, *rest: None)  # not seen again
    checked = evaluate(TASK, sol("scale_relu_triton"), TIMED)
    (tamper,) = [r for r in checked.reasons if r.code.value == "timing_tamper"]
    assert "back to back" in tamper.message, tamper


def test_a_back_to_back_batch_that_computes_only_its_last_call_is_stale_output():
    """Any call of a back-to-back batch may be checked, picked after the reply: computing only the
    last one (the only one checked before) is found (kernelproof/measure/steady_batch.py)."""
    from dataclasses import replace

    v = evaluate(
        TASK, sol("steady_computes_only_its_last_call"), replace(TIMED, steady=True, time_when_busy=True)
    )
    assert v.verdict.value == "fail" and v.codes[0] == "stale_output", (v.codes, v.reasons)
    assert "back-to-back call" in v.reasons[0].message


def test_a_task_that_updates_its_input_in_place_is_measured_back_to_back(monkeypatch):
    """Every call of a back-to-back batch has inputs of its own, so updates in place do not compound.

    The parent's clock checks are not this test's subject and are off here: on a two-core machine
    running the suite in two processes, the other one's burst once took the back-to-back figure of
    this honest interpreted kernel past its allowance in every confirmation (3.805 ms against
    3.76 ms); those checks are tested above with their own controls."""
    from dataclasses import replace

    monkeypatch.setattr(parent_clock, "CHECKS_OFF", True)

    task = Path(__file__).resolve().parents[1] / "legit" / "tasks" / "scale_shift_inplace.py"
    solution = Path(__file__).resolve().parents[1] / "legit" / "solutions" / "scale_shift_inplace.py"
    v = evaluate(str(task), str(solution), replace(TIMED, steady=True, time_when_busy=True))
    assert v.passed, v.reasons
    assert [s.regime for s in v.timing.shapes] == ["cold", "steady"], v.flags
    assert not any("would compound" in f for f in v.flags), v.flags


def test_a_busy_machine_times_an_interpreted_kernel_anyway_but_refuses_to_time_a_claim(monkeypatch):
    """An interpreted Triton kernel's speed is never a claim on the CPU, so a busy machine distorts
    nothing it claims: it is timed, flagged. A solution whose speed would be a claim (plain torch)
    still gets the error machine_busy."""
    monkeypatch.setattr(parent_clock, "BUSY_IS_ERROR", True)
    monkeypatch.setattr(
        busy, "judge", lambda *a, **k: busy.Quiet(True, 9.0, 2, None, "9.0 other tasks runnable")
    )
    interpreted = evaluate(TASK, sol("scale_relu_triton"), TIMED)
    assert interpreted.passed, interpreted.reasons
    assert any(
        f.startswith(f"machine_busy: timed anyway ({parent_clock.NO_CLAIM_ANYWAY})")
        for f in interpreted.flags
    )
    assert interpreted.speedup["eager"].median is None and not interpreted.claims.speed
    claimable = evaluate(TASK, sol("plain_torch"), TIMED)
    assert claimable.codes == ["machine_busy"], claimable.reasons


def test_a_static_output_buffer_is_measured_back_to_back_and_passes(monkeypatch):
    """A solution returning one buffer from every call (CUDA-graph style, legitimate: B4) is seen in
    the batch's warm-up, and each call's results are copied right after it: the calls the parent
    picks are judged on what each returned, never on the last call's overwrite. Those copies are
    harness work in the candidate's cycle that no baseline does: the gap check allows the parent's
    own figure for them (under CI's load their absence once made this honest solution
    timing_tamper by 0.07 ms)."""
    from dataclasses import replace

    from kernelproof.measure import bounds

    real, copies = bounds.gap_reason, []

    def seen(cand, base, host, mean, cuda, copy_ms=0.0):
        copies.append(copy_ms)
        return real(cand, base, host, mean, cuda, copy_ms)

    monkeypatch.setattr(bounds, "gap_reason", seen)

    exploits = Path(__file__).resolve().parents[1] / "exploits"
    v = evaluate(
        str(exploits / "tasks" / "scale_shift.py"),
        str(exploits / "solutions" / "b4_static_output_buffer.py"),
        replace(TIMED, steady=True, time_when_busy=True),
    )
    assert v.passed, v.reasons
    assert [s.regime for s in v.timing.shapes] == ["cold", "steady"], v.flags
    assert any(f.startswith("output_reused:") for f in v.flags), v.flags
    assert copies and all(c > 0.0 for c in copies), copies  # the parent's copy figure was allowed
