"""Lower precisions named: fp16 among them, and a timed output's failed fingerprint explained by one.

A matmul that computes in fp16 on an fp32 task is ``precision_downgrade`` naming fp16, whether it
does so from its first call (correctness says so) or only once the timing loop has started (the
timed outputs' fingerprints fail; the parent's fp16 recomputation of the same call explains them).
An output that is another call's, not this call's in any precision, is still ``stale_output``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from kernelproof.api import evaluate
from kernelproof.inputs import fingerprint
from kernelproof.options import EvalOptions
from kernelproof.task import load_task
from kernelproof.verdict import Reason, ReasonCode
from kernelproof.verify.case_plan import build_variant, make_inputs, reference_and_oracle
from kernelproof.verify.oracle_compare import rel_norm_error
from kernelproof.verify.precision import (
    FailedFingerprint,
    classify_downgrade,
    compared,
    lower_precision_outputs,
    timed_output_reason,
)

TESTS = Path(__file__).resolve().parents[1]
TASK = TESTS / "exploits" / "tasks" / "matmul.py"
GPU_TASK = TESTS / "exploits" / "tasks" / "matmul_gpu.py"
SOLUTIONS = TESTS / "data" / "solutions"
STALE = Reason(ReasonCode.STALE_OUTPUT, "stale")
PROJECTION_SEED = 12345


@pytest.fixture(scope="module")
def ctx():
    task = load_task(TASK)
    return build_variant(task, task.meta.cpu[0], torch.device("cpu"), "eval", 7)


def _fp16(args):
    return (args[0].half() @ args[1].half()).float()


def _failed(ctx, args, output: torch.Tensor) -> FailedFingerprint:
    ref, _ = reference_and_oracle(ctx, args)
    want = fingerprint(ref[0], PROJECTION_SEED)
    got = fingerprint(output, PROJECTION_SEED)
    allowed = 6.0 * 1e-6 * want[1]
    assert abs(got[0] - want[0]) > allowed  # the fingerprint does fail under the contract
    return FailedFingerprint(0, 0, (got[0], got[1]), PROJECTION_SEED, allowed, STALE)


def test_fp16_is_compared_on_the_cpu_and_tf32_and_fp8_are_not():
    assert compared("fp32", torch.device("cpu")) == ("fp16", "bf16")
    assert compared("bf16", torch.device("cpu")) == ()


@pytest.mark.gpu
def test_fp8_is_compared_where_the_device_has_it():
    dev = torch.device("cuda")
    has_fp8 = torch.cuda.get_device_capability(dev) >= (8, 9)
    assert ("fp8" in compared("fp32", dev)) == has_fp8 and "tf32" in compared("fp32", dev)


def test_an_fp16_error_is_labelled_fp16_not_the_nearest_other(ctx):
    args = make_inputs(ctx, "normal", 11)
    _, orc = reference_and_oracle(ctx, args)
    err = rel_norm_error(_fp16(args).double(), orc[0])
    label = classify_downgrade(ctx, args, orc[0], err, "msg")
    assert label.code == "precision_downgrade" and label.precision == "fp16", label.message
    assert "matches fp16 arithmetic" in label.message


def test_a_precision_whose_reference_overflows_explains_nothing_and_is_noted(ctx):
    args = [a * 1e5 for a in make_inputs(ctx, "normal", 11)]  # products beyond fp16's 65504
    _, orc = reference_and_oracle(ctx, args)
    label = classify_downgrade(ctx, args, orc[0], 1e-2, "msg")
    assert any("fp16 reference's output is not finite" in n for n in label.notes)
    assert label.precision != "fp16"


@pytest.mark.parametrize("fetched", [True, False], ids=["full_output", "fingerprint_only"])
def test_a_timed_fp16_output_is_a_downgrade_that_names_fp16_and_the_change_of_path(ctx, fetched):
    args = make_inputs(ctx, "normal", 21)
    out = _fp16(args)
    reason = timed_output_reason(ctx, args, _failed(ctx, args, out), out if fetched else None)
    assert reason.code is ReasonCode.PRECISION_DOWNGRADE, reason.message
    assert "fp16" in reason.message and "changed its computation path" in reason.message


@pytest.mark.parametrize("fetched", [True, False], ids=["full_output", "fingerprint_only"])
def test_another_calls_output_is_still_stale(ctx, fetched):
    args = make_inputs(ctx, "normal", 21)
    previous = make_inputs(ctx, "normal", 22)
    out = previous[0] @ previous[1]
    reason = timed_output_reason(ctx, args, _failed(ctx, args, out), out if fetched else None)
    assert reason is STALE


def test_an_fp16_output_of_another_call_is_still_stale(ctx):
    args = make_inputs(ctx, "normal", 21)
    out = _fp16(make_inputs(ctx, "normal", 22))
    assert timed_output_reason(ctx, args, _failed(ctx, args, out), out) is STALE


def _run(solution: str, device: str = "cpu", task: Path = TASK):
    options = EvalOptions(
        device=device,
        db="",
        seed=5,
        seeds_per_case=1,
        time_budget_s=1.0,
        min_rounds=2,
        max_rounds=4,
        timeout_s=180.0,
    )
    return evaluate(os.path.relpath(task), os.path.relpath(SOLUTIONS / f"{solution}.py"), options)


def test_rejects_an_fp16_matmul_in_correctness_naming_fp16():
    v = _run("fp16_matmul")
    assert v.codes == ["precision_downgrade"], v.reasons
    assert "matches fp16 arithmetic" in v.reasons[0].message


def test_rejects_a_switch_to_fp16_after_checking_as_a_downgrade_in_timing():
    v = _run("fp16_after_checking")
    assert v.correctness is not None and v.correctness.cases_passed == v.correctness.cases_run > 0
    assert v.codes == ["precision_downgrade"], v.reasons
    message = v.reasons[0].message
    assert "fp16" in message and "timed call" in message and "changed its computation path" in message


def test_a_previous_calls_output_after_checking_is_still_stale_output():
    v = _run("stale_after_checking")
    assert v.correctness is not None and v.correctness.cases_passed == v.correctness.cases_run > 0
    assert v.codes == ["stale_output"], v.reasons


@pytest.mark.gpu
def test_an_fp8_output_is_labelled_fp8_where_the_device_has_it():
    task = load_task(GPU_TASK)
    gpu = build_variant(task, "small", torch.device("cuda"), "eval", 7)
    if "fp8" not in compared("fp32", gpu.device):
        pytest.skip("this device has no fp8 arithmetic")
    args = make_inputs(gpu, "normal", 11)
    _, orc = reference_and_oracle(gpu, args)
    out = lower_precision_outputs(gpu, args, "fp8")[0]
    label = classify_downgrade(gpu, args, orc[0], rel_norm_error(out.double(), orc[0]), "msg")
    assert label.code == "precision_downgrade" and label.precision == "fp8", label.message


@pytest.mark.gpu
@pytest.mark.parametrize(
    "solution, code, needle",
    [
        ("fp16_matmul", "precision_downgrade", "matches fp16 arithmetic"),
        ("fp16_after_checking", "precision_downgrade", "changed its computation path"),
        ("stale_after_checking", "stale_output", "does not match its fresh inputs"),
    ],
)
def test_on_a_gpu_fp16_is_named_against_tf32_and_a_stale_output_stays_stale(solution, code, needle):
    v = _run(solution, "cuda", GPU_TASK)
    assert v.codes == [code], v.reasons
    assert needle in v.reasons[0].message and (
        code != "precision_downgrade" or "fp16" in v.reasons[0].message
    )


@pytest.mark.parametrize("computed", ["fp16", "another_call"])
def test_a_hidden_recheck_names_a_downgrade_and_keeps_a_stale_output_stale(ctx, computed):
    from kernelproof.verify.oracle_compare import compare, tolerance_for
    from kernelproof.verify.precision import rechecked_reason

    args = make_inputs(ctx, "normal", 31)
    ref, orc = reference_and_oracle(ctx, args)
    other = make_inputs(ctx, "normal", 32)
    out = _fp16(args) if computed == "fp16" else other[0] @ other[1]
    cmp = compare(out, orc[0], ref[0], tolerance_for(ref[0], orc[0], ctx.dtype))
    assert not cmp.passed
    reason = rechecked_reason(ctx, args, orc[0], cmp, 0)
    if computed == "fp16":
        assert reason.code is ReasonCode.PRECISION_DOWNGRADE and "fp16" in reason.message, reason.message
    else:
        assert reason.code is ReasonCode.STALE_OUTPUT and "re-checked" in reason.message
