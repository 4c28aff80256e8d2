"""The float64 oracle for models written the way KernelBench writes them, and the reference's noise.

Converting a model's parameters and buffers to float64 is not enough for every published task.
Models keep tensors as plain attributes (an LSTM's ``h0``) and create tensors inside ``forward``
(masks, position ids, ``torch.randn``) in the default dtype, float32: the oracle then fails on
"mat1 and mat2 must have the same dtype". ``torch.set_default_dtype`` would fix the second, but it
is process-global and the parent runs evaluations in threads. So:

- plain tensor attributes are converted recursively (submodules, lists, tuples, dicts), with the
  parameters, when a model is made ready (:func:`convert_attributes`);
- while the oracle runs, a torch-function mode (thread-local, scoped to that one call) upcasts what
  a factory call without an explicit dtype made in float32, and keeps a float64 tensor a float64
  one where the model casts it back to float32 (``.float()``, ``.to(torch.float32)``)
  (:func:`oracle_scope`). Random factories still draw in float32 under the same seed and are only
  widened, so the oracle sees the values the reference saw. How the model is constructed never
  changes: under one seed, fp32 and fp64 initial weights differ.

A reference may also differ between two runs on the same inputs without being random: cuDNN's
transposed convolutions accumulate with atomics, RNNs vary with cuBLAS workspaces. Only a
difference under *different seeds* beyond the correctness tolerance, over at least two pairs, makes
a reference random (:func:`decide_randomness`); the spread under one seed is rounding, and it
widens the tolerance as part of the reference's own error (:class:`Noise`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from kernelproof.verify.slices import slices

# Factories whose result takes the default dtype when none is given (and the data is floating).
_FACTORIES = {
    torch.empty,
    torch.zeros,
    torch.ones,
    torch.full,
    torch.rand,
    torch.randn,
    torch.arange,
    torch.linspace,
    torch.logspace,
    torch.eye,
    torch.tensor,
    torch.as_tensor,
    torch.scalar_tensor,
    torch.empty_strided,
    torch.normal,
}
_TO_FLOAT32 = {torch.Tensor.float, torch.Tensor.to, torch.Tensor.type}
RANDOM_PAIRS = 2  # pairs of runs under different seeds that must all differ beyond the tolerance


class FactoryDtype(TorchFunctionMode):
    """While one model runs in `dtype` (one thread, one call): float32 made by a dtype-less factory
    becomes `dtype`; with `hold`, a `dtype` tensor cast to float32 stays `dtype` (the oracle computes
    everything in float64, casts back included)."""

    def __init__(self, dtype: torch.dtype, hold: bool = False) -> None:
        super().__init__()
        self.dtype = dtype
        self.hold = hold

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.hold and func in _TO_FLOAT32 and args and _has_dtype(args[0], self.dtype):
            if _casts_to_float32(func, args[1:], kwargs):
                return args[0] if func is not torch.Tensor.to else _same_place(args[0], args[1:], kwargs)
        out = func(*args, **kwargs)
        if func in _FACTORIES and kwargs.get("dtype") is None and _is_float32(out):
            return out.to(self.dtype)
        return out


def oracle_scope() -> FactoryDtype:
    """The scope the float64 oracle runs in."""
    return FactoryDtype(torch.float64, hold=True)


def _has_dtype(x: Any, dtype: torch.dtype) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype == dtype


def _is_float32(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype == torch.float32


def _casts_to_float32(func, rest: tuple, kwargs: dict) -> bool:
    if func is torch.Tensor.float:
        return True
    target = kwargs.get("dtype", next((a for a in rest if isinstance(a, torch.dtype)), None))
    if func is torch.Tensor.type and target is None:
        target = next((a for a in rest if isinstance(a, str)), None)
    return target in (torch.float32, "torch.FloatTensor", "torch.cuda.FloatTensor")


def _same_place(t: torch.Tensor, rest: tuple, kwargs: dict) -> torch.Tensor:
    """``t.to(device?, torch.float32)`` without the dtype: the move still happens."""
    device = kwargs.get("device", next((a for a in rest if isinstance(a, (torch.device, str))), None))
    return t.to(device) if device is not None else t


def convert_attributes(
    module: torch.nn.Module, dtype: torch.dtype | None, device: torch.device | None
) -> int:
    """Plain tensor attributes of every submodule (not parameters, not buffers), moved to `device`
    and, when floating, converted to `dtype`; lists, tuples and dicts of them too. Returns how many."""
    count = 0

    def convert(value: Any) -> Any:
        nonlocal count
        if isinstance(value, torch.nn.Parameter) or isinstance(value, torch.nn.Module):
            return value
        if isinstance(value, torch.Tensor):
            count += 1
            out = value.to(device) if device is not None else value
            return out.to(dtype) if dtype is not None and out.is_floating_point() else out
        if isinstance(value, list):
            return [convert(v) for v in value]
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            return tuple(convert(v) for v in value)
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        return value

    for m in module.modules():
        for name, value in list(vars(m).items()):
            if name.startswith("_") and name in ("_parameters", "_buffers", "_modules"):
                continue
            if isinstance(value, (torch.Tensor, list, tuple, dict)) and not isinstance(
                value, torch.nn.Parameter
            ):
                new = convert(value)
                if new is not value:
                    object.__setattr__(m, name, new)
    return count


def plain_attributes(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The plain tensor attributes by dotted name (``lstm.h0``), as a candidate is given them."""
    out = {}
    for prefix, m in module.named_modules():
        for name, value in vars(m).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                out[f"{prefix}.{name}" if prefix else name] = value
    return out


@dataclass(frozen=True)
class Noise:
    """How far the reference differs from itself on the same inputs: rounding, not randomness.

    Added to the reference's own error when a tolerance is set (verify/oracle_compare.py)."""

    rel_norm: float = 0.0  # ||a - b|| / ||a|| between two runs, the largest seen
    abs_over_rms: float = 0.0  # max |a - b| / rms(a): scales to any case's output size


NO_NOISE = Noise()


@dataclass(frozen=True)
class Randomness:
    """Whether a reference's outputs depend on the random number generator (dropout in training)."""

    random: bool  # every pair under different seeds differs beyond the tolerance
    same_seed: Noise  # the spread between runs under one seed (rounding, nondeterministic kernels)
    other_seed_rel_norm: tuple[float, ...]  # the spread of each pair under different seeds
    tolerance_rel_norm: float  # the correctness tolerance the spreads were weighed against

    @property
    def noise(self) -> Noise:
        """The reference's noise when it is not random: every spread seen is rounding."""
        if self.random:
            return self.same_seed
        rel = max((self.same_seed.rel_norm, *self.other_seed_rel_norm))
        return Noise(rel, self.same_seed.abs_over_rms)


def spread(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> Noise:
    """The largest difference between two runs' outputs (floating outputs of the same shape), in
    float64 slices (kernelproof/verify/slices.py: whole, its masks and differences were the peak of
    a KernelBench level-1 task's setup)."""
    rel, abs_rms = 0.0, 0.0
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return Noise(math.inf, math.inf)
        if not x.is_floating_point():
            if not torch.equal(x, y):
                return Noise(math.inf, math.inf)
            continue
        x_sq = d_sq = dmax = 0.0
        for _, (x64, y64) in slices(x, y):
            fx = torch.isfinite(x64)
            if not bool(torch.equal(fx, torch.isfinite(y64))):
                return Noise(math.inf, math.inf)
            d = x64 - y64
            if not bool(fx.all()):  # where both are finite (they are finite at the same places)
                d = torch.where(fx, d, 0.0)
                x64 = torch.where(fx, x64, 0.0)
            x_sq += float((x64 * x64).sum())
            d_sq += float((d * d).sum())
            if d.numel():
                dmax = max(dmax, float(d.abs().max()))
        norm, dn = x_sq**0.5, d_sq**0.5
        rel = max(rel, dn / norm if norm > 0 else (0.0 if dn == 0 else math.inf))
        rms = norm / max(1, x.numel()) ** 0.5
        abs_rms = max(abs_rms, dmax / rms if rms > 0 else (0.0 if dmax == 0 else math.inf))
    return Noise(rel, abs_rms)


def decide_randomness(
    run: Callable[[int], Sequence[torch.Tensor]], tolerance_rel_norm: float, pairs: int = RANDOM_PAIRS
) -> Randomness:
    """Run the reference under seeds and decide: random only when every one of `pairs` pairs of
    runs under different seeds differs beyond the tolerance. `run(seed)` seeds the generators and
    returns the outputs."""
    first = run(1)
    same = spread(first, run(1))
    others = []
    for k in range(pairs):
        a = first if k == 0 else run(2 * k + 1)
        others.append(spread(a, run(2 * k + 2)).rel_norm)
    random = all(s > tolerance_rel_norm for s in others)
    return Randomness(random, same, tuple(others), tolerance_rel_norm)
