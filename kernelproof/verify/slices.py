"""Aligned float64 slices of large outputs: how every whole-output comparison bounds its temporaries.

The comparisons against the oracle (kernelproof/verify/oracle_compare.py) and the reference's run-to-run
spread (kernelproof/verify/oracle.py) widen outputs to float64 and build masks and differences of
them. Over whole tensors that is several float64 copies of an output at once: a 6.4 GB output
(KernelBench's 4096 x 393216 fp32 inputs) took the parent past an H200's memory in the
comparisons, and the spread alone held about fourteen output-sizes at the peak of a level-1 task's
setup. Over slices of ``CHUNK_ELEMENTS`` it is a few 128 MiB temporaries.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

CHUNK_ELEMENTS = 1 << 24  # elements per slice: 128 MiB per float64 temporary, a handful alive at once


def slices(*tensors: torch.Tensor, widen: bool = True) -> Iterator[tuple[int, list[torch.Tensor]]]:
    """Aligned slices of flat views of `tensors`, with the offset of each: in float64, or as they are
    when not `widen` (the fast paths let arithmetic with the float64 oracle widen them element by
    element, the same values without a float64 copy of each). An empty tensor gives one empty slice."""
    flat = [t.detach().reshape(-1) for t in tensors]
    n = flat[0].numel()
    for start in range(0, max(n, 1), CHUNK_ELEMENTS):
        part = [f[start : start + CHUNK_ELEMENTS] for f in flat]
        yield start, [p.to(torch.float64) for p in part] if widen else part
