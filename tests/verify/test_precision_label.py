"""An error is called a lower precision's only when it lies within the band of that precision's error.

`precision_downgrade` once said "the error matches bf16 arithmetic" for an error 80 times smaller
than the bf16 reference's. The label now needs the error within 1/4x..4x of the lower precision's
own error on the same case; otherwise it is a mismatch that names the nearest precision.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelproof.evaluate.correctness import classify_downgrade
from kernelproof.task import load_task
from kernelproof.verify.case_plan import build_variant, make_inputs, reference_and_oracle
from kernelproof.verify.oracle_compare import rel_norm_error
from kernelproof.verify.precision import lower_precision_outputs

TASK = Path(__file__).resolve().parents[1] / "exploits" / "tasks" / "matmul.py"


@pytest.fixture(scope="module")
def case():
    task = load_task(TASK)
    ctx = build_variant(task, task.meta.cpu[0], torch.device("cpu"), "eval", 7)
    args = make_inputs(ctx, "normal", 11)
    _, orc = reference_and_oracle(ctx, args)
    errs = {
        p: rel_norm_error(lower_precision_outputs(ctx, args, p)[0].double(), orc[0]) for p in ("bf16", "fp16")
    }
    return ctx, args, orc[0], errs


def test_an_error_equal_to_the_bf16_references_is_labelled_bf16(case):
    ctx, args, orc, errs = case
    label = classify_downgrade(ctx, args, orc, errs["bf16"], "msg")
    assert label.code == "precision_downgrade" and "bf16" in label.message


@pytest.mark.parametrize("factor", [4.1, 1 / 80])
def test_an_error_outside_the_band_is_a_mismatch_that_names_the_nearest_precision(case, factor):
    ctx, args, orc, errs = case
    err = errs["bf16"] * factor
    label = classify_downgrade(ctx, args, orc, err, "msg")
    assert label.code == "mismatch"
    nearest = min(errs, key=lambda p: abs(torch.tensor(err / errs[p]).log()))
    assert f"the nearest, {nearest}," in label.message


def test_just_inside_the_band_is_still_the_lower_precision(case):
    ctx, args, orc, errs = case
    label = classify_downgrade(ctx, args, orc, errs["bf16"] * 3.9, "msg")
    assert label.code == "precision_downgrade" and "bf16" in label.message
