"""The output fingerprint: [<w, t>, ||t||] in float64, a large output projected a chunk at a time."""

from __future__ import annotations

import pytest
import torch

from kernelproof import inputs
from kernelproof.inputs import fingerprint, fingerprints


def _whole(t: torch.Tensor, w: torch.Tensor) -> list[float]:
    x = t.reshape(-1).to(torch.float64)
    return [float((x * w.to(torch.float64)).sum()), float(x.norm())]


def test_an_output_within_one_chunk_is_projected_on_the_seeds_own_direction():
    t = torch.randn(7, 11)
    want = _whole(t, inputs._projection(t.numel(), 42, t.device))
    assert fingerprint(t, 42) == want  # bit for bit: what fingerprints were before chunks existed


def test_a_large_output_is_projected_chunk_by_chunk_on_one_direction(monkeypatch):
    monkeypatch.setattr(inputs, "FINGERPRINT_CHUNK", 64)
    t = torch.randn(1000)
    parts = [
        inputs._projection(min(64, 1000 - at), inputs._chunk_seed(9, k), t.device)
        for k, at in enumerate(range(0, 1000, 64))
    ]
    want = _whole(t, torch.cat(parts))
    got = fingerprint(t, 9)
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert len({inputs._chunk_seed(9, k) for k in range(16)}) == 16  # no chunk repeats another's direction
    # the batch form agrees, and an error in the last chunk moves the projection
    assert fingerprints([t, t], 9) == [got, got]
    bad = t.clone()
    bad[-1] += 1.0
    assert abs(fingerprint(bad, 9)[0] - got[0]) > 1e-6


def test_an_infinity_in_any_chunk_makes_the_fingerprint_nan(monkeypatch):
    monkeypatch.setattr(inputs, "FINGERPRINT_CHUNK", 64)
    t = torch.randn(300)
    t[250] = float("-inf")
    dot, norm = fingerprint(t, 3)
    assert dot != dot and norm != norm  # NaN never equals the reference's


def test_a_nan_or_squares_past_float64_make_a_large_fingerprint_nan(monkeypatch):
    """Whatever is not finite in a chunked fingerprint is NaN, so no allowance can pass it: an
    infinite norm used to allow any difference (the allowance scales with the norm)."""
    monkeypatch.setattr(inputs, "FINGERPRINT_CHUNK", 64)
    t = torch.randn(300, dtype=torch.float64)
    t[7] = float("nan")
    assert all(v != v for v in fingerprint(t, 3))
    huge = torch.full((300,), 1e200, dtype=torch.float64)  # finite, but its squares are not
    dot, norm = fingerprint(huge, 3)
    assert dot != dot and norm != norm
    want = fingerprint(huge, 3)
    assert not abs(want[1] - norm) <= inputs.fingerprint_allowance(want, 1e-3)


def test_squares_past_float64_make_a_small_fingerprint_nan_alone_and_in_a_batch():
    """The small paths too: an infinite norm made the allowance infinite, and any fingerprint matched."""
    huge = torch.full((300,), 1e200, dtype=torch.float64)
    assert all(v != v for v in fingerprint(huge, 3))
    assert all(v != v for pair in fingerprints([huge, huge.clone()], 3) for v in pair)
    t = torch.randn(300, dtype=torch.float64)
    assert fingerprints([t, t.clone()], 3)[0] == pytest.approx(fingerprint(t, 3), rel=1e-12)


def test_inputs_are_compared_bit_for_bit_a_chunk_at_a_time(monkeypatch):
    from kernelproof.inputs import checksum, same_bits

    monkeypatch.setattr(inputs, "FINGERPRINT_CHUNK", 16)  # 128 bytes compared at once
    a = torch.randn(1000)
    assert same_bits(a, a.clone()) and same_bits(a[:0], a[:0].clone())
    b = a.clone()
    b[999] = -b[999]  # a change in the last chunk only
    assert not same_bits(a, b)
    zero = torch.zeros(300)
    assert not same_bits(zero, -zero)  # signed zeros differ in their bits
    assert checksum([a, 3]) == pytest.approx(float(a.double().sum()), rel=1e-12)


@pytest.mark.gpu
def test_on_a_gpu_a_large_output_is_projected_chunk_by_chunk_and_the_batch_agrees():
    t = torch.randn(inputs.FINGERPRINT_CHUNK + 1000, device="cuda")
    parts = [
        inputs._projection(inputs.FINGERPRINT_CHUNK, 5, t.device),
        inputs._projection(1000, inputs._chunk_seed(5, 1), t.device),
    ]
    want = _whole(t, torch.cat(parts))
    got = fingerprint(t, 5)
    assert got == pytest.approx(want, rel=1e-9)
    assert fingerprints([t, t.clone()], 5) == [got, got]
