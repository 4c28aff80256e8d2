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
