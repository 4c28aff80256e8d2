"""The float64 oracle in chunks of the batch only where the parent has shown it is the same oracle.

The check runs at a small shape (the first rows of a case) and compares the oracle on the whole
batch with the oracle on its halves; a task that mixes the batch fails it and runs whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelproof.task import load_task
from kernelproof.verify import chunks
from kernelproof.verify.case_plan import (
    build_variant,
    check_batch_separable,
    make_inputs,
    reference_and_oracle,
)

DATA = Path(__file__).resolve().parents[1] / "data"

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.w = nn.Parameter(torch.randn(features, features))

    def forward(self, x):
        return {forward}


batch_size = 16
features = 24


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
"""


def _ctx(tmp_path, forward: str):
    path = tmp_path / "task.py"
    path.write_text(TASK.format(forward=forward))
    ctx = build_variant(load_task(path), "default", torch.device("cpu"), "eval", 3)
    return ctx, make_inputs(ctx, "normal", 1)


@pytest.mark.parametrize("forward", ["torch.relu(x @ self.w)", "torch.softmax(x @ self.w, dim=1)"])
def test_accepts_a_task_whose_rows_are_computed_independently(tmp_path, forward):
    ctx, args = _ctx(tmp_path, forward)
    assert check_batch_separable(ctx, args)


@pytest.mark.parametrize(
    "forward",
    [
        "(x @ self.w).sum(dim=0)",  # a sum over the batch: dim 0 of the output is not the batch
        "x - x.mean(dim=0, keepdim=True)",  # batch statistics: the right shape, mixed values
        "torch.cumsum(x, dim=0)",  # a scan along the batch
        "x.flip(0) @ self.w",  # rows reordered across the batch
    ],
)
def test_refuses_a_task_that_mixes_the_batch(tmp_path, forward):
    ctx, args = _ctx(tmp_path, forward)
    assert not check_batch_separable(ctx, args)


def test_refuses_inputs_without_a_common_batch():
    assert chunks.batch_of([torch.zeros(4, 3), torch.zeros(5, 3)]) is None
    assert chunks.batch_of([torch.zeros(1, 3)]) is None  # one row: nothing to chunk
    assert chunks.batch_of([torch.zeros(4, 3), 2.0]) == 4


def test_the_chunked_oracle_equals_the_whole_one(tmp_path, monkeypatch):
    ctx, args = _ctx(tmp_path, "torch.softmax(x @ self.w, dim=1)")
    _, whole = reference_and_oracle(ctx, args)
    ctx.batch_separable = True
    monkeypatch.setattr(chunks, "CHUNK_INPUT_BYTES", 8 * 24 * 3)  # three rows of float64 a chunk
    calls = []
    real = chunks.oracle_in_chunks
    monkeypatch.setattr(
        "kernelproof.verify.case_plan.oracle_in_chunks", lambda run, a, n: calls.append(n) or real(run, a, n)
    )
    _, chunked = reference_and_oracle(ctx, args)
    assert calls == [6]  # 16 rows in chunks of at most 3
    assert torch.allclose(chunked[0], whole[0], rtol=1e-13, atol=0) and chunked[0].dtype == torch.float64


def test_the_timed_rounds_recheck_runs_the_oracle_in_the_same_chunks(tmp_path, monkeypatch):
    """The re-check of a timed call's output holds one slice of the float64 inputs at a time, as the
    cases do and as the reservation counts (on an H100 a whole-batch oracle there asked for 16 GiB
    at once for level1/47_Sum's 8.6 GB input); an honest output still passes and a wrong one not."""
    from kernelproof.inputs import timed_inputs
    from kernelproof.measure import session
    from kernelproof.verify.case_plan import run_model
    from kernelproof.verify.oracle_compare import tolerance_for

    ctx, args = _ctx(tmp_path, "torch.relu(x @ self.w)")
    ctx.batch_separable = check_batch_separable(ctx, args)
    assert ctx.batch_separable
    ref, orc = reference_and_oracle(ctx, args)
    tol = tolerance_for(ref[0], orc[0], ctx.dtype)
    monkeypatch.setattr(chunks, "CHUNK_INPUT_BYTES", 8 * 24 * 4)  # four rows of float64 a chunk
    calls = []
    real = chunks.oracle_in_chunks
    monkeypatch.setattr(
        "kernelproof.verify.case_plan.oracle_in_chunks", lambda run, a, n: calls.append(n) or real(run, a, n)
    )
    x = timed_inputs(ctx.slots, ctx.fixed, ctx.scalars, 7, ctx.device)[0]
    honest = run_model(ctx.reference, [x], ctx.precision)

    class _Worker:
        def __init__(self, outputs):
            self.outputs = outputs

        def request_outputs(self, header, tensors, like, timeout_s):
            return {"ok": True}, self.outputs

    assert session._hidden_recheck(ctx, _Worker(honest), 0, [7], tol, 60.0) is None
    assert calls == [4]  # 16 rows in chunks of at most 4
    wrong = [honest[0] + 1.0]
    assert session._hidden_recheck(ctx, _Worker(wrong), 0, [7], tol, 60.0) is not None


def test_a_task_refused_runs_its_oracle_whole(tmp_path, monkeypatch):
    ctx, args = _ctx(tmp_path, "(x @ self.w).sum(dim=0)")
    ctx.batch_separable = check_batch_separable(ctx, args)
    monkeypatch.setattr(chunks, "CHUNK_INPUT_BYTES", 64)
    monkeypatch.setattr("kernelproof.verify.case_plan.oracle_in_chunks", lambda *a: pytest.fail("chunked"))
    _, orc = reference_and_oracle(ctx, args)
    assert orc[0].shape == (24,)


def test_the_rooflines_bytes_from_recorded_sizes_equal_those_of_a_case(tmp_path):
    path = tmp_path / "task.py"
    path.write_text(TASK.format(forward="x @ self.w"))
    ctx = build_variant(load_task(path), "default", torch.device("cpu"), "eval", 3)
    assert ctx.min_bytes_known() is None  # nothing recorded before a case
    args = make_inputs(ctx, "normal", 1)
    ref, _ = reference_and_oracle(ctx, args)
    assert ctx.min_bytes_known() == ctx.min_bytes(args, ref) == float((16 * 24 + 24 * 24 + 16 * 24) * 4)
