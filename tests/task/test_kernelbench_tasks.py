"""KernelBench tasks as published: models written the way KernelBench writes them are judged, not refused.

Each task here is shaped like a class of published task that kernelproof once ended in its own
error: a tensor kept as a plain attribute, a mask made in forward, a dropout layer in training
mode. The identity solution (the task's own Model as ModelNew) must pass, as KernelBench's sweep
pairs them.
"""

from __future__ import annotations

from pathlib import Path

from kernelproof.api import evaluate
from kernelproof.options import EvalOptions

DATA = Path(__file__).resolve().parents[1] / "data"
FAST = EvalOptions(device="cpu", db="", seed=5, correctness_only=True, seeds_per_case=1, timeout_s=120)


def task(name: str) -> str:
    return str(DATA / "tasks" / f"{name}.py")


def identity(name: str) -> str:
    return str(DATA / "solutions" / f"identity_{name}.py")


def test_a_plain_attribute_tensor_used_in_a_matmul_has_a_float64_oracle():
    v = evaluate(task("kb_plain_attribute"), identity("kb_plain_attribute"), FAST)
    assert v.passed, v.reasons
    assert not any(f.startswith("oracle_fallback") for f in v.flags)


def test_a_mask_made_in_forward_has_a_float64_oracle():
    v = evaluate(task("kb_mask_in_forward"), identity("kb_mask_in_forward"), FAST)
    assert v.passed, v.reasons
    assert not any(f.startswith("oracle_fallback") for f in v.flags)


def test_a_dropout_task_is_evaluated_in_eval_mode_and_says_so():
    v = evaluate(task("dropout_train"), identity("dropout_train"), FAST)
    assert v.passed, v.reasons
    assert any(f.startswith("random_reference") and "eval() mode" in f for f in v.flags), v.flags


def test_a_candidate_that_still_drops_elements_fails_with_a_message_that_names_dropout():
    v = evaluate(task("dropout_train"), str(DATA / "solutions" / "dropout_still_training.py"), FAST)
    assert not v.passed
    assert v.codes[0] in ("mismatch", "nondeterministic"), v.reasons
    assert "dropout" in v.reasons[0].message


def test_the_refusal_of_random_references_is_kept_on_request():
    v = evaluate(task("dropout_train"), identity("dropout_train"), FAST.replace(refuse_random_reference=True))
    assert v.verdict.value == "error" and v.codes == ["task_error"]
    assert "random" in v.reasons[0].message


def test_dropout_whose_mask_depends_on_the_dtype_is_still_found_random():
    """On CUDA dropout's masks differ between float32 and float64 under one seed: the reference's
    error against the oracle is then as large as the randomness. Weighed in eval() mode, it is found
    random (before: the task was called degenerate on an H200, every control passing)."""
    v = evaluate(task("dropout_dtype_mask"), identity("dropout_dtype_mask"), FAST)
    assert v.passed, v.reasons
    assert any(f.startswith("random_reference") for f in v.flags), v.flags


def test_plain_attributes_are_given_to_the_candidate_by_name():
    """h0 drawn in another order than the reference's is overwritten with the reference's values,
    as the weights are (before, the candidate's own h0 made every case a mismatch)."""
    v = evaluate(task("kb_h0"), str(DATA / "solutions" / "plain_attribute_other_order.py"), FAST)
    assert v.passed, v.reasons
