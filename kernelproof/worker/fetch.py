"""The full output of one timed call of the last batch, for the parent's hidden re-check (B3, I4).

The parent chooses the call after the batch, so the solution cannot know which output will be
read in full. A call whose output a later call overwrote before the worker began keeping copies
(kernelproof.worker.checks.reuse) has none to give; the parent never asks for those.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelproof.verdict import ReasonCode
from kernelproof.wire.expected import Expected, Spec, refusal
from kernelproof.wire.replies import failure
from kernelproof.worker.checks import hooks, shadows
from kernelproof.worker.state import WorkerState


def fetch(state: WorkerState, h: dict[str, Any], tensors: list[torch.Tensor]):
    """The results of timed call ``index``: large ones into the parent's device buffers where offered."""
    i = int(h["index"])
    if not 0 <= i < len(state.timed):
        return failure(ReasonCode.MISSING_RESULT, "no such timed call"), []
    results = state.timed[i]
    if results is None:
        return failure(
            ReasonCode.MISSING_RESULT, f"timed call {i}'s output was overwritten by a later call"
        ), []
    refused = shadows.check(results, f"timed call {i}'s output")  # kept: the solution may have set one since
    if refused is not None:
        return refused, []
    expected = Expected.from_json(h.get("expect"))
    found = refusal(expected.outputs, [Spec.of(t) for t in results]) if expected is not None else None
    if found is not None:
        return failure(found[0], f"timed call {i}: {found[1]}"), []
    with hooks.quiet():
        if h.get("into"):
            delivered, wire = state.hand_over(results, h["into"])
            return {"ok": True, "delivered": delivered}, wire
        # Sent from where they are: the wire copies a large tensor from the device once, into its file.
        return {"ok": True}, [t.detach() for t in results]
