"""What a verdict claims on the CPU: correctness always; speed only where the timed code is real code.

An interpreted Triton candidate's speedups are withheld (null, with the reason) and earn no reward;
a plain-PyTorch solution passes flagged plain_torch with its speed a claim; a candidate that runs
the reference's own ATen operations outside its launches is flagged reference_ops_outside_kernels.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelproof.api import evaluate
from kernelproof.measure.claims import cpu_claims, gpu_claims, outside_flag, withheld
from kernelproof.options import EvalOptions
from kernelproof.verdict import (
    REFERENCE_OPS_OUTSIDE,
    SPEED_WITHHELD_INTERPRETER,
    SPEED_WITHHELD_UNCONFIRMED,
    Coverage,
    Outcome,
    Speedup,
    compute_reward,
    from_json,
)

TESTS = Path(__file__).resolve().parents[1]
DATA = TESTS / "data"
EXPLOIT_TASKS = TESTS / "exploits" / "tasks"


def _coverage(interpreted: int | None, outside: tuple[str, ...] = ()) -> Coverage:
    return Coverage(None, custom_launches=1, aten_outside=outside, interpreted_launches=interpreted)


def test_interpreted_launches_withhold_the_speed_claim():
    claims = cpu_claims("triton", _coverage(2), frozenset())
    assert not claims.speed and claims.speed_withheld == SPEED_WITHHELD_INTERPRETER
    assert not claims.coverage_judged and "not judged on the CPU" in claims.note


def test_a_cpu_extension_keeps_its_speed_claim():
    # launches of kind extension: compiled CPU code, counted but not interpreted
    claims = cpu_claims("cuda", _coverage(0), frozenset())
    assert claims.speed and claims.speed_withheld == ""


def test_a_triton_solution_whose_launches_were_not_counted_is_taken_as_interpreted():
    assert not cpu_claims("triton", None, frozenset()).speed
    assert cpu_claims("torch", None, frozenset()).speed


def test_the_references_ops_outside_the_launches_are_named_and_flagged():
    claims = cpu_claims("triton", _coverage(1, ("aten::softmax", "aten::sum")), frozenset({"aten::softmax"}))
    assert claims.reference_ops_outside == ("aten::softmax",)
    assert outside_flag(claims).startswith(f"{REFERENCE_OPS_OUTSIDE}: ") and "aten::softmax" in outside_flag(
        claims
    )
    assert (
        outside_flag(cpu_claims("triton", _coverage(1, ("aten::sum",)), frozenset({"aten::softmax"}))) is None
    )


def test_withheld_speedups_are_null_and_earn_no_reward():
    measured = {
        "eager": Speedup("eager", 3.0, (2.5, 3.5), 3.0),
        "best": Speedup("best", 3.0, (2.5, 3.5), 3.0),
    }
    assert compute_reward(Outcome.PASS, measured["best"]) > 0  # the same figures, were they a claim
    out = withheld(measured)
    assert set(out) == set(measured)
    assert all(s.median is None and s.ci95 is None and "interpreter" in s.note for s in out.values())
    assert compute_reward(Outcome.PASS, out["best"]) == 0.0
    assert gpu_claims().speed


# A busy machine may end a timing as machine_busy (an error, never the candidate's); an honest
# solution is never timing_tamper (docs/timing.md). What these tests show does not depend on it.
LOAD_CODES = {"machine_busy"}


def _passed_unless_busy(v) -> bool:
    return v.verdict is Outcome.PASS or (bool(v.codes) and set(v.codes) <= LOAD_CODES)


def _timed(task: Path, solution: Path, time_interpreted: bool = True):
    options = EvalOptions(
        device="cpu",
        db="",
        seed=3,
        seeds_per_case=1,
        time_budget_s=1.0,
        min_rounds=2,
        max_rounds=3,
        timeout_s=180.0,
        time_interpreted=time_interpreted,
    )
    return evaluate(os.path.relpath(task), os.path.relpath(solution), options)


def test_an_interpreted_candidate_passes_with_no_speedup_and_no_speed_reward():
    v = _timed(DATA / "tasks" / "scale_relu.py", DATA / "solutions" / "scale_relu_triton.py")
    assert _passed_unless_busy(v), v.reasons
    assert (
        v.claims is not None and not v.claims.speed and v.claims.speed_withheld == SPEED_WITHHELD_INTERPRETER
    )
    assert v.speedup and all(s.median is None and s.ci95 is None for s in v.speedup.values())
    assert v.reward == 0.0 and compute_reward(Outcome.PASS, v.speedup["best"]) == 0.0
    assert v.timing is not None and v.timing.shapes[0].candidate.n > 0  # the measured times stay
    back = from_json(v.to_json())
    assert back.claims == v.claims and back.to_json()["speedup"]["best"]["median"] is None


def test_an_interpreted_candidate_is_not_timed_unless_asked_and_its_launches_are_still_counted():
    v = _timed(
        DATA / "tasks" / "scale_relu.py", DATA / "solutions" / "scale_relu_triton.py", time_interpreted=False
    )
    assert v.passed, v.reasons
    steps = v.environment["steps"]
    # its launches counted (timing's first step), no round run
    assert v.timing is None and "timing/accounting" in steps and "timing/rounds" not in steps, steps
    assert v.coverage is not None and v.coverage.interpreted_launches and v.coverage.custom_launches
    assert v.claims is not None and v.claims.speed_withheld == SPEED_WITHHELD_INTERPRETER
    assert "not timed" in v.claims.note and any(f.startswith("not_timed: ") for f in v.flags)
    assert v.speedup and all(s.median is None and "not timed" in s.note for s in v.speedup.values())
    assert v.reward == 0.0 and v.settings["time_interpreted"] is False


def test_an_interpreted_decoy_is_judged_by_its_launch_count_without_timing():
    v = _timed(EXPLOIT_TASKS / "softmax.py", DATA / "solutions" / "softmax_one_store_decoy.py", False)
    assert v.timing is None and v.claims is not None
    assert "aten::softmax" in v.claims.reference_ops_outside, v.reasons
    assert any(f.startswith(f"{REFERENCE_OPS_OUTSIDE}: ") for f in v.flags)


def test_a_one_element_store_beside_torch_softmax_is_flagged():
    v = _timed(EXPLOIT_TASKS / "softmax.py", DATA / "solutions" / "softmax_one_store_decoy.py")
    assert _passed_unless_busy(v), v.reasons
    assert v.claims is not None and "aten::softmax" in v.claims.reference_ops_outside, v.reasons
    assert any(f.startswith(f"{REFERENCE_OPS_OUTSIDE}: ") for f in v.flags)
    assert not v.claims.speed and v.reward == 0.0


def test_plain_torch_passes_on_the_cpu_flagged_plain_torch_with_its_speed_a_claim():
    v = _timed(DATA / "tasks" / "scale_relu.py", DATA / "solutions" / "plain_torch.py")
    assert _passed_unless_busy(v) and "no_custom_kernel" not in v.codes, v.reasons
    assert any(f.startswith("plain_torch") for f in v.flags)
    assert v.claims is not None and not v.claims.coverage_judged
    # its speed is a claim; only the parent's clock may withhold it (a gap seen once on a loaded
    # machine and not confirmed: CI once), never its being plain torch
    assert v.claims.speed or v.claims.speed_withheld == SPEED_WITHHELD_UNCONFIRMED, v.claims
    assert v.speedup["eager"].median is not None or not v.claims.speed
    assert any(f.startswith(f"{REFERENCE_OPS_OUTSIDE}: ") for f in v.flags)


@pytest.mark.gpu
def test_on_a_gpu_every_figure_is_a_claim():
    v = evaluate(
        os.path.relpath(EXPLOIT_TASKS / "matmul_gpu.py"),
        os.path.relpath(TESTS / "legit" / "solutions" / "split_precision_matmul.py"),
        EvalOptions(
            device="cuda", db="", seed=3, seeds_per_case=1, time_budget_s=1.0, min_rounds=2, max_rounds=3
        ),
    )
    assert v.claims is not None and v.claims.speed and v.claims.coverage_judged


def test_reference_ops_that_could_not_be_profiled_flag_nothing_and_say_so():
    claims = cpu_claims("triton", _coverage(1, ("aten::softmax",)), None)
    assert claims.reference_ops_outside == () and outside_flag(claims) is None
    assert "could not be profiled" in claims.note


def test_a_profiler_started_in_an_evaluations_thread_prints_nothing_once_kineto_started_in_the_main_one():
    """bench, kernelbench and optimize evaluate in a pool's threads, where the parent profiles the
    reference: Kineto printed "ERROR: External init callback must run in same thread as
    registerClient" there. start_profiler_here (called by evaluate_many) starts it where torch loaded."""
    import subprocess
    import sys

    program = (
        "import threading, torch\n"
        "from torch.autograd.profiler import profile\n"
        "from kernelproof.measure.claims import start_profiler_here\n"
        "{start}\n"
        "def run():\n"
        "    with profile(use_cpu=True):\n"
        "        torch.ones(3) + 1\n"
        "t = threading.Thread(target=run); t.start(); t.join()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    def stderr_of(start: str) -> str:
        ran = subprocess.run(
            [sys.executable, "-c", program.format(start=start)], capture_output=True, text=True, env=env
        )
        assert ran.returncode == 0, ran.stderr
        return ran.stderr

    assert "External init callback" in stderr_of("pass")  # the message this prevents, shown to exist here
    assert "External init callback" not in stderr_of("start_profiler_here()")
