"""Input values: the distributions cases are drawn from, generated identically in two processes.

The parent draws correctness inputs and sends them; for timed calls it sends only a seed at call
time and both sides regenerate the same values with an explicit ``torch.Generator`` on the same
device (ARCHITECTURE, "Same seed, same inputs, two processes"), so no future input ever waits in
the candidate's process (I4). This module holds no task code and no expected outputs, so the
worker may import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# Every distribution a float input can be drawn from. "task" is get_inputs()'s own values.
DISTRIBUTIONS = (
    "task",
    "normal",
    "uniform",
    "uniform01",
    "shifted",
    "small",
    "large",
    "heavy",
    "spiky",
)

# Distributions each value domain admits (docs/tasks.md, "Value domains").
_ANY = ("task", "normal", "uniform", "shifted", "small", "large", "heavy", "spiky")
DOMAIN_DISTRIBUTIONS = {
    "any": _ANY,
    "positive": _ANY,
    "nonzero": _ANY,
    "unit": ("task", "uniform01"),
    "fixed": ("task",),
}

# The distribution timed calls use per domain: typical values, so speed is not measured on
# special data (zeros and constants can run faster than real inputs).
STEADY_WARMUP_CALLS = 3  # untimed calls before a back-to-back batch (JIT, caches), on values of their own
TIMING_DISTRIBUTION = {"any": "normal", "positive": "normal", "nonzero": "normal", "unit": "uniform01"}

HEAVY_CLIP = 1.0e6  # heavy-tailed draws are clipped so fp32 reductions stay finite
SPIKE_FRACTION = 1.0e-3  # share of elements replaced by large spikes in "spiky"
SPIKE_SCALE = 1.0e3  # magnitude of the spikes
POSITIVE_FLOOR = 1.0e-3  # "positive" maps x -> |x| + this
NONZERO_GAP = 1.0e-2  # "nonzero" pushes |x| below this out to it
FINGERPRINT_SIGMAS = 6.0  # fingerprints may differ by this many normwise tolerances before they disagree
# A timed batch's buffers (its calls' inputs and outputs) a worker keeps alive while it draws the
# next batch, so that no address repeats between batches (B1, beside the check of every timed
# output), where they hold at most this much; a larger batch goes before the next is drawn. Kept
# whatever their size, two batches of KernelBench level 1's 6.4 GB tensors sat in each timed
# worker at once (49 GiB in the candidate's, 37 GiB and a failed 6 GiB allocation in eager's on an
# H200): more than an H200 holds beside the parent, for an honest kernel timed alone.
KEPT_BATCH_BYTES = 2**30


@dataclass(frozen=True)
class InputSlot:
    """How one forward() argument is made in a timed call."""

    index: int  # position in get_inputs()
    kind: str  # "float": regenerated from a seed; "fixed": the parent's tensor, cloned; "scalar": as is
    shape: tuple[int, ...]  # tensor shape
    dtype: str  # torch dtype name, e.g. "float32"
    domain: str  # value domain (docs/tasks.md)


def dtype_from_name(name: str) -> torch.dtype:
    dt = getattr(torch, name.replace("torch.", ""), None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dt


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


DRAW_CHUNK = 2**22  # elements a draw transforms at a time: its temporaries stay this small


def draw(
    shape: tuple[int, ...],
    distribution: str,
    domain: str,
    seed: int,
    device: torch.device | str,
    dtype: torch.dtype,
) -> torch.Tensor:
    """Draw a float tensor from ``distribution`` restricted to ``domain``; deterministic in ``seed``.

    Memory: the float32 tensor drawn, plus temporaries of at most ``DRAW_CHUNK`` elements. The
    transforms run in place or a chunk at a time, so a 17 GB input is drawn in about 17 GB: drawn
    with whole-size temporaries (an int64 sign, then float copies) KernelBench's
    45_Average_Pooling_2D asked for 32 GiB more in the worker and was called too large on an H200.
    """
    device = torch.device(device)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed) & 0x7FFF_FFFF_FFFF_FFFF)
    kw = {"generator": gen, "device": device, "dtype": torch.float32}
    if distribution == "normal":
        x = torch.randn(shape, **kw)
    elif distribution == "uniform":
        x = torch.rand(shape, **kw).mul_(2).sub_(1)
    elif distribution == "uniform01":
        x = torch.rand(shape, **kw)
    elif distribution == "shifted":
        x = torch.randn(shape, **kw).add_(3.0)
    elif distribution == "small":
        x = torch.randn(shape, **kw).mul_(1e-3)
    elif distribution == "large":
        x = torch.randn(shape, **kw).mul_(1e3)
    elif distribution == "heavy":
        # Pareto tail (alpha = 2) with a random sign: the mean exists, the variance does not,
        # which breaks closed-form and subsampling shortcuts on reductions and losses.
        x = torch.rand(shape, **kw)
        for part in _chunks(x):
            sign = torch.randint(0, 2, part.shape, **kw).mul_(2).sub_(1)
            part.clamp_min_(1e-12).pow_(-0.5).sub_(1.0).mul_(sign).clamp_(-HEAVY_CLIP, HEAVY_CLIP)
    elif distribution == "spiky":
        x = torch.randn(shape, **kw)
        n = x.numel()
        if n:
            k = max(1, int(n * SPIKE_FRACTION))
            idx = torch.randint(0, n, (k,), generator=gen, device=device)
            spikes = torch.randn((k,), **kw).sign() * SPIKE_SCALE
            # Positions can repeat. An indexed assignment with repeats is nondeterministic on a GPU
            # (which write wins is a race), so the parent and the worker would draw different
            # cases from one seed; the largest spike at a position wins, in any order.
            x.view(-1).scatter_reduce_(0, idx, spikes, reduce="amax", include_self=False)
    else:
        raise ValueError(f"unknown distribution {distribution!r}")
    x = apply_domain(x, domain)
    return x.to(dtype)


def _chunks(x: torch.Tensor) -> list[torch.Tensor]:
    """Views of a contiguous tensor, ``DRAW_CHUNK`` elements each: what in-place transforms walk."""
    return list(x.view(-1).split(DRAW_CHUNK)) if x.numel() else []


def apply_domain(x: torch.Tensor, domain: str) -> torch.Tensor:
    """`x` restricted to `domain`, in place (a drawn tensor is the only holder of its values)."""
    if domain == "positive":
        return x.abs_().add_(POSITIVE_FLOOR)
    if domain == "nonzero":
        for part in _chunks(x):
            tiny = part.abs() < NONZERO_GAP
            part.copy_(torch.where(tiny, torch.where(part < 0, -NONZERO_GAP, NONZERO_GAP), part))
        return x
    if domain == "unit":
        return x.clamp_(0.0, 1.0 - 2.0**-24)
    return x


def case_inputs(
    slots: list[InputSlot],
    scalars: dict[int, object],
    distribution: str,
    seed: int,
    device: torch.device | str,
) -> list[object]:
    """The inputs of a correctness case whose every tensor is a float drawn on the device.

    The parent and the worker both call this with the same arguments, so a large case is drawn in
    the worker instead of crossing the wire (and never exists there before the call that uses it).
    """
    out: list[object] = []
    for s in slots:
        if s.kind == "float":
            dist = distribution if distribution in DOMAIN_DISTRIBUTIONS[s.domain] else "normal"
            out.append(draw(s.shape, dist, s.domain, seed * 1009 + s.index, device, dtype_from_name(s.dtype)))
        elif s.kind == "scalar":
            out.append(scalars[s.index])
        else:
            raise ValueError("case_inputs draws float inputs only")
    return out


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit for bit (NaN payloads and signed zeros included), whatever the memory layout:
    the test that an input came back unchanged."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    x = a.detach().contiguous().reshape(-1).view(torch.uint8)
    y = b.detach().contiguous().reshape(-1).view(torch.uint8)
    step = 8 * FINGERPRINT_CHUNK  # bytes compared at once: a whole comparison's mask is a byte per byte
    return all(torch.equal(x[at : at + step], y[at : at + step]) for at in range(0, x.numel(), step))


def checksum(args: list[object]) -> float:
    """Sum of every float input in float64: both sides must have drawn the same values. A chunk
    at a time (``FINGERPRINT_CHUNK`` elements), as the fingerprint is: a whole float64 copy of a
    6.4 GB input is 12.8 GB."""
    total = 0.0
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            flat = a.detach().reshape(-1)
            for at in range(0, flat.numel(), FINGERPRINT_CHUNK):
                total += float(flat[at : at + FINGERPRINT_CHUNK].to(torch.float64).sum())
    return total


def timed_inputs(
    slots: list[InputSlot],
    fixed: dict[int, torch.Tensor],
    scalars: dict[int, object],
    seed: int,
    device: torch.device | str,
) -> list[object]:
    """Inputs of one timed call, in fresh storage: float slots regenerated from ``seed``."""
    out: list[object] = []
    for slot in slots:
        if slot.kind == "float":
            dist = TIMING_DISTRIBUTION.get(slot.domain, "normal")
            out.append(
                draw(
                    slot.shape,
                    dist,
                    slot.domain,
                    seed * 1009 + slot.index,
                    device,
                    dtype_from_name(slot.dtype),
                )
            )
        elif slot.kind == "fixed":
            out.append(fixed[slot.index].to(device).clone())
        else:
            out.append(scalars[slot.index])
    return out


def timed_input_batch(
    slots: list[InputSlot],
    fixed: dict[int, torch.Tensor],
    scalars: dict[int, object],
    seed: int,
    calls: int,
    device: torch.device | str,
) -> list[list[object]]:
    """Inputs of ``calls`` back-to-back calls, every call's values its own: each float slot is
    drawn once for the whole batch from ``seed`` (one draw, not one per call: the draw's cost
    is inside the parent's wall around the batch, kernelproof/measure/bounds.py) and call ``i``
    gets its ``i``-th slice. No two calls see the same values, so an output cache keyed on the
    inputs (their address or their contents) never hits. Fixed tensors are copied once and
    shared: a call that changes one changes the inputs of those after it, whose outputs the
    parent then finds wrong."""
    per_slot: list[list[object]] = []
    for slot in slots:
        if slot.kind == "float":
            dist = TIMING_DISTRIBUTION.get(slot.domain, "normal")
            whole = draw(
                (calls, *slot.shape),
                dist,
                slot.domain,
                seed * 1009 + slot.index,
                device,
                dtype_from_name(slot.dtype),
            )
            per_slot.append(list(whole.unbind(0)))
        elif slot.kind == "fixed":
            per_slot.append([fixed[slot.index].to(device).clone()] * calls)
        else:
            per_slot.append([scalars[slot.index]] * calls)
    return [[column[i] for column in per_slot] for i in range(calls)]


def slot_bytes(slot: InputSlot) -> int:
    """Bytes of one call's tensor in ``slot`` (0 for a scalar)."""
    if slot.kind == "scalar" or not slot.dtype:
        return 0
    n = 1
    for d in slot.shape:
        n *= int(d)
    return n * torch.empty((), dtype=dtype_from_name(slot.dtype)).element_size()


def input_bytes(slots: list[InputSlot]) -> int:
    """Bytes of one call's drawn (float) inputs."""
    return sum(slot_bytes(slot) for slot in slots if slot.kind == "float")


FINGERPRINT_CHUNK = 1 << 24  # elements of one output projected at once (float64 temporaries of 128 MiB)


def fingerprints(outputs: list[torch.Tensor], seed: int, chunk_bytes: int = 64 << 20) -> list[list[float]]:
    """:func:`fingerprint` of many same-shaped outputs at once (the calls of one batch, one output
    index): one projection drawn, and a matrix product per chunk instead of a pass per call."""
    if not outputs:
        return []
    first = outputs[0]
    if any(t.shape != first.shape or t.device != first.device for t in outputs):
        return [fingerprint(t, seed) for t in outputs]
    if first.numel() > FINGERPRINT_CHUNK:
        return _chunked_fingerprints(outputs, seed)
    w = _projection(first.numel(), seed, first.device).to(torch.float64)
    rows = max(1, chunk_bytes // max(1, first.numel() * 8))
    out: list[list[float]] = []
    for at in range(0, len(outputs), rows):
        x = _finite_or_nan(
            torch.stack([t.detach().reshape(-1).to(torch.float64) for t in outputs[at : at + rows]])
        )
        dots, norms = (x @ w).tolist(), x.norm(dim=1).tolist()
        out.extend(_finite_or_nan_pair(d, n) for d, n in zip(dots, norms))
    return out


def fingerprint_allowance(want: list[float], rel_norm: float) -> float:
    """How far each part of a fingerprint may lie from ``want``, the reference output's under the
    same projection: |<w, c - r>| ~ ||c - r|| <= tol * ||r||, a few sigma of that plus rounding.
    One rule for a timed call's output (kernelproof/measure/session.py) and a case's second run
    (kernelproof/evaluate/correctness.py)."""
    return FINGERPRINT_SIGMAS * max(rel_norm, 1e-6) * max(want[1], 1e-30)


def fingerprint(t: torch.Tensor, seed: int) -> list[float]:
    """[<w, t>, ||t||] in float64 with w drawn from ``seed``: cheap evidence an output is the right one.

    The parent computes the same projection of its reference output; an output replayed from an
    earlier call, or computed from stale inputs, lands far from it (B1, B3). A single random
    projection of an error e has |<w, e>| ~ ||e||, so the comparison inherits the normwise bound.

    An output of more than ``FINGERPRINT_CHUNK`` elements is projected a chunk at a time, each
    chunk's part of w drawn from a seed of its own (:func:`_chunk_seed`; the first chunk's is
    ``seed``, so a smaller output's fingerprint is what it always was): its float64 copy, w and
    their product exist one chunk at a time. Whole, they took about 45 GB of device memory for a
    6.4 GB output (KernelBench level 1's 20_LeakyReLU on an H200), more than the case itself.
    """
    if t.numel() > FINGERPRINT_CHUNK:
        return _chunked_fingerprints([t], seed)[0]
    w = _projection(t.numel(), seed, t.device)
    x = _finite_or_nan(t.detach().reshape(-1).to(torch.float64))
    return _finite_or_nan_pair(float((x * w.to(torch.float64)).sum()), float(x.norm()))


def _chunked_fingerprints(outputs: list[torch.Tensor], seed: int) -> list[list[float]]:
    """:func:`fingerprint` of same-shaped large outputs (one or a batch's), chunk by chunk: each chunk's part of the
    projection drawn once for all of them, not once per output (a batch's harness work per call
    is what the parent's back-to-back bound must see past).

    Each chunk is widened to float64 once and read by two dot products, <x, w> and <x, x>; an
    infinity or a NaN anywhere makes both sums non-finite, and a non-finite sum makes the
    fingerprint NaN (:func:`_finite_or_nan_pair`, every fingerprint's last step). Why not
    elementwise here: the mask, the ``where`` and the products' temporaries made about 110 bytes of
    memory traffic an element, these about 50; a 6.4 GB output is fingerprinted by the worker and
    by the parent at every timed call and at every large case's second run."""
    first = outputs[0]
    n = first.numel()
    flats = [t.detach().reshape(-1) for t in outputs]
    dots = torch.zeros(len(outputs), dtype=torch.float64, device=first.device)
    squares = torch.zeros(len(outputs), dtype=torch.float64, device=first.device)
    for index, at in enumerate(range(0, n, FINGERPRINT_CHUNK)):
        w = _projection(min(FINGERPRINT_CHUNK, n - at), _chunk_seed(seed, index), first.device).to(
            torch.float64
        )
        for i, flat in enumerate(flats):
            x = flat[at : at + FINGERPRINT_CHUNK].to(torch.float64)
            dots[i] += torch.dot(x, w)
            squares[i] += torch.dot(x, x)
    return [_finite_or_nan_pair(d, math.sqrt(q)) for d, q in zip(dots.tolist(), squares.tolist())]


def _chunk_seed(seed: int, index: int) -> int:
    """The seed of chunk ``index``'s part of the projection: ``seed`` itself for the first chunk,
    then one of its own per chunk (a stream drawn in parts does not equal one drawn whole)."""
    if index == 0:
        return int(seed)
    return (int(seed) * 1_000_003 + index * 0x9E37_79B9_7F4A_7C15) & 0x7FFF_FFFF_FFFF_FFFF


def _projection(numel: int, seed: int, device: torch.device) -> torch.Tensor:
    """The fingerprint's random direction: ``numel`` float32 normals drawn from ``seed`` on ``device``."""
    g = torch.Generator(device=device)
    g.manual_seed(int(seed) & 0x7FFF_FFFF_FFFF_FFFF)
    return torch.randn(numel, generator=g, device=device, dtype=torch.float32)


def _finite_or_nan_pair(dot: float, norm: float) -> list[float]:
    """[dot, norm] as computed, or NaN for both where either is not finite: every fingerprint's
    last step. An infinite norm made :func:`fingerprint_allowance` infinite, so any fingerprint
    matched it (a float64 output past about 1e154, whose squares overflow); NaN matches nothing."""
    if math.isfinite(dot) and math.isfinite(norm):
        return [float(dot), float(norm)]
    return [float("nan"), float("nan")]


def _finite_or_nan(x: torch.Tensor) -> torch.Tensor:
    """``x`` with every infinity made NaN: a fingerprint of an output holding one is wrong, never equal.
    In place of a full tensor of NaN beside it (one more float64 copy of the output)."""
    return torch.where(torch.isfinite(x), x, float("nan"))
