"""Launch accounting weighs work, not launches: each kernel counts its duration above the launch floor.

A Triton kernel that does all the real work followed by a small ATen epilogue (sum 125 partial
sums, divide once) failed low_kernel_coverage on whole durations: the epilogue's launch-bound
microseconds outweighed it. Above a synthetic floor here (the GPU measures its own), it passes;
real work split into many near-floor ATen kernels still fails.
"""

from __future__ import annotations

from kernelproof.evaluate.timing import coverage_reason
from kernelproof.measure.coverage import COVERAGE_MIN, shares
from kernelproof.verdict import Coverage

FLOOR_US = 2.5  # a synthetic launch floor (an H200 measures its own: kernelproof/measure/floor.py)


def _coverage(kernels, policy="strict", floor_us=FLOOR_US) -> Coverage:
    s = shares(kernels, floor_us)
    other = "library-ok" if policy == "strict" else "strict"
    return Coverage(
        s.above_floor[policy], tuple(kernels), policy, "", s.raw[policy], floor_us, s.above_floor[other]
    )


PARTIAL_SUMS = [
    ("_partial_sums_kernel", "solution", 0.010),
    ("sum_kernel", "aten", 0.003),
    ("div_kernel", "aten", 0.003),
]


def test_a_partial_sums_kernel_with_a_small_aten_epilogue_passes_above_the_floor():
    whole = _coverage(PARTIAL_SUMS, floor_us=None)
    assert whole.custom_fraction < COVERAGE_MIN["strict"]  # what failed before: 10 of 16 us
    assert coverage_reason(whole) is not None
    above = _coverage(PARTIAL_SUMS)
    assert above.custom_fraction > COVERAGE_MIN["strict"] and coverage_reason(above) is None
    assert above.custom_fraction_raw < COVERAGE_MIN["strict"]  # both figures are reported


def test_real_work_split_into_many_near_floor_aten_kernels_still_fails():
    kernels = [("decoy_kernel", "solution", 0.020)] + [(f"add_{i}", "aten", 0.003) for i in range(200)]
    cov = _coverage(kernels)
    assert cov.custom_fraction < 0.2
    reason = coverage_reason(cov)
    assert reason is not None and reason.code.value == "low_kernel_coverage"


def test_no_launch_of_its_own_is_no_custom_kernel_whatever_the_floor():
    cov = _coverage([("gemm_sm90", "library", 0.5), ("relu", "aten", 0.004)])
    assert cov.custom_fraction == 0.0 and coverage_reason(cov).code.value == "no_custom_kernel"


def test_kernels_all_at_the_floor_fall_back_to_whole_durations():
    s = shares([("tiny_kernel", "solution", 0.0025), ("copy", "aten", 0.0025)], FLOOR_US)
    assert s.above_floor == s.raw


def test_a_strict_failure_that_library_ok_accepts_says_so():
    gemm_epilogue = [("sm90_xmma_gemm", "library", 1.0), ("_bias_gelu_kernel", "solution", 0.2)]
    reason = coverage_reason(_coverage(gemm_epilogue, "strict"))
    assert reason.code.value == "low_kernel_coverage" and "--policy library-ok" in reason.message
    assert coverage_reason(_coverage(gemm_epilogue, "library-ok")) is None
