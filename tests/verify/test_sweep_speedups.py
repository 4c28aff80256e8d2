"""The sweep's speed-ups keep every check: the audit takes setup's probe inputs instead of calling
get_inputs() again (one call fewer on the CPU), and the verdict carries the cost of each step."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kernelproof import api
from kernelproof.options import EvalOptions
from kernelproof.verify import audit, case_plan, fastpath

DATA = Path(__file__).resolve().parents[1] / "data"
TASK, SOL = str(DATA / "tasks" / "scale_relu.py"), str(DATA / "solutions" / "plain_torch.py")


def _evaluate_counting_task_draws(monkeypatch, enabled: bool):
    calls = {"task": 0}
    real = case_plan._make_inputs

    def counted(ctx, distribution, seed, on_device=False):
        if distribution == "task":
            calls["task"] += 1
        return real(ctx, distribution, seed, on_device)

    monkeypatch.setattr(case_plan, "_make_inputs", counted)
    monkeypatch.setattr(fastpath, "ENABLED", enabled)
    monkeypatch.setattr(audit, "_CACHE", {})  # the audit runs in each evaluation, not served
    options = EvalOptions(device="cpu", db="", correctness_only=True, seeds_per_case=1, seed=11)
    return api.evaluate(TASK, SOL, options), calls["task"]


def test_the_audit_takes_the_probe_inputs_instead_of_calling_get_inputs_again(monkeypatch):
    off, draws_off = _evaluate_counting_task_draws(monkeypatch, enabled=False)
    on, draws_on = _evaluate_counting_task_draws(monkeypatch, enabled=True)
    assert off.verdict.value == on.verdict.value == "pass"
    assert draws_on == draws_off - 1
    for v in (off, on):  # every control still ran, on both audit distributions
        steps = v.environment["steps"]
        for control in ("zeros", "mean", "passthrough", "other_seed", "other_weights"):
            assert steps[f"setup/audit/{control}"]["n"] >= 2, control


@pytest.mark.parametrize("enabled", [False, True])
def test_the_verdict_says_what_each_step_cost(monkeypatch, enabled):
    v, _ = _evaluate_counting_task_draws(monkeypatch, enabled)
    steps = v.environment["steps"]
    for name in (
        "setup",
        "setup/footprint",
        "setup/randomness",
        "setup/chunk_check",
        "worker_start",
        "handoff",
        "setup/device_wait",  # the waits on neighbours are steps too (none here: nothing beside it)
    ):
        assert steps[name]["n"] == 1 and steps[name]["s"] >= 0, name
    # before the worker starts, before the probed shapes (not in a correctness-only run), at its close
    assert steps["device_wait"]["n"] in (2, 3)
    audited = steps["setup/audit/oracle"]["n"]
    assert audited >= 2 and audited % 2 == 0  # one per audit distribution, on each variant
    cases_run = v.correctness.cases_run
    assert steps["correctness/case_worker"]["n"] == steps["correctness/case_compare"]["n"] == cases_run
    assert steps["setup"]["s"] >= steps["setup/audit"]["s"]  # a nested step is part of its parent
    # the worker's own laps of each case, under its step: where case_worker's seconds went
    for lap in ("inputs", "poison", "call", "checks", "to host"):
        assert steps[f"correctness/case_worker/said/{lap}"]["n"] == cases_run, lap
    said = sum(v["s"] for k, v in steps.items() if k.startswith("correctness/case_worker/said/"))
    assert said <= steps["correctness/case_worker"]["s"]


def test_a_workers_laps_are_kept_only_by_the_names_it_is_known_to_use():
    """The laps are the worker's word (the candidate shares its process): a reply cannot add lines
    of its own to the cost table, nor a figure that is not a non-negative number."""
    from kernelproof.verify import steps as step_clock

    with step_clock.recording("t") as clock, step_clock.step("case_worker"):
        step_clock.said(
            {"call": 0.5, "made_up": 9.0, "poison": -1.0, "checks": True, "inputs": "2"},
            frozenset({"call", "poison", "checks", "inputs"}),
        )
        step_clock.said(["call", 1.0], frozenset({"call"}))  # not a mapping: nothing
    assert {k for k in clock.totals if "said" in k} == {"case_worker/said/call"}
    assert clock.totals["case_worker/said/call"] == {"s": 0.5, "n": 1}


def test_an_evaluation_in_progress_says_which_step_it_is_in():
    """A sweep's heartbeat lists the evaluations in flight and where each is (verify/steps.py)."""
    from kernelproof.verify import steps as step_clock

    inside, leave = threading.Event(), threading.Event()

    def evaluation():
        with step_clock.recording("level1/20_LeakyReLU.py"), step_clock.step("setup"):
            with step_clock.step("audit"):
                inside.set()
                leave.wait(5)

    t = threading.Thread(target=evaluation, daemon=True)
    t.start()
    assert inside.wait(5)
    time.sleep(0.05)
    now = [o for o in step_clock.live() if o.label == "level1/20_LeakyReLU.py"]
    leave.set()
    t.join(5)
    assert len(now) == 1 and now[0].step == "setup/audit" and now[0].step_s >= 0.04
    assert now[0].elapsed_s >= now[0].step_s
    assert not [o for o in step_clock.live() if o.label == "level1/20_LeakyReLU.py"]  # closed: gone


def test_a_wait_on_a_neighbour_is_a_step_of_its_own():
    """Seconds spent waiting on another evaluation (its timing holds the device) are recorded where
    they go: the cost table explains them instead of leaving them out of every step."""
    from kernelproof.verify import steps as step_clock

    held = threading.Lock()
    held.acquire()
    threading.Timer(0.2, held.release).start()
    with step_clock.recording("level1/19_ReLU.py") as clock:
        with step_clock.entered(held, "device_wait"), step_clock.step("probe_cases"):
            assert held.locked()  # inside: the lock is ours, released on leaving
    assert not held.locked()
    waited, probed = clock.totals["device_wait"], clock.totals["probe_cases"]
    assert waited["n"] == 1 and waited["s"] >= 0.15
    assert probed["n"] == 1 and probed["s"] < waited["s"]  # the wait is not the step's


def test_a_timed_evaluation_says_where_its_timing_went(tmp_path):
    """Timing's seconds by step (warm-up, rounds, the parent's checks, the baselines): an H100's
    ten seconds a candidate could not be told apart before."""
    options = EvalOptions(
        device="cpu",
        db="",
        seeds_per_case=1,
        seed=5,
        time_budget_s=0.5,
        time_when_busy=True,
        time_interpreted=True,
    )
    v = api.evaluate(
        str(DATA / "tasks" / "scale_relu.py"), str(DATA / "solutions" / "scale_relu_triton.py"), options
    )
    steps = v.environment["steps"]
    assert v.timing is not None and v.timing.shapes, v.reasons
    for name in (
        "timing/load",
        "timing/baselines",
        "timing/warm_up",
        "timing/rounds",
        "timing/parent_checks",
    ):
        assert steps[name]["n"] >= 1, name
    # the device alone for each measuring stretch: on the CPU the launches counted, then the rounds
    # (the loads between them in a shared turn: kernelproof/evaluate/device_turns.py)
    assert steps["timing_wait"]["n"] == 2
    inside = sum(c["s"] for n, c in steps.items() if n.count("/") == 1 and n.startswith("timing/"))
    assert inside <= steps["timing"]["s"] + 1e-6
