"""A back-to-back batch as the parent asks for it: its seeds, its size, and which calls it checks.

One ``steady`` request runs ``calls`` calls back to back (the steady regime's figure, and the two
walls of the parent's back-to-back bound, kernelproof/measure/bounds.py). Two things keep such a
batch honest without a message per call:

- **Every call on values of its own.** The worker draws the batch's inputs at once from one seed
  (kernelproof.inputs.timed_input_batch), so no input repeats: a cache keyed on the inputs (their
  address, or a few of their values) never answers a call. Over four rotating sets, such a cache
  made a 256x256 matmul's steady figure 5.6-48x faster than eager on the CPU, every checked output
  right.
- **Any call may be checked.** The reply carries every call's fingerprints; the parent picks
  which calls to check only after the reply has come (:func:`picks`: the last one and
  ``STEADY_CHECKS`` others at random) and compares them with its own reference on the same inputs.
  A call that skipped its work is found unless the pick missed it, and skipping most calls is
  found almost surely. Only the last call was checked before.

Every call's inputs and outputs are held at once (and the warm-up calls' inputs), so a batch is as
long as fits ``BATCH_BYTES`` on its device. Where not even ``MIN_CALLS`` fit (a task whose one call
moves hundreds of MiB), the steady regime is not measured, with a note: before, four rotating input
sets served any size. The differential needs fewer (two calls, one against two: such calls are long
against the walls' noise) and is not applied, with a note, only where not even two fit.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch

from kernelproof.inputs import STEADY_WARMUP_CALLS, input_bytes
from kernelproof.verify.case_plan import VariantContext

STEADY_CHECKS = 3  # calls checked besides the last, picked after the reply
BATCH_BYTES = {"cpu": 512 << 20, "cuda": 2 << 30}  # a batch's inputs and outputs held at once, at most
DEVICE_SHARE = 16  # ... or this share of a GPU's memory, where that is more (8.7 GB of an H200's 140 GiB)
MIN_CALLS = 8  # fewer calls than this measure nothing worth reporting


@dataclass(frozen=True)
class SteadyBatch:
    """One back-to-back request: its input seed, its projection seed and its calls."""

    seed: int
    projection: int
    calls: int

    def header(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The request, with the variant's input spec (VariantContext.input_spec)."""
        return {
            "op": "steady",
            **spec,
            "seed": self.seed,
            "calls": self.calls,
            "projection_seed": self.projection,
        }


def new_batch(rng: random.Random, calls: int) -> SteadyBatch:
    return SteadyBatch(rng.getrandbits(62), rng.getrandbits(62), int(calls))


def batch_bytes(device: torch.device) -> int:
    """The most a batch may hold on ``device``: ``BATCH_BYTES``, or on a GPU a ``DEVICE_SHARE`` of its
    memory where that is more (a task whose one call moves a GiB still gets one call against two
    for the differential on an H200). Timing holds the device alone, so one batch runs at a time."""
    if device.type != "cuda":
        return BATCH_BYTES["cpu"]
    try:
        total = int(torch.cuda.get_device_properties(device).total_memory)
    except Exception:  # noqa: BLE001 - no properties: the fixed budget
        total = 0
    return max(BATCH_BYTES["cuda"], total // DEVICE_SHARE)


def calls_that_fit(ctx: VariantContext, wanted: int, least: int = MIN_CALLS) -> int:
    """``wanted`` calls, fewer where their inputs and outputs (and the warm-up calls' inputs) would
    not fit the device's :func:`batch_bytes`; 0 where not even ``least`` would."""
    per_call = input_bytes(ctx.slots) + sum(ctx.output_nbytes)
    if per_call <= 0:
        return int(wanted)
    budget = batch_bytes(ctx.device)
    most = budget // per_call - STEADY_WARMUP_CALLS
    n = int(min(wanted, most))
    return n if n >= least else 0


def picks(rng: random.Random, calls: int) -> list[int]:
    """The calls to check, chosen now (after the reply): the last, and ``STEADY_CHECKS`` others."""
    others = rng.sample(range(calls - 1), min(STEADY_CHECKS, max(0, calls - 1)))
    return sorted({calls - 1, *others})
