"""The reward of a verdict (kernelproof/rewards.py, docs/rewards.md): 0 for a refusal, None for an
error that is not the solution's, and for a pass a speed term from the lower confidence bound
(never the point estimate) and a coverage term from the parent's profile."""

from __future__ import annotations

import math

import pytest

from kernelproof.rewards import RewardWeights, reward, reward_terms
from kernelproof.verdict import Claims, Coverage, FileRef, Outcome, Reason, ReasonCode, Speedup, Verdict


def verdict(
    outcome: Outcome = Outcome.PASS,
    codes: tuple[ReasonCode, ...] = (),
    low: float | None = None,
    median: float | None = None,
    coverage: float | None = None,
    speed_claim: bool = True,
    coverage_judged: bool = True,
    launches: int | None = None,
    flags: tuple[str, ...] = (),
) -> Verdict:
    speedup = {}
    if low is not None:
        speedup["best"] = Speedup("best", median or low * 1.2, (low, (median or low) * 1.5))
    return Verdict(
        verdict=outcome,
        reasons=tuple(Reason(c, "why") for c in codes),
        task=FileRef("task.py", "0" * 64),
        solution=FileRef("solution.py", "1" * 64),
        correctness=None,
        timing=None,
        speedup=speedup,
        roofline=None,
        coverage=Coverage(coverage, custom_launches=launches)
        if (coverage is not None or launches is not None)
        else None,
        environment={},
        reward=0.0,
        flags=flags,
        claims=Claims(speed=speed_claim, coverage_judged=coverage_judged),
    )


def test_every_refusal_earns_zero():
    for code in (
        ReasonCode.MISMATCH,
        ReasonCode.STALE_OUTPUT,
        ReasonCode.TIMEOUT,
        ReasonCode.NO_CUSTOM_KERNEL,
    ):
        assert reward(verdict(Outcome.FAIL, (code,), low=3.0, coverage=1.0)) == 0.0


@pytest.mark.parametrize(
    "code",
    [
        ReasonCode.MACHINE_BUSY,
        ReasonCode.INTERNAL_ERROR,
        ReasonCode.TOO_LARGE,
        ReasonCode.ENVIRONMENT,
        ReasonCode.TASK_ERROR,
    ],
)
def test_an_error_that_is_not_the_solutions_is_not_judged(code):
    terms = reward_terms(verdict(Outcome.ERROR, (code,)))
    assert terms.reward is None and code.value in terms.why


def test_a_pass_on_the_gpu_earns_its_lower_bound_and_its_coverage():
    v = verdict(low=2.0, median=2.5, coverage=0.8)
    assert reward(v) == pytest.approx(0.5 + math.log(2.0) / math.log(4.0) + 0.5 * 0.8)


def test_the_speed_term_reads_the_lower_bound_never_the_point_estimate():
    lucky = verdict(low=0.95, median=3.0, coverage=1.0)  # a fast median the interval cannot show
    assert reward_terms(lucky).speed == 0.0
    assert reward_terms(verdict(low=16.0, coverage=1.0)).speed == 1.0  # capped at speed_cap


def test_a_withheld_speed_claim_carries_no_speed_term():
    interpreted = verdict(low=3.0, coverage=None, speed_claim=False, coverage_judged=False, launches=2)
    terms = reward_terms(interpreted)
    assert terms.speed == 0.0 and terms.coverage == 0.0 and terms.reward == 0.5
    assert "not a claim" in terms.why


def test_a_pass_without_work_in_its_own_kernels_earns_zero():
    plain = verdict(
        flags=("plain_torch: the solution defines no Triton or CUDA kernel",),
        launches=0,
        coverage_judged=False,
    )
    none_launched = verdict(launches=0, coverage_judged=False)
    assert reward(plain) == 0.0 and reward(none_launched) == 0.0


def test_the_weights_are_the_operators():
    v = verdict(low=4.0, coverage=0.5)
    assert reward(v, RewardWeights(correct=0.0, speed=2.0, coverage=0.0)) == pytest.approx(2.0)
    assert reward(v, RewardWeights(correct=1.0, speed=0.0, coverage=1.0)) == pytest.approx(1.5)


@pytest.mark.parametrize("bad", [{"correct": -1.0}, {"speed": float("nan")}, {"speed_cap": 1.0}])
def test_weights_that_make_no_sense_are_refused(bad):
    with pytest.raises(ValueError, match="reward"):
        RewardWeights(**bad)


def test_kernelgyms_coverage_fields_come_from_the_parents_profile():
    from dataclasses import replace

    from kernelproof.serve.kernelgym import _coverage_fields

    profiled = Coverage(
        0.7,
        kernels=(("my_kernel", "solution", 3.0), ("at::native::reduce_kernel", "aten", 1.0)),
        custom_fraction_raw=0.75,
    )
    fields = _coverage_fields(replace(verdict(), coverage=profiled))
    assert fields["num_custom_kernels"] == 1 and fields["num_total_kernels"] == 2
    assert fields["total_kernel_run_time_in_profiling_us"] == pytest.approx(4000.0)
    # Dr. Kernel's time coverage, custom / total, is the parent's share of whole durations
    ratio = (
        fields["custom_kernel_cuda_time_in_profiling_us"] / fields["total_kernel_run_time_in_profiling_us"]
    )
    assert ratio == pytest.approx(0.75)
    assert _coverage_fields(verdict(launches=1)) == {}  # the CPU: launches counted, no profile
