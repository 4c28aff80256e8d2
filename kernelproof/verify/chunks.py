"""The float64 oracle in chunks along the batch, where the parent has shown that it is safe.

At KernelBench's published sizes the oracle's float64 copy of a case's inputs, and its
activations, are twice the size of the reference's (a 6.4 GB input is 12.8 GB in float64). Run on
slices of the batch, the oracle holds one slice of them at a time; its outputs are written into
one float64 tensor per output. That is only the same oracle when every output row depends on its
own input row alone, which a task's code does not promise (a sum over dim 0, batch statistics, a
mix across the batch). So it is never assumed: the parent checks, at the task's small shape, that
every tensor input and output has the batch as its dim 0 and that the oracle on the whole batch
equals the oracle on its chunks (:func:`batch_separable`). A task that fails the check runs whole.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelproof.verify.oracle_compare import rel_norm_error

CHUNK_INPUT_BYTES = 2**30  # float64 input bytes per chunk: 1 GiB keeps the oracle's copy small
SAME_REL_NORM = 1e-12  # chunked and whole float64 oracles agree to rounding (BLAS blocking may differ)


def batch_of(args: list[Any]) -> int | None:
    """The batch size when every tensor input has the same dim 0 (at least 2), else None."""
    sizes = {a.shape[0] for a in args if isinstance(a, torch.Tensor) and a.dim() > 0}
    dims0 = [a for a in args if isinstance(a, torch.Tensor)]
    if len(sizes) != 1 or any(a.dim() == 0 for a in dims0):
        return None
    (b,) = sizes
    return b if b >= 2 else None


def batch_separable(run_oracle, args: list[Any]) -> bool:
    """Does the oracle on the whole batch equal the oracle on two chunks of it, every output's
    dim 0 following the inputs'? `run_oracle(args)` returns the oracle's outputs on `args`."""
    b = batch_of(args)
    if b is None:
        return False
    try:
        whole = run_oracle(args)
        halves = [run_oracle(_narrow(args, s, n)) for s, n in ((0, b // 2), (b // 2, b - b // 2))]
    except Exception:  # noqa: BLE001 - an oracle that cannot run on a chunk runs whole
        return False
    for k, w in enumerate(whole):
        if w.dim() == 0 or w.shape[0] != b or any(h[k].shape[1:] != w.shape[1:] for h in halves):
            return False
        joined = torch.cat([h[k] for h in halves])
        if not w.is_floating_point():
            if not torch.equal(joined, w):
                return False
        elif not bool(torch.equal(torch.isfinite(joined), torch.isfinite(w))):
            return False
        elif rel_norm_error(torch.nan_to_num(joined), torch.nan_to_num(w)) > SAME_REL_NORM:
            return False
    return True


def chunks_for(args: list[Any]) -> int:
    """How many chunks keep the oracle's float64 inputs near CHUNK_INPUT_BYTES (1: run whole)."""
    b = batch_of(args)
    if b is None:
        return 1
    elems = sum(a.numel() for a in args if isinstance(a, torch.Tensor))
    return max(1, min(b, -(-elems * 8 // CHUNK_INPUT_BYTES)))


def oracle_in_chunks(run_oracle, args: list[Any], chunks: int) -> list[torch.Tensor]:
    """The oracle's outputs on `args`, computed on `chunks` slices of the batch and written into
    whole outputs (only for a task :func:`batch_separable` accepted)."""
    b = batch_of(args)
    assert b is not None and chunks > 1
    step = -(-b // chunks)
    outs: list[torch.Tensor] = []
    for start in range(0, b, step):
        n = min(step, b - start)
        part = run_oracle(_narrow(args, start, n))
        if not outs:
            outs = [torch.empty((b, *p.shape[1:]), dtype=p.dtype, device=p.device) for p in part]
        for o, p in zip(outs, part):
            o.narrow(0, start, n).copy_(p)
        del part
    return outs


def _narrow(args: list[Any], start: int, n: int) -> list[Any]:
    return [a.narrow(0, start, n) if isinstance(a, torch.Tensor) else a for a in args]
