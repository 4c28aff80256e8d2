"""What copying a call's outputs costs on the parent's own clock: the gap check's allowance for a
static output buffer.

A solution that returns one buffer from every call (B4, CUDA-graph style: legitimate) has each
call's results copied by its worker right after the call, before the next overwrites them
(kernelproof/worker/timed_calls.py). That copy is harness work inside the candidate's per-call
cycle which no baseline does, so the gap check (kernelproof/measure/bounds.py) allows it on top.
The figure is the parent's, never the worker's: the parent copies the same number of bytes on the
same device and keeps the median. A worker that claims reuse without it gains at most one copy of
its own outputs' bytes in the gap's allowance; the back-to-back differential, which does not read
the claim, still bounds its windows.
"""

from __future__ import annotations

import functools
import statistics
import time

import torch

COPY_REPEATS = 5  # copies timed; the median is kept
MAX_COPY_BYTES = 1 << 31  # a larger output is timed at this size and scaled (memory stays bounded)


def output_copy_ms(output_nbytes: list[int], device: torch.device) -> float:
    """Milliseconds the parent takes to copy ``sum(output_nbytes)`` bytes on ``device``."""
    return _copy_ms(int(sum(output_nbytes)), str(device))


@functools.lru_cache(maxsize=64)
def _copy_ms(nbytes: int, device: str) -> float:
    if nbytes <= 0:
        return 0.0
    timed = min(nbytes, MAX_COPY_BYTES)
    src = torch.empty(timed, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    cuda = src.device.type == "cuda"
    walls = []
    for _ in range(COPY_REPEATS):
        if cuda:
            torch.cuda.synchronize(src.device)
        t0 = time.perf_counter()
        dst.copy_(src)
        if cuda:
            torch.cuda.synchronize(src.device)
        walls.append((time.perf_counter() - t0) * 1e3)
    del src, dst
    return statistics.median(walls) * nbytes / timed
