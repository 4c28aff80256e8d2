"""An interpreted Triton kernel on the CPU is judged in minutes, not hours (docs/verdict.md, "What
a verdict claims"): its speed is no claim there, so it is not timed unless asked
(``--time-interpreted``), and where the interpreter makes the cases slow the plan keeps one seed per
shape and distribution (kernelproof/evaluate/case_budget.py), said in the flag ``cases_reduced``."""

from __future__ import annotations

import random

import pytest
from cli_support import DATA

from kernelproof import EvalOptions, evaluate
from kernelproof.evaluate import case_budget
from kernelproof.verdict import SPEED_WITHHELD_INTERPRETER
from kernelproof.verify.case_plan import plan_cases

DISTRIBUTIONS = ("task", "normal", "heavy", "spiky")


def _plan(variants=("small", "odd"), seeds=2):
    return tuple(plan_cases(list(variants), set(), DISTRIBUTIONS, seeds, random.Random(1)))


def test_a_slow_interpreted_plan_keeps_one_seed_per_shape_and_distribution():
    cases = _plan()
    reduced = case_budget.reduce_if_slow(cases, 5.0, "cpu", "triton")
    run = cases[:1] + reduced.rest
    assert len(cases) == 16 and len(run) == 8
    assert {(c.variant, c.distribution) for c in run} == {(c.variant, c.distribution) for c in cases}
    assert all(c.case_id.endswith("/0") for c in run)  # the first seed of each kept, in plan order
    assert reduced.flag.startswith("cases_reduced: 8 of 16 planned cases run")
    assert "2 shape(s) x 4 distribution(s), all kept" in reduced.flag


@pytest.mark.parametrize(
    ("first_s", "device", "backend"),
    [(0.5, "cpu", "triton"), (5.0, "cuda", "triton"), (5.0, "cpu", "torch"), (5.0, "cpu", "cpp")],
)
def test_a_quick_plan_a_gpu_or_an_uninterpreted_backend_keeps_every_case(first_s, device, backend):
    cases = _plan()
    reduced = case_budget.reduce_if_slow(cases, first_s, device, backend)
    assert reduced.rest == cases[1:] and reduced.flag == ""


def test_a_plan_of_one_seed_has_nothing_to_reduce():
    cases = _plan(seeds=1)
    reduced = case_budget.reduce_if_slow(cases, 60.0, "cpu", "triton")
    assert reduced.rest == cases[1:] and reduced.flag == ""


@pytest.mark.slow
def test_an_interpreted_256_square_causal_matmul_is_judged_untimed_on_one_seed_per_distribution(monkeypatch):
    # The budget at zero: the reduction applies whatever this machine's speed, so the plan is known.
    monkeypatch.setattr(case_budget, "CPU_CASES_BUDGET_S", 0.0)
    options = EvalOptions(device="cpu", db="", seed=7, timeout_s=300)
    v = evaluate(
        DATA / "tasks" / "causal_matmul_256.py", DATA / "solutions" / "causal_matmul_256_triton.py", options
    )
    assert v.passed, v.reasons
    contract = [c for c in v.settings["cases"] if c.startswith("default/")]
    kept = {c.rsplit("/", 1)[0] for c in contract}
    assert len(contract) == 2 * len(kept) and v.correctness.cases_run == len(kept) > 1
    assert {c.case_id.rsplit("/", 1)[0] for c in v.correctness.cases} == kept  # every distribution
    assert any(f.startswith(f"cases_reduced: {len(kept)} of {len(contract)} planned cases") for f in v.flags)
    assert v.timing is None and any(f.startswith("not_timed: ") for f in v.flags)
    assert v.claims.speed_withheld == SPEED_WITHHELD_INTERPRETER and v.coverage.interpreted_launches >= 1


def test_an_untimed_candidate_that_replays_once_the_calls_look_timed_is_caught():
    # b3 is honest through the correctness cases and replays its last output once the calls stop
    # coming in pairs: left untimed, the timing request's calls are still run and checked.
    exploits = DATA.parent / "exploits"
    options = EvalOptions(device="cpu", db="", seed=3, timeout_s=300)
    v = evaluate(
        exploits / "tasks" / "scale_shift.py", exploits / "solutions" / "b3_phase_replay.py", options
    )
    assert not v.passed and "stale_output" in v.codes, (v.codes, v.reasons)
    assert v.timing is None  # nothing was measured: the calls were checked, not timed
