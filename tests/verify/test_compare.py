"""Comparison against the float64 oracle: tolerances from the reference's own error; NaN never passes."""

from __future__ import annotations

import math

import pytest
import torch

from kernelproof.verify import fastpath
from kernelproof.verify import slices as slices_module
from kernelproof.verify.oracle_compare import compare, kernelbench_accepts, rel_norm_error, tolerance_for


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


def test_a_comparison_in_slices_says_exactly_what_one_pass_says(monkeypatch):
    from kernelproof.verify import oracle_compare as cmpmod

    g = torch.Generator().manual_seed(3)
    o = torch.randn(1000, 7, generator=g, dtype=torch.float64)
    r = o.float()
    c = r.clone()
    c[10, 3] += 1.0  # elementwise failures on both sides of slice boundaries
    c[600, 0] += 2.0
    c[999, 6] = float("nan")
    tol = cmpmod.tolerance_for(r, o, torch.float32)
    whole = cmpmod.compare(c, o, r, tol)
    monkeypatch.setattr(slices_module, "CHUNK_ELEMENTS", 97)
    sliced = cmpmod.compare(c, o, r, tol)
    assert (sliced.code, sliced.message, sliced.bad_elements) == (
        whole.code,
        whole.message,
        whole.bad_elements,
    )
    c[999, 6] = r[999, 6]
    whole = (cmpmod.tolerance_for(c, o, torch.float32), cmpmod.rel_norm_error(c, o))
    monkeypatch.setattr(slices_module, "CHUNK_ELEMENTS", 1 << 24)
    again = (cmpmod.tolerance_for(c, o, torch.float32), cmpmod.rel_norm_error(c, o))
    assert whole[0].rel_norm == pytest.approx(again[0].rel_norm) and whole[1] == pytest.approx(again[1])
    assert whole[0].atol == again[0].atol


MEMORY_CAPPED = """
import resource, sys, torch
from kernelproof.verify import oracle_compare as cmpmod
n = 2 * 2**20
o = torch.randn(n, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
r = o.float(); c = r.clone()
tol = cmpmod.Tolerance(1e-5, 1e-5, 1e-6, 1e-7)
from kernelproof.verify import slices
slices.CHUNK_ELEMENTS = int(sys.argv[1])
vm = int([l for l in open('/proc/self/status') if l.startswith('VmSize')][0].split()[1]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + 48 * 2**20, resource.RLIM_INFINITY))
try:
    print("ok" if cmpmod.compare(c, o, r, tol).passed else "failed")
except (MemoryError, RuntimeError):
    print("out of memory")
"""


def test_a_large_output_is_compared_within_a_small_memory_cap():
    """16 MB float64 outputs under a cap of 48 MB above what the process holds: six full-size
    float64 temporaries (96 MB) do not fit, slices of 256 Ki elements do."""
    import subprocess
    import sys

    def run(chunk: int) -> str:
        done = subprocess.run(
            [sys.executable, "-c", MEMORY_CAPPED, str(chunk)], capture_output=True, text=True
        )
        return done.stdout.strip()

    assert run(1 << 18) == "ok"
    assert run(1 << 30) == "out of memory"  # the same comparison in one pass: the cap holds


def _both_paths(monkeypatch, fn):
    """`fn()` with the comparisons' fast paths on and off (kernelproof/verify/fastpath.py)."""
    monkeypatch.setattr(fastpath, "ENABLED", False)
    full = fn()
    monkeypatch.setattr(fastpath, "ENABLED", True)
    return full, fn()


@pytest.mark.parametrize("case", ["close", "off_by_a_few", "wrong", "nan_in_one_slice", "inf_in_reference"])
def test_the_fast_path_gives_the_same_comparison_as_the_full_one(monkeypatch, case):
    monkeypatch.setattr(slices_module, "CHUNK_ELEMENTS", 1000)  # several slices, fast and full mixed
    g = torch.Generator().manual_seed(7)
    ref = torch.randn(4096, generator=g)
    orc = ref.double() + 1e-9 * torch.randn(4096, generator=g, dtype=torch.float64)
    cand = ref + 1e-7 * torch.randn(4096, generator=g)
    if case == "off_by_a_few":
        cand[[5, 2500, 4000]] += 1.0
    elif case == "wrong":
        cand = torch.randn(4096, generator=g)
    elif case == "nan_in_one_slice":
        cand[1500] = float("nan")
    elif case == "inf_in_reference":
        ref[3000] = float("inf")
        orc[3000] = float("inf")
        cand[3000] = float("inf")
    full_tol, fast_tol = _both_paths(monkeypatch, lambda: tolerance_for(ref, orc, torch.float32))
    assert full_tol == fast_tol
    full, fast = _both_paths(monkeypatch, lambda: compare(cand, orc, ref, full_tol))
    assert full == fast  # the same numbers, message and first bad indices
    assert full.passed == (case in ("close", "inf_in_reference"))
    full_err, fast_err = _both_paths(monkeypatch, lambda: rel_norm_error(cand, orc))
    assert full_err == fast_err or (math.isnan(full_err) and math.isnan(fast_err))


def test_one_element_outside_its_bound_is_found_when_the_normwise_error_passes(monkeypatch):
    """A passing comparison is read from the device once (kernelproof/verify/oracle_compare.py,
    `_finite_sums`); an element outside the elementwise bound in an output whose normwise error
    is within the tolerance still fails, on both paths alike, with its index."""
    monkeypatch.setattr(slices_module, "CHUNK_ELEMENTS", 1 << 12)  # 16 slices
    g = torch.Generator().manual_seed(3)
    ref = torch.randn(1 << 16, generator=g)
    orc = ref.double() + 1e-9 * torch.randn(1 << 16, generator=g, dtype=torch.float64)
    cand = ref.clone()
    tol = tolerance_for(ref, orc, torch.float32)
    cand[40_000] += 3 * tol.atol
    full, fast = _both_paths(monkeypatch, lambda: compare(cand, orc, ref, tol))
    assert full == fast
    assert not fast.passed and fast.code == "mismatch" and fast.bad_elements == 1, fast
    assert fast.rel_norm_err <= tol.rel_norm and "(40000,)" in fast.message, fast.message


class _HostReads(torch.overrides.TorchFunctionMode):
    """Counts the reads of a tensor's values back to the host (each waits for a GPU)."""

    READS = {torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__bool__, torch.Tensor.__float__}

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.reads += func in self.READS
        return func(*args, **(kwargs or {}))


def test_a_passing_comparison_reads_the_device_once_however_many_slices(monkeypatch):
    """On a GPU every read back waits for the device: a 6.4 GB output is 96 slices, and the
    slice-by-slice path read four to six figures from each. The numbers are the same either way."""
    monkeypatch.setattr(slices_module, "CHUNK_ELEMENTS", 1 << 12)
    g = torch.Generator().manual_seed(5)
    ref = torch.randn(1 << 16, generator=g)
    orc = ref.double() + 1e-9 * torch.randn(1 << 16, generator=g, dtype=torch.float64)
    cand = ref + 1e-7 * torch.randn(1 << 16, generator=g)
    tol = tolerance_for(ref, orc, torch.float32)
    counted = []
    for fn in (
        lambda: tolerance_for(ref, orc, torch.float32),
        lambda: compare(cand, orc, ref, tol),
        lambda: rel_norm_error(cand, orc),
    ):
        full, fast = _both_paths(monkeypatch, fn)
        assert full == fast
        with _HostReads() as mode:
            fn()
        counted.append(mode.reads)
    assert counted == [1, 1, 1], counted
    monkeypatch.setattr(fastpath, "ENABLED", False)
    with _HostReads() as mode:
        compare(cand, orc, ref, tol)
    assert mode.reads >= 16, mode.reads  # the full path: at least one a slice
