"""One batch of timed calls driven call by call from the parent: seeds sent late, walls on its clock.

A worker's process is the candidate's: whatever sits in its memory, the candidate can read (a
torch helper that walks frames was enough to read the harness's locals). So a call's input seed
is sent only after the previous call's window has closed and its fingerprint has come back, and a
call's projection seed only after its own window has closed (I10). Each costs one round trip,
outside every window. The exchange, for calls 0..n-1:

    parent: time {calls: n, seed: s0}      worker: prepares call 0, times it, says closed {index: 0}
    parent: project {projection_seed: p0}  worker: fingerprints call 0, says fingerprint {index: 0, ...}
    parent: next {seed: s1}                worker: ... closed {index: 1}
    ...
    parent: end                            worker: the batch's reply (spans, clock, reuse)

Any message with an ``ok`` key instead of a step is the batch's (failed) reply. Besides the
worker's figures, the parent keeps its own: for each call, the wall time from sending its seed to
receiving its fingerprint (a *cycle*: input preparation, the window, the check and fingerprint,
three messages), which bounds what the worker may claim (kernelproof.measure.bounds).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelproof.host.process import WorkerProcess

# Tests only: send every seed of the batch in its first request, as kernelproof once did, to show
# what a solution that reads the harness's memory does with them (never reachable from the CLI).
SEEDS_AHEAD = False


@dataclass
class Batch:
    reply: dict[str, Any]  # the worker's last message: its batch reply, or a failed one
    seeds: list[int] = field(default_factory=list)  # the seeds sent, one per call that ran
    projections: list[int] = field(default_factory=list)  # the projection seeds sent
    fingerprints: list[list[list[float]]] = field(default_factory=list)  # per call, per output
    cycle_ms: list[float] = field(default_factory=list)  # per call: seed sent -> fingerprint back
    wall_ms: float = 0.0  # the whole batch on the parent's clock


def run_batch(
    worker: WorkerProcess,
    base: dict[str, Any],
    fixed: list[torch.Tensor],
    n: int,
    draw: Callable[[], int],
    timeout_s: float,
) -> Batch:
    """``n`` timed calls of ``base`` (a ``time`` request's spec), each seed drawn by ``draw`` when
    it is sent (the call's input seed, then its projection seed)."""
    first = draw()
    header = {**base, "calls": n, "seed": first}
    ahead: list[int] = []
    if SEEDS_AHEAD:
        ahead = [draw() for _ in range(n - 1)]
        header["seeds"] = [first, *ahead]  # what the worker holds during call 0: the batch's inputs
    batch = Batch({}, [first])
    t0 = sent = time.perf_counter()
    msg, _ = worker.request(header, fixed, timeout_s)
    for i in range(n):
        if not _is_step(msg, "closed", i):
            break
        projection = draw()
        batch.projections.append(projection)
        msg, _ = worker.request({"op": "project", "projection_seed": projection}, None, timeout_s)
        if not _is_step(msg, "fingerprint", i):
            break
        batch.cycle_ms.append((time.perf_counter() - sent) * 1e3)
        batch.fingerprints.append(msg.get("fingerprints"))
        if i + 1 == n:
            msg, _ = worker.request({"op": "end", "calls": n}, None, timeout_s)
            break
        seed = ahead[i] if SEEDS_AHEAD else draw()
        batch.seeds.append(seed)
        sent = time.perf_counter()
        msg, _ = worker.request({"op": "next", "seed": seed}, None, timeout_s)
    batch.wall_ms = (time.perf_counter() - t0) * 1e3
    batch.reply = msg if "ok" in msg else _unexpected(msg)
    return batch


def _is_step(msg: dict[str, Any], step: str, index: int) -> bool:
    return "ok" not in msg and msg.get("step") == step and msg.get("index") == index


def _unexpected(msg: dict[str, Any]) -> dict[str, Any]:
    """A step out of order (in its schema, but not the one due): the batch failed, as a failed reply
    would say, never crashing the parent. The worker's harness sends steps in order; the solution
    shares its process and socket, so a step out of order is the solution's doing (I10)."""
    shown = {k: msg.get(k) for k in ("step", "index")}
    return {
        "ok": False,
        "code": "protocol_violation",
        "message": f"the worker sent a step out of order {shown}",
    }
