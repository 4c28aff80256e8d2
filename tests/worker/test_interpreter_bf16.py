"""Triton's interpreter computes bf16 as a GPU does once the worker's fix is in (I11).

Unpatched, the interpreter (3.x) multiplies, adds, compares and ``tl.dot``s bf16 blocks as their raw
16-bit integer patterns (a bf16 product kernel gives NaN and values near 1e38) and truncates
float32 -> bf16: an honest bf16 kernel failed on the CPU as the solution's ``mismatch``. With
:func:`kernelproof.worker.interpreter_bf16.install` (what the candidate's worker installs on the
CPU) every bf16 operation runs in float32 and rounds to nearest even, bit for bit torch's bf16.
Installing it in this process changes bf16 arithmetic only, and only to what the workers compute.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernelproof.worker import interpreter_bf16

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@pytest.fixture(scope="module", autouse=True)
def patched():
    assert interpreter_bf16.install()


@triton.jit
def _mul(a, b, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, tl.load(a + i, mask=m) * tl.load(b + i, mask=m), mask=m)


@triton.jit
def _widened_mul(a, b, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(a + i, mask=m).to(tl.float32)
    y = tl.load(b + i, mask=m).to(tl.float32)
    tl.store(out + i, (x * y).to(tl.bfloat16), mask=m)


@triton.jit
def _dot(a, b, out, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    x = tl.load(a + r[:, None] * BLOCK + r[None, :])
    y = tl.load(b + r[:, None] * BLOCK + r[None, :])
    tl.store(out + r[:, None] * BLOCK + r[None, :], tl.dot(x, y))


@triton.jit
def _values(a, b, out, total, largest, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(a + i)
    y = tl.load(b + i)
    tl.store(out + i, tl.maximum(tl.where(x > y, x - y, -x), y))
    tl.store(total, tl.sum(x.to(tl.float32), axis=0))
    tl.store(largest, tl.max(x, axis=0))


def _pair(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(n, generator=g).to(torch.bfloat16),
        (torch.randn(n, generator=g) * 3).to(torch.bfloat16),
    )


def test_float32_to_bf16_rounds_to_nearest_even_bit_for_bit_as_torch():
    g = torch.Generator().manual_seed(1)
    values = torch.cat(
        [
            torch.randn(4096, generator=g) * 10 ** torch.randint(-30, 30, (4096,), generator=g).float(),
            torch.tensor([0.0, -0.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 3.3895e38, float("inf"), float("-inf")]),
            torch.tensor([1e-40, -3e-39]),  # subnormals
        ]
    )
    want = values.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    got = interpreter_bf16.to_bf16(values.numpy())
    assert np.array_equal(got, want)
    assert np.isnan(interpreter_bf16.to_float32(interpreter_bf16.to_bf16(np.array([np.nan], np.float32))))[0]


def test_a_bf16_product_kernel_computes_torchs_bf16_product():
    a, b = _pair(1000)
    out = torch.empty_like(a)
    _mul[(1,)](a, b, out, a.numel(), BLOCK=1024)
    assert torch.equal(out, a * b)


def test_a_product_rounded_from_float32_to_bf16_is_rounded_not_truncated():
    a, b = _pair(1000, seed=2)
    out = torch.empty_like(a)
    _widened_mul[(1,)](a, b, out, a.numel(), BLOCK=1024)
    assert torch.equal(out, (a.float() * b.float()).to(torch.bfloat16))


def test_a_bf16_dot_accumulates_the_values_in_float32():
    g = torch.Generator().manual_seed(3)
    a = torch.randn(16, 16, generator=g).to(torch.bfloat16)
    b = torch.randn(16, 16, generator=g).to(torch.bfloat16)
    out = torch.empty(16, 16, dtype=torch.float32)
    _dot[(1,)](a, b, out, BLOCK=16)
    torch.testing.assert_close(out, a.float() @ b.float(), rtol=1e-5, atol=1e-5)


def test_bf16_comparisons_negation_reductions_follow_values_not_bit_patterns():
    a, b = _pair(64, seed=4)  # half of them negative: sign-magnitude patterns order them wrongly
    out = torch.empty_like(a)
    total = torch.empty(1, dtype=torch.float32)
    largest = torch.empty(1, dtype=torch.bfloat16)
    _values[(1,)](a, b, out, total, largest, BLOCK=64)
    assert torch.equal(out, torch.maximum(torch.where(a > b, a - b, -a), b))
    assert torch.equal(largest, a.max().reshape(1))
    torch.testing.assert_close(total, a.float().sum().reshape(1), rtol=1e-5, atol=1e-5)


def test_float32_kernels_are_left_to_the_interpreter_as_they_were():
    a, b = (t.float() for t in _pair(1000, seed=5))
    out = torch.empty_like(a)
    _mul[(1,)](a, b, out, a.numel(), BLOCK=1024)
    assert torch.equal(out, a * b)
