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
# a larger output is timed at this size and scaled (a copy's time is linear in its bytes there):
# the parent's own buffers stay small beside the evaluations' reservations
MAX_COPY_BYTES = 1 << 28
FALLBACK_COPY_BYTES = 1 << 24  # timed at this size where the larger buffers cannot be had


def output_copy_ms(output_nbytes: list[int], device: torch.device) -> float:
    """Milliseconds the parent takes to copy ``sum(output_nbytes)`` bytes on ``device``."""
    return _copy_ms(int(sum(output_nbytes)), str(device))


@functools.lru_cache(maxsize=64)
def _copy_ms(nbytes: int, device: str) -> float:
    if nbytes <= 0:
        return 0.0
    for size in (min(nbytes, MAX_COPY_BYTES), min(nbytes, FALLBACK_COPY_BYTES)):
        try:
            return _timed_copy_ms(size, torch.device(device)) * nbytes / size
        except torch.OutOfMemoryError:
            continue
    return 0.0  # no buffer at all: nothing allowed on top (the check stays as strict as before)


def _timed_copy_ms(size: int, device: torch.device) -> float:
    """The median of ``COPY_REPEATS`` copies of ``size`` bytes: CUDA events on a GPU (no host
    synchronisation in the figure), the host's clock on the CPU."""
    src = torch.empty(size, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    if device.type == "cuda":
        with torch.cuda.device(device):
            return _event_copies_ms(src, dst)
    walls = []
    for _ in range(COPY_REPEATS):
        t0 = time.perf_counter()
        dst.copy_(src)
        walls.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(walls)


def _event_copies_ms(src: torch.Tensor, dst: torch.Tensor) -> float:
    """The median of the copies on the current stream, by its events."""
    walls = []
    for _ in range(COPY_REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        walls.append(start.elapsed_time(end))
    return statistics.median(walls)
