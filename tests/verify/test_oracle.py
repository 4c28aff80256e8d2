"""The float64 oracle on KernelBench-shaped models, and the reference's randomness versus its noise."""

from __future__ import annotations

import math
import random

import pytest
import torch

from kernelproof.verify.oracle import (
    Noise,
    convert_attributes,
    decide_randomness,
    oracle_scope,
    plain_attributes,
    spread,
)
from kernelproof.verify.oracle_compare import tolerance_for


class WithAttributes(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.h0 = torch.randn(2, 3)
        self.pairs = [torch.ones(3), (torch.zeros(3), 7)]
        self.table = {"m": torch.full((3,), 2.0), "ids": torch.arange(3)}


def test_plain_tensor_attributes_are_converted_recursively_but_integers_keep_their_dtype():
    m = WithAttributes()
    m.sub = WithAttributes()
    assert convert_attributes(m, torch.float64, torch.device("cpu")) == 10
    for mod in (m, m.sub):
        assert mod.h0.dtype == torch.float64
        assert mod.pairs[0].dtype == torch.float64 and mod.pairs[1][0].dtype == torch.float64
        assert mod.pairs[1][1] == 7
        assert mod.table["m"].dtype == torch.float64 and mod.table["ids"].dtype == torch.int64
    assert m.lin.weight.dtype == torch.float32  # parameters are the caller's to convert
    assert set(plain_attributes(m)) == {"h0", "sub.h0"}


def test_factories_without_a_dtype_make_float64_inside_the_oracle_scope_only():
    with oracle_scope():
        made = [
            torch.ones(2),
            torch.randn(2),
            torch.tensor([1.5]),
            torch.arange(0.0, 1.0, 0.5),
            torch.full((1,), 1.0),
        ]
        ints = torch.arange(3)
        explicit = torch.zeros(2, dtype=torch.float32)
    assert all(t.dtype == torch.float64 for t in made)
    assert ints.dtype == torch.int64 and explicit.dtype == torch.float32
    assert torch.ones(2).dtype == torch.float32  # outside the scope, nothing changed


def test_random_factories_draw_the_reference_values_and_are_only_widened():
    torch.manual_seed(3)
    ref = torch.randn(5)
    torch.manual_seed(3)
    with oracle_scope():
        orc = torch.randn(5)
    assert orc.dtype == torch.float64 and torch.equal(orc, ref.double())


def test_casts_back_to_float32_keep_the_oracle_in_float64():
    x = torch.randn(3, dtype=torch.float64)
    with oracle_scope():
        assert x.float().dtype == torch.float64
        assert x.to(torch.float32).dtype == torch.float64
        assert x.to("cpu", torch.float32).dtype == torch.float64
        assert x.to(torch.float16).dtype == torch.float16  # only float32 is held


def test_a_model_that_makes_a_mask_in_forward_runs_as_a_float64_oracle():
    class Masked(torch.nn.Module):
        def forward(self, x):
            return torch.matmul(x, torch.tril(torch.ones(x.shape[-1], x.shape[-1])))

    x = torch.randn(4, 4, dtype=torch.float64)
    with pytest.raises(RuntimeError):
        Masked()(x)
    with oracle_scope():
        assert Masked()(x).dtype == torch.float64


def _runs(noise_rel: float, rng_dependent: bool):
    """A fake reference: fixed output plus last-bit noise that ignores the seed, or a mask drawn from it."""
    base = torch.randn(1000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    jitter = random.Random(1)

    def run(seed: int):
        out = base * (1 + noise_rel * torch.tensor([jitter.uniform(-1, 1) for _ in range(1000)]))
        if rng_dependent:
            keep = torch.rand(1000, generator=torch.Generator().manual_seed(seed)) > 0.5
            out = out * keep * 2
        return [out.float()]

    return run


def test_last_bit_noise_between_runs_is_rounding_not_randomness():
    r = decide_randomness(_runs(1e-7, False), tolerance_rel_norm=1e-5)
    assert not r.random
    assert 0 < r.same_seed.rel_norm < 1e-5 and all(0 < s < 1e-5 for s in r.other_seed_rel_norm)
    assert r.noise.rel_norm == max(r.same_seed.rel_norm, *r.other_seed_rel_norm)


def test_outputs_that_depend_on_the_seed_are_random_and_identical_under_one_seed():
    r = decide_randomness(_runs(0.0, True), tolerance_rel_norm=1e-5)
    assert r.random and r.same_seed.rel_norm == 0.0
    assert len(r.other_seed_rel_norm) == 2 and min(r.other_seed_rel_norm) > 0.5


def test_one_pair_beyond_the_tolerance_is_not_enough_to_call_a_reference_random():
    calls = {"n": 0}
    base = torch.randn(100)

    def run(seed: int):
        calls["n"] += 1
        return [base * 3] if seed == 2 else [base]  # a single outlying run

    r = decide_randomness(run, tolerance_rel_norm=1e-3)
    assert not r.random and max(r.other_seed_rel_norm) > 1 and min(r.other_seed_rel_norm) == 0.0


def test_the_reference_noise_widens_the_tolerance_normwise_and_elementwise():
    ref = torch.randn(256)
    orc = ref.double()
    quiet = tolerance_for(ref, orc, torch.float32)
    noisy = tolerance_for(ref, orc, torch.float32, Noise(rel_norm=1e-4, abs_over_rms=1e-3))
    assert noisy.rel_norm == pytest.approx(16 * 1e-4) and noisy.rel_norm > quiet.rel_norm
    assert noisy.atol > quiet.atol and noisy.ref_rel_norm_err == pytest.approx(1e-4)


def test_spread_of_outputs_that_disagree_on_where_they_are_finite_is_infinite():
    a = [torch.tensor([1.0, float("nan")])]
    b = [torch.tensor([1.0, 2.0])]
    assert math.isinf(spread(a, b).rel_norm)


def test_spread_in_slices_says_what_one_pass_says(monkeypatch):
    """Slices keep the run-to-run check's float64 temporaries small; the figures stay the same."""
    from kernelproof.verify import slices as slices_module
    from kernelproof.verify.oracle import spread

    g = torch.Generator().manual_seed(5)
    x = torch.randn(37, 53, generator=g)
    y = x + 1e-6 * torch.randn(37, 53, generator=g)
    x[3, 4] = y[3, 4] = float("inf")
    x[30, 1] = y[30, 1] = float("nan")
    whole = spread([x, x[:5]], [y, y[:5]])
    monkeypatch.setattr(slices_module, "CHUNK_ELEMENTS", 97)  # several slices, the masked ones among them
    sliced = spread([x, x[:5]], [y, y[:5]])
    assert sliced.rel_norm == pytest.approx(whole.rel_norm, rel=1e-12) and whole.rel_norm > 0
    assert sliced.abs_over_rms == pytest.approx(whole.abs_over_rms, rel=1e-12)
    finite = torch.isfinite(x)
    x64, d64 = x[finite].double(), (x[finite].double() - y[finite].double())
    assert whole.rel_norm == pytest.approx(float(d64.norm() / x64.norm()), rel=1e-9)  # the plain formula
    y[36, 52] = float("inf")  # finite in one run only, in the last slice
    assert math.isinf(spread([x], [y]).rel_norm)
