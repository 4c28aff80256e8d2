"""Each timed output is fingerprinted right after its own call, so one reused buffer is judged fairly.

A solution that returns one persistent buffer from every call (the CUDA-graph pattern) used to be
judged stale: every output was fingerprinted after the whole batch, when all but the last held
another call's values. The worker now fingerprints each call's results before the next call's
inputs are written, counts the calls whose outputs shared storage, keeps copies from then on for
the parent's hidden re-check, and names the calls whose full output was overwritten first.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from kernelproof.inputs import fingerprint, timed_inputs
from kernelproof.measure.batch import run_batch
from kernelproof.verify.case_plan import run_model
from kernelproof.wire.expected import Expected

sys.path.insert(0, str(Path(__file__).parent))
from worker_session import DATA, EXPLOITS, loaded  # noqa: E402

SEEDS = [101, 202, 303, 404]
PROJECTIONS = [7, 8, 9, 10]


def _time(worker, ctx):
    """A batch driven as the parent drives it, call by call, with the test's seeds in order."""
    spec, fixed = ctx.input_spec()
    order = iter([s for pair in zip(SEEDS, PROJECTIONS) for s in pair])
    batch = run_batch(worker, {"op": "time", **spec}, fixed, len(SEEDS), lambda: next(order), 120)
    assert batch.reply.get("ok"), batch.reply
    assert batch.seeds == SEEDS and batch.projections == PROJECTIONS
    return {**batch.reply, "fingerprints": batch.fingerprints}


def _reference(ctx, seed: int) -> torch.Tensor:
    args = timed_inputs(ctx.slots, ctx.fixed, ctx.scalars, seed, ctx.device)
    return run_model(ctx.reference, args, ctx.precision, ctx.inplace)[0]


def _close(got: list[float], want: list[float]) -> bool:
    return all(abs(g - w) <= 1e-4 * max(1.0, abs(w)) for g, w in zip(got, want))


def test_one_buffer_returned_by_every_call_is_fingerprinted_per_call_and_counted():
    task, solution = (
        EXPLOITS / "tasks" / "scale_shift.py",
        EXPLOITS / "solutions" / "b4_static_output_buffer.py",
    )
    with loaded(task, solution) as (worker, ctx):
        reply = _time(worker, ctx)
        for i, (seed, proj) in enumerate(zip(SEEDS, PROJECTIONS)):
            assert _close(reply["fingerprints"][i][0], fingerprint(_reference(ctx, seed), proj)), i
        assert reply["output_reused"] == len(SEEDS) - 1
        assert reply["lost"] == [0]  # overwritten by call 1, before the worker knew to copy

        # From then on every call's results are copied: each can be fetched with its own values.
        like = Expected.like([_reference(ctx, SEEDS[2])])  # the parent always says what it expects
        fetched, outs = worker.request({"op": "fetch", "index": 2}, None, 60, like)
        assert fetched.get("ok"), fetched
        assert torch.allclose(outs[0], _reference(ctx, SEEDS[2]), rtol=1e-5, atol=1e-6)
        missing, _ = worker.request({"op": "fetch", "index": 0}, None, 60, like)
        assert missing["code"] == "missing_result"

        again = _time(worker, ctx)  # a later batch: copies from its first call on
        assert again["output_reused"] == len(SEEDS) - 1 and again["lost"] == []


def test_fresh_outputs_are_neither_counted_nor_lost():
    task, solution = DATA / "tasks" / "scale_relu.py", DATA / "solutions" / "scale_relu_triton.py"
    with loaded(task, solution) as (worker, ctx):
        reply = _time(worker, ctx)
        assert reply["output_reused"] == 0 and reply["lost"] == []
        for i, (seed, proj) in enumerate(zip(SEEDS, PROJECTIONS)):
            assert _close(reply["fingerprints"][i][0], fingerprint(_reference(ctx, seed), proj)), i
