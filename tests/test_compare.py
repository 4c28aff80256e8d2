"""Comparison against the float64 oracle: tolerances from the reference's own error; NaN never passes."""

from __future__ import annotations

import math

import torch

from kernelproof.verify.compare import compare, kernelbench_accepts, tolerance_for


def _case(n=4096, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(64, 64, generator=g, dtype=torch.float64)
    b = torch.randn(64, 64, generator=g, dtype=torch.float64)
    oracle = a @ b
    ref = a.float() @ b.float()
    return a, b, oracle, ref


def test_an_honest_fp32_result_with_another_summation_order_passes():
    a, b, oracle, ref = _case()
    tol = tolerance_for(ref, oracle, torch.float32)
    cand = a.float().T.contiguous().T @ b.float()  # same math, another layout
    assert compare(cand, oracle, ref, tol).passed


def test_a_bf16_result_under_an_fp32_contract_is_a_mismatch():
    a, b, oracle, ref = _case()
    tol = tolerance_for(ref, oracle, torch.float32)
    cand = (a.bfloat16() @ b.bfloat16()).float()
    cmp = compare(cand, oracle, ref, tol)
    assert not cmp.passed and cmp.code == "mismatch"
    assert cmp.rel_norm_err > 100 * tol.ref_rel_norm_err


def test_nan_in_the_candidate_never_passes():
    _, _, oracle, ref = _case()
    tol = tolerance_for(ref, oracle, torch.float32)
    cand = ref.clone()
    cand[3, 5] = float("nan")
    cmp = compare(cand, oracle, ref, tol)
    assert not cmp.passed and cmp.code == "nonfinite" and "(3, 5)" in cmp.message


def test_nan_passes_only_where_the_reference_has_nan_at_the_same_index():
    ref = torch.tensor([1.0, float("nan"), float("inf")])
    oracle = ref.double()
    tol = tolerance_for(ref, oracle, torch.float32)
    assert compare(ref.clone(), oracle, ref, tol).passed
    assert not compare(torch.tensor([1.0, 2.0, float("inf")]), oracle, ref, tol).passed
    assert not compare(torch.tensor([1.0, float("nan"), -float("inf")]), oracle, ref, tol).passed


def test_a_single_wrong_element_fails_the_elementwise_bound():
    _, _, oracle, ref = _case()
    tol = tolerance_for(ref, oracle, torch.float32)
    cand = ref.clone()
    cand[0, 0] += 1e-2 * cand.abs().max()
    cmp = compare(cand, oracle, ref, tol)
    assert not cmp.passed and cmp.bad_elements >= 1


def test_shape_and_dtype_are_checked_before_values():
    _, _, oracle, ref = _case()
    tol = tolerance_for(ref, oracle, torch.float32)
    assert compare(ref[:2], oracle, ref, tol).code == "wrong_shape"
    assert compare(ref.double(), oracle, ref, tol).code == "wrong_dtype"


def test_exact_reference_ops_still_admit_a_few_ulps():
    x = torch.randn(1000, dtype=torch.float64)
    oracle = torch.relu(x)
    ref = torch.relu(x.float())
    tol = tolerance_for(ref, oracle, torch.float32)
    assert tol.ref_rel_norm_err < 1e-7
    assert compare(ref * (1 + 2**-22), oracle, ref, tol).passed
    assert math.isclose(tol.rel_norm, 16 * torch.finfo(torch.float32).eps)


def test_kernelbench_rule_accepts_what_its_loose_tolerance_accepts():
    _, _, oracle, ref = _case()
    assert kernelbench_accepts(ref + 1e-5, ref)
    assert not kernelbench_accepts(ref + 1.0, ref)
