"""Outputs of different calls that share storage: a static output buffer, CUDA-graph style (B4).

Returning one persistent buffer from every call saves an allocation and a launch and is what a
CUDA-graph wrapper does; a caller that keeps an output must copy it. The harness fingerprints
each timed output right after its own call, so such a solution is judged on what each call
returned, and the parent flags ``output_reused`` as a warning. What is lost is the full output of
an earlier call, overwritten by a later one: once a worker has seen reuse, it keeps a copy of each
timed call's results (outside the window) for the parent's hidden re-check, and reports the calls
whose outputs were overwritten before it knew.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelproof.worker.checks.aliasing import overlaps


def shared_with(results: list[Any], earlier: list[list[Any] | None]) -> list[int]:
    """Indices of the ``earlier`` results lists that share storage with one of ``results``."""
    found = []
    for k, old in enumerate(earlier):
        if old is not None and any(_share(a, b) for a in results for b in old):
            found.append(k)
    return found


def _share(a: Any, b: Any) -> bool:
    return (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and a.numel() > 0
        and b.numel() > 0
        and a.device == b.device
        and overlaps(a, b)
    )
