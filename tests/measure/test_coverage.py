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


# -- data movement and a small epilogue set aside (classify), every decoy still caught -------------
from kernelproof.measure.coverage import classify  # noqa: E402

OUT_BYTES = 4 * 2**20  # the outputs' size: 4 MiB
FLOOR = 2.0  # us


def _decide(rows, output_bytes=OUT_BYTES, policy="strict", floor_us=FLOOR):
    return _coverage(classify(rows, output_bytes, floor_us), policy, floor_us)


def _fails(cov) -> bool:
    return coverage_reason(cov) is not None


def test_a_cuda_graph_replay_returning_a_clone_passes():
    rows = [
        ("_fused_graph_kernel", "solution", 0.012, -1),
        ("Memcpy DtoD (Device -> Device)", "aten", 0.010, OUT_BYTES),
    ]
    cov = _decide(rows)
    assert not _fails(cov) and cov.custom_fraction == 1.0
    assert cov.custom_fraction_raw < COVERAGE_MIN["strict"]  # the raw figure counts the copy as ATen


def test_a_memset_before_an_atomic_reduction_is_movement():
    rows = [("Memset (Device)", "aten", 0.004, 4096), ("_atomic_sum_kernel", "solution", 0.006, -1)]
    assert not _fails(_decide(rows))


def test_copies_beyond_the_outputs_size_or_of_unknown_size_are_counted():
    big = [("_k", "solution", 0.010, -1), ("Memcpy DtoD (Device -> Device)", "aten", 0.030, 3 * OUT_BYTES)]
    assert _fails(_decide(big))
    unknown = [("_k", "solution", 0.010, -1), ("Memcpy DtoD (Device -> Device)", "aten", 0.030, -1)]
    assert _fails(_decide(unknown))


def test_a_copy_the_profiler_gave_no_bytes_is_sized_from_the_op_that_launched_it():
    """torch 2.11's profiler on an H200 recorded a clone's device-to-device copy without bytes: the
    copy is sized from the launching op's largest input (elements) times the task's element size."""
    copy = "Memcpy DtoD (Device -> Device)"
    fits = OUT_BYTES // 4  # elements of the outputs' size in fp32
    graph = [
        ("_affine", "solution", 0.004, -1, -1),
        (copy, "aten", 0.003, -1, fits),
        (copy, "aten", 0.003, -1, fits),
    ]
    rows = classify(graph, 2 * OUT_BYTES, FLOOR, 0, 4)
    assert [o for _, o, _ in rows] == ["solution", "movement", "movement"]
    assert not _fails(_coverage(rows, "strict", FLOOR))
    # beyond the budget, an op the worker could not size, or no element size known: counted
    assert "movement" not in [o for _, o, _ in classify(graph, OUT_BYTES // 2, FLOOR, 0, 4)]
    unsized = [("_affine", "solution", 0.004, -1, -1), (copy, "aten", 0.003, -1, 1 << 62)]
    assert "movement" not in [o for _, o, _ in classify(unsized, 2 * OUT_BYTES, FLOOR, 0, 4)]
    assert "movement" not in [o for _, o, _ in classify(graph, 2 * OUT_BYTES, FLOOR, 0, 0)]


def test_decoy_host_computation_copied_up_fails():
    rows = [
        ("Memcpy HtoD (Pageable -> Device)", "aten", 0.050, OUT_BYTES),
        ("_touch_kernel", "solution", 0.002, -1),
    ]
    assert _fails(_decide(rows))


def test_partial_sums_with_an_aten_reduction_pass_at_the_largest_shape():
    rows = [
        ("_partial_sums_kernel", "solution", 0.030, -1),
        ("reduce_kernel", "aten", 0.0023, -1),  # the reduction of a few hundred partial sums
        ("mul_scalar_kernel", "aten", 0.0021, -1),
    ]
    cov = _decide(rows)
    assert not _fails(cov) and cov.custom_fraction == 1.0
    assert [o for _, o, _ in classify(rows, OUT_BYTES, FLOOR)] == ["solution", "epilogue", "epilogue"]


def test_decoy_one_element_kernel_then_softmax_fails_at_any_size():
    large = [("_one_element_kernel", "solution", 0.0021, -1), ("softmax_warp_forward", "aten", 0.050, -1)]
    tiny = [("_one_element_kernel", "solution", 0.0021, -1), ("softmax_warp_forward", "aten", 0.0030, -1)]
    assert _fails(_decide(large)) and _fails(_decide(tiny))


def test_decoy_one_element_kernel_launched_many_times_gets_no_epilogue():
    rows = [("_one_element_kernel", "solution", 0.0021, -1)] * 20 + [
        ("softmax_warp_forward", "aten", 0.0035, -1)
    ]
    assert "epilogue" not in [o for _, o, _ in classify(rows, OUT_BYTES, FLOOR)]
    assert _fails(_decide(rows))


def test_decoy_copy_kernel_then_the_real_op_in_aten_fails():
    rows = [("_copy_kernel", "solution", 0.020, -1), ("softmax_warp_forward", "aten", 0.020, -1)]
    assert _fails(_decide(rows))


def test_decoys_with_no_kernel_of_their_own_fail():
    fallback = [("softmax_warp_forward", "aten", 0.020, -1)]  # try/except fallback, plain PyTorch
    assert coverage_reason(_decide(fallback)).code.value == "no_custom_kernel"


def test_many_near_floor_aten_kernels_are_not_an_epilogue():
    rows = [("_k", "solution", 0.040, -1)] + [(f"add_{i}", "aten", 0.0025, -1) for i in range(5)]
    assert "epilogue" not in [o for _, o, _ in classify(rows, OUT_BYTES, FLOOR)]


def test_without_a_floor_no_epilogue_is_set_aside():
    rows = [("_k", "solution", 0.030, -1), ("reduce_kernel", "aten", 0.0023, -1)]
    assert [o for _, o, _ in classify(rows, OUT_BYTES, None)] == ["solution", "aten"]


def test_the_largest_timed_shape_decides_and_every_shape_is_reported():
    from kernelproof.evaluate.timing import _deciding_coverage

    small = Coverage(0.4, (), "strict", "2 device activities, 0.005 ms GPU time", 0.3, FLOOR, 0.4)
    large = Coverage(0.95, (), "strict", "2 device activities, 0.300 ms GPU time", 0.9, FLOOR, 0.95)
    cov, reason = _deciding_coverage([("small", small), ("default", large)])
    assert reason is None and cov.custom_fraction == 0.95
    assert "decided at shape 'default'" in cov.note and "small: 30% raw, 40% deciding" in cov.note


INPUT_ELEMS = 16 * 8192  # row_mean's default shape
SMALL = INPUT_ELEMS // 16


def test_partial_sums_at_a_launch_bound_shape_pass_by_the_epilogues_input_size():
    """The H200 measurement: the ATen reduce of the partial sums took longer than the solution's kernel."""
    rows = [
        ("_partial_sums_kernel", "solution", 0.0030, -1, -1),
        ("reduce_kernel", "aten", 0.0023, -1, 16 * 32),  # aten::sum over the (16, 32) partial sums
        ("div_kernel", "aten", 0.0021, -1, 16),  # a scalar division of the 16 sums
    ]
    cov = _coverage(classify(rows, OUT_BYTES, FLOOR, SMALL), "strict", FLOOR)
    assert not _fails(cov) and cov.custom_fraction == 1.0
    assert cov.custom_fraction_raw < 0.5  # the raw figure, reported beside it, is what failed before


def test_decoy_one_element_kernel_then_an_op_over_the_inputs_fails_whatever_its_time():
    rows = [
        ("_one_element_kernel", "solution", 0.0021, -1, -1),
        ("softmax_warp_forward", "aten", 0.0030, -1, INPUT_ELEMS),
    ]
    assert _fails(_coverage(classify(rows, OUT_BYTES, FLOOR, SMALL), "strict", FLOOR))


def test_decoy_host_computation_with_a_small_copy_up_fails():
    rows = [
        ("Memcpy DtoH (Device -> Pageable)", "aten", 0.040, INPUT_ELEMS * 4, INPUT_ELEMS),
        ("_one_element_kernel", "solution", 0.0021, -1, -1),
        ("Memcpy HtoD (Pageable -> Device)", "aten", 0.0025, 64, 16),
    ]
    origins = [o for _, o, _ in classify(rows, OUT_BYTES, FLOOR, SMALL)]
    assert origins == ["aten", "solution", "aten"]
    assert _fails(_coverage(classify(rows, OUT_BYTES, FLOOR, SMALL), "strict", FLOOR))


def test_an_op_over_a_list_of_tensors_or_without_a_known_size_is_not_small():
    rows = [
        ("_k", "solution", 0.0030, -1, -1),
        ("cat_kernel", "aten", 0.0030, -1, 1 << 62),
        ("x", "aten", 0.003, -1, -1),
    ]
    assert "epilogue" not in [o for _, o, _ in classify(rows, OUT_BYTES, FLOOR, SMALL)]
