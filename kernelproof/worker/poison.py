"""Freed device memory full of NaN before each call, so unwritten output elements fail (A1-A3).

On the GPU, blocks the size of each output are allocated, filled with 0xFF (NaN in every float
format) and freed, so the caching allocator hands poisoned blocks to the candidate's empty(). The
CPU has no caching allocator; the CPU worker runs with glibc's malloc perturbation instead
(kernelproof.host.process).
"""

from __future__ import annotations

import torch

POISON_BYTE = 0xFF  # NaN in every float format: unwritten output elements fail (A1-A3)
BLOCKS_PER_OUTPUT = 2  # poisoned blocks per output size: the allocator may hand back either


def fill(device: torch.device, sizes: list[int]) -> None:
    """Poison the caching allocator with blocks of ``sizes`` bytes (CUDA only)."""
    if device.type != "cuda":
        return
    blocks = []
    for n in sizes:
        for _ in range(BLOCKS_PER_OUTPUT):
            b = torch.empty(int(n), dtype=torch.uint8, device=device)
            b.fill_(POISON_BYTE)
            blocks.append(b)
    torch.cuda.synchronize(device)
    del blocks  # back to the caching allocator, NaN-filled, for the candidate's empty() to find
