"""Comparison against the float64 oracle, with tolerances set by the precision contract.

The tolerance is not a fixed 1e-2. For each case the reference itself runs in the contract's
precision and in float64 (the oracle); its own error against the oracle says how far an honest
implementation in that precision lands. A candidate passes when its error is within K times the
reference's, floored at C x eps(dtype) so exact reference ops (ReLU, copies) still admit a
different but correct rounding. An error above the contract that a lower precision explains
(TF32, bf16, fp16 references computed on the same case) is ``precision_downgrade``.

Calibration (docs/verdict.md): on the legit zoo and every example, honest fp32 kernels land
within 1-4x the reference's normwise error; split-precision (3xTF32) matmuls within ~4x; TF32
lands 100-1000x above. K = 16 leaves room for reordered reductions and fast exp/erf while
keeping TF32, bf16 and fp16 out by an order of magnitude.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernelproof.verify import fastpath
from kernelproof.verify.oracle import NO_NOISE, Noise
from kernelproof.verify.slices import slices

K_NORM = 16.0  # normwise: candidate error <= K_NORM x reference error ...
C_NORM = 16.0  # ... floored at C_NORM x eps(dtype)
K_ELEM = 16.0  # elementwise: |c - o| <= K_ELEM x (max reference error + eps(dtype) * rms(oracle)) + rtol |o|
DOWNGRADE_BAND = (
    4.0  # an error within 1/4x..4x of a lower precision's error on the same case is that precision
)
KERNELBENCH_TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}  # KernelBench v0.2


@dataclass(frozen=True)
class Tolerance:
    rel_norm: float  # normwise relative tolerance
    atol: float  # elementwise absolute tolerance
    rtol: float  # elementwise relative tolerance
    ref_rel_norm_err: float  # the reference's own normwise error


@dataclass(frozen=True)
class Comparison:
    passed: bool
    code: str  # "" when passed; else wrong_shape | wrong_dtype | nonfinite | mismatch
    message: str
    rel_norm_err: float
    max_abs_err: float
    bad_elements: int


def eps(dtype: torch.dtype) -> float:
    return float(torch.finfo(dtype).eps) if dtype.is_floating_point else 0.0


def _finite_part(x: torch.Tensor, o: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the oracle, x - the oracle) in float64 over the elements where the oracle is finite (zero
    elsewhere). Where every element is finite the masks change nothing and are skipped (fastpath)."""
    o = o.to(torch.float64)
    if fastpath.ENABLED and bool(torch.isfinite(o).all()):
        return o, x - o  # computed in float64: the oracle widens x
    x = x.to(torch.float64)
    finite = torch.isfinite(o)
    o0 = torch.where(finite, o, torch.zeros_like(o))
    return o0, torch.where(finite, x, torch.zeros_like(x)) - o0


def tolerance_for(
    reference: torch.Tensor, oracle: torch.Tensor, dtype: torch.dtype, noise: Noise = NO_NOISE
) -> Tolerance:
    """The contract tolerance for one case, from the reference's own error against the oracle.

    `noise`: how far the reference differs from itself between runs on one seed (nondeterministic
    kernels): part of its own error, normwise and, scaled to this case's output, elementwise."""
    read = _finite_sums(reference, oracle, largest=True) if fastpath.ENABLED else None
    if read is not None:
        o_sq, d_sq, max_ref_abs = read[:3]
    else:
        o_sq = d_sq = max_ref_abs = 0.0
        for _, (r, o) in slices(reference, oracle, widen=not fastpath.ENABLED):
            o0, d = _finite_part(r, o)
            o_sq += float((o0 * o0).sum())
            d_sq += float((d * d).sum())
            if d.numel():
                max_ref_abs = max(max_ref_abs, float(d.abs().max()))
    onorm = o_sq**0.5
    ref_err = d_sq**0.5 / onorm if onorm > 0 else 0.0
    e = eps(dtype) if dtype.is_floating_point else 0.0
    rms = onorm / max(1, oracle.numel()) ** 0.5
    ref_err = max(ref_err, noise.rel_norm)
    max_ref_abs = max(max_ref_abs, noise.abs_over_rms * rms)
    return Tolerance(
        rel_norm=max(K_NORM * ref_err, C_NORM * e),
        atol=K_ELEM * (max_ref_abs + e * rms),
        rtol=K_ELEM * e,
        ref_rel_norm_err=ref_err,
    )


def rel_norm_error(candidate: torch.Tensor, oracle: torch.Tensor) -> float:
    """||candidate - oracle|| / ||oracle|| over the elements where the oracle is finite."""
    read = _finite_sums(candidate, oracle) if fastpath.ENABLED else None
    if read is not None:
        o_sq, d_sq = read[:2]
    else:
        o_sq = d_sq = 0.0
        for _, (c, o) in slices(candidate, oracle, widen=not fastpath.ENABLED):
            o0, d = _finite_part(c, o)
            o_sq += float((o0 * o0).sum())
            d_sq += float((d * d).sum())
    if o_sq == 0:
        return 0.0 if d_sq == 0 else float("inf")
    return d_sq**0.5 / o_sq**0.5


def compare(
    candidate: torch.Tensor, oracle: torch.Tensor, reference: torch.Tensor, tol: Tolerance
) -> Comparison:
    """Every element, every case: NaN can never pass (I6 shape/dtype checked first)."""
    if tuple(candidate.shape) != tuple(reference.shape):
        return Comparison(
            False,
            "wrong_shape",
            f"output shape {tuple(candidate.shape)}, expected {tuple(reference.shape)}",
            0,
            0,
            0,
        )
    if candidate.dtype != reference.dtype:
        return Comparison(
            False, "wrong_dtype", f"output dtype {candidate.dtype}, expected {reference.dtype}", 0, 0, 0
        )
    if not candidate.dtype.is_floating_point:
        bad = int((candidate != reference).sum())
        ok = bad == 0
        return Comparison(
            ok, "" if ok else "mismatch", "" if ok else f"{bad} elements differ", 0.0, float(bad), bad
        )
    if fastpath.ENABLED:
        passed = _passed_on_the_device(candidate, oracle, reference, tol)
        if passed is not None:
            return passed
    n_nonfinite = n_bad = 0
    first_nonfinite: list[int] = []
    first_bad: list[int] = []
    o_sq = d_sq = 0.0
    max_abs = 0.0
    all_finite = True
    for start, (c, o, r) in slices(candidate, oracle, reference, widen=not fastpath.ENABLED):
        if fastpath.ENABLED:
            o = o.to(torch.float64)
            fast = _finite_sums(c, o, r, tol)  # this slice alone, read back once
            if fast is not None:  # every element finite: the same numbers as the full path below
                s_o, s_d, s_max, bad = fast
                o_sq, d_sq, max_abs = o_sq + s_o, d_sq + s_d, max(max_abs, s_max)
                if k := int(bad):
                    n_bad += k
                    elem_bad = ~((c - o).abs() <= tol.atol + tol.rtol * o.abs())
                    first_bad += _first_flat(elem_bad, start, 3 - len(first_bad))
                continue
            c, r = c.to(torch.float64), r.to(torch.float64)
        # Non-finite values pass only where the reference has the same value at the same index.
        c_nan, r_nan = torch.isnan(c), torch.isnan(r)
        c_inf, r_inf = torch.isinf(c), torch.isinf(r)
        nonfinite_bad = (
            (c_nan & ~r_nan) | (c_inf & ~(r_inf & (c == r))) | (r_nan & ~c_nan) | (r_inf & ~(c == r))
        )
        k = int(nonfinite_bad.sum())
        if k:
            n_nonfinite += k
            first_nonfinite += _first_flat(nonfinite_bad, start, 3 - len(first_nonfinite))
        finite = torch.isfinite(o) & torch.isfinite(r)
        cf = torch.where(finite, c, torch.zeros_like(c))
        of = torch.where(finite, o, torch.zeros_like(o))
        all_finite = all_finite and bool(torch.isfinite(cf).all())
        cf = torch.where(torch.isfinite(cf), cf, torch.full_like(cf, float("inf")))
        abs_err = (cf - of).abs()
        if abs_err.numel():
            max_abs = max(max_abs, float(abs_err.max()))
        if all_finite:
            o_sq += float((of * of).sum())
            d_sq += float(((cf - of) ** 2).sum())
        elem_bad = ~(abs_err <= tol.atol + tol.rtol * of.abs())  # written so NaN compares as bad
        k = int(elem_bad.sum())
        if k:
            n_bad += k
            first_bad += _first_flat(elem_bad, start, 3 - len(first_bad))
    if not all_finite:
        err = float("inf")
    elif o_sq == 0:
        err = 0.0 if d_sq == 0 else float("inf")
    else:
        err = d_sq**0.5 / o_sq**0.5
    if n_nonfinite:
        idx = _indices(first_nonfinite, candidate.shape)
        return Comparison(
            False,
            "nonfinite",
            f"{n_nonfinite} NaN/Inf elements where the reference is finite (first at {idx})",
            err,
            max_abs,
            n_nonfinite,
        )
    if not (err <= tol.rel_norm) or n_bad:
        where = _indices(first_bad, candidate.shape) if n_bad else "-"
        msg = (
            f"relative error {err:.3g} against the float64 oracle (tolerance {tol.rel_norm:.3g}, "
            f"the reference's own error {tol.ref_rel_norm_err:.3g}); {n_bad} of {candidate.numel()} elements "
            f"outside the elementwise bound, first at {where}; max abs error {max_abs:.3g}"
        )
        return Comparison(False, "mismatch", msg, err, max_abs, n_bad)
    return Comparison(True, "", "", err, max_abs, 0)


def _finite_sums(
    x: torch.Tensor,
    oracle: torch.Tensor,
    reference: torch.Tensor | None = None,
    tol: Tolerance | None = None,
    largest: bool = False,
) -> tuple[float, float, float, float] | None:
    """(sum o^2, sum (x-o)^2, max |x-o| where ``largest`` or ``tol``, elements outside ``tol``'s
    bound where given; 0.0 for those not asked) over every slice, kept on the device and read back
    once; None where any element of x - o (or of ``reference``) is not finite, for the
    slice-by-slice path to handle.

    Why: the slice-by-slice path reads four to six numbers back to the host per 128 MiB slice, and
    every read waits for the device. A 6.4 GB output is 96 slices, so about 1,800 waits a case on a
    GPU (the H200 spent 0.27 s a case comparing such outputs). Here each slice's figures are added
    on the device in the slices' order, as the host adds them there: the same float64 additions
    of the same sums, so the same numbers (tests/verify/test_compare.py)."""
    acc: list[torch.Tensor] | None = None
    finite: torch.Tensor | None = None
    for _, part in slices(x, oracle, *([reference] if reference is not None else []), widen=False):
        o = part[1].to(torch.float64)
        d = part[0] - o  # in float64 (o is): x widened element by element, as the other paths widen it
        if not d.numel():
            continue
        ok = torch.isfinite(d).all()
        if reference is not None:
            ok = ok & torch.isfinite(part[2]).all()
        now = [(o * o).sum(), (d * d).sum()]
        if largest or tol is not None:  # passes over the slice only where asked for
            abs_err = d.abs()
            now.append(abs_err.max())
            if tol is not None:
                now.append((abs_err > tol.atol + tol.rtol * o.abs()).sum().to(torch.float64))
        kept = acc or [torch.zeros((), dtype=torch.float64, device=d.device) for _ in now]
        acc = [torch.maximum(a, n) if i == 2 else a + n for i, (a, n) in enumerate(zip(kept, now))]
        finite = ok if finite is None else finite & ok
    if acc is None or finite is None:
        return 0.0, 0.0, 0.0, 0.0
    read = torch.stack([finite.to(torch.float64), *acc]).tolist()
    read += [0.0] * (5 - len(read))  # the figures not asked for
    return None if read[0] != 1.0 else (read[1], read[2], read[3], read[4])


def _passed_on_the_device(
    candidate: torch.Tensor, oracle: torch.Tensor, reference: torch.Tensor, tol: Tolerance
) -> Comparison | None:
    """The comparison of a candidate that passes, its figures read back once (:func:`_finite_sums`);
    None for anything else: a non-finite element, an element outside the bound or an error beyond
    the tolerance is found and described by the slice-by-slice path, with its first indices."""
    read = _finite_sums(candidate, oracle, reference, tol)
    if read is None or read[3]:
        return None
    o_sq, d_sq, max_abs, _ = read
    err = (0.0 if d_sq == 0 else float("inf")) if o_sq == 0 else d_sq**0.5 / o_sq**0.5
    return Comparison(True, "", "", err, max_abs, 0) if err <= tol.rel_norm else None


def kernelbench_accepts(candidate: torch.Tensor, reference: torch.Tensor) -> bool:
    """What KernelBench's own rule says: allclose(ref, cand, atol=rtol=tol(dtype)), NaN fails."""
    if candidate.shape != reference.shape or candidate.dtype != reference.dtype:
        return False
    tol = KERNELBENCH_TOL.get(reference.dtype, 1e-2)
    return bool(torch.allclose(reference, candidate, atol=tol, rtol=tol))


def _first_flat(mask: torch.Tensor, offset: int, k: int) -> list[int]:
    """Flat indices (with `offset`) of the first `k` set elements of a slice's mask."""
    if k <= 0:
        return []
    return [offset + int(i) for i in mask.nonzero()[:k].reshape(-1).tolist()]


def _indices(flat: list[int], shape: torch.Size) -> str:
    """Flat indices as index tuples of `shape`."""
    out = []
    for f in flat:
        idx = []
        for s in reversed(shape):
            idx.append(f % s if s else 0)
            f = f // s if s else 0
        out.append(tuple(reversed(idx)))
    return ", ".join(str(i) for i in out)
