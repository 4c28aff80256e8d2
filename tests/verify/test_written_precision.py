"""A task is judged in the precision it is written in (kernelproof/verify/contract.py).

Without a declared precision, a task whose get_inputs() makes bf16 tensors is a bf16 task: its
inputs reach the solution as bf16 and the tolerance is bf16's, so a solution wrong only on bf16
inputs is a ``mismatch`` (cast to float32, as before, it passed 16/16). ``--precision`` overrides
the contract for everyone alike and the verdict says where the contract came from. fp32 tasks
(every KernelBench task as published) are judged exactly as before.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
import torch
from rich.console import Console

from kernelproof.api import evaluate, evaluation_key
from kernelproof.console import print_verdict
from kernelproof.options import EvalOptions
from kernelproof.task import load_task
from kernelproof.verify import audit as task_audit
from kernelproof.verify.case_plan import build_variant, make_inputs
from kernelproof.verify.contract import judged

DATA = Path(__file__).resolve().parents[1] / "data"
TASKS = DATA / "tasks"
SOLUTIONS = DATA / "solutions"
CPU = torch.device("cpu")

FP32_TASK = """
import torch
N = 64
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(N))
    def forward(self, x, y):
        return x * self.w + y
def get_inputs():
    return [torch.randn(8, N), torch.randn(8, N, dtype=torch.float64)]
def get_init_inputs():
    return []
"""


def _task(name: str, flag: str | None = None):
    return judged(load_task(TASKS / f"{name}.py"), flag)


def _run(task: str, solution: str, precision: str | None = None, device: str = "cpu"):
    options = EvalOptions(
        device=device, db="", seed=5, seeds_per_case=1, correctness_only=True, precision=precision
    )
    return evaluate(
        os.path.relpath(TASKS / f"{task}.py"), os.path.relpath(SOLUTIONS / f"{solution}.py"), options
    )


def test_a_bf16_task_without_a_declared_precision_is_judged_in_bf16_as_written():
    task = _task("bf16_product")
    assert (task.meta.precision, task.meta.precision_source, task.meta.keep_dtypes) == (
        "bf16",
        "as written",
        True,
    )


def test_an_fp16_model_made_with_half_is_an_fp16_task():
    task = _task("fp16_half_linear")
    assert (task.meta.precision, task.meta.precision_source) == ("fp16", "as written")


def test_an_fp32_task_is_judged_in_fp32_and_cast_as_before(tmp_path):
    path = tmp_path / "fp32_task.py"
    path.write_text(FP32_TASK)
    task = judged(load_task(path))
    assert (task.meta.precision, task.meta.precision_source, task.meta.keep_dtypes) == (
        "fp32",
        "as written",
        False,
    )
    ctx = build_variant(task, "default", CPU, "eval", 3)
    for dist in ("task", "normal"):
        assert [a.dtype for a in make_inputs(ctx, dist, 11)] == [torch.float32, torch.float32]


def test_a_declared_precision_stands_and_the_flag_overrides_it(tmp_path):
    path = tmp_path / "declared.py"
    path.write_text(FP32_TASK + '\nKERNELPROOF = {"precision": "bf16"}\n')
    declared = judged(load_task(path))
    assert (declared.meta.precision, declared.meta.precision_source) == ("bf16", "declared")
    flagged = judged(load_task(path), "fp16")
    assert (flagged.meta.precision, flagged.meta.precision_source, flagged.meta.keep_dtypes) == (
        "fp16",
        "flag",
        False,
    )


def test_the_flag_casts_a_bf16_task_to_fp32_for_everyone():
    task = _task("bf16_product", "fp32")
    assert (task.meta.precision, task.meta.precision_source, task.meta.keep_dtypes) == ("fp32", "flag", False)
    ctx = build_variant(task, "default", CPU, "eval", 3)
    assert [a.dtype for a in make_inputs(ctx, "task", 1)] == [torch.float32, torch.float32]


@pytest.mark.parametrize("distribution", ["task", "normal", "large"])
def test_drawn_distributions_keep_each_slots_dtype(distribution):
    ctx = build_variant(_task("bf16_gather_rows"), "default", CPU, "eval", 3)
    make_inputs(ctx, "task", 1)  # the slots, from get_inputs() itself
    table, index = make_inputs(ctx, distribution, 7)
    assert (table.dtype, index.dtype) == (torch.bfloat16, torch.int64)
    assert ctx.reference.scale.dtype == torch.float32  # the task's fp32 parameter is not cast either
    product = build_variant(_task("bf16_product"), "default", CPU, "eval", 3)
    make_inputs(product, "task", 1)
    drawn = make_inputs(product, distribution, 7)  # drawn from the seed alone: every slot a float
    assert [a.dtype for a in drawn] == [torch.bfloat16, torch.bfloat16]


def test_the_audit_of_a_bf16_contract_rejects_its_controls_and_runs_no_bf16_control():
    task = _task("bf16_product")
    report = task_audit.audit_variant(task, build_variant(task, "default", CPU, "eval", 3), 9)
    names = {c.name for c in report.controls}
    assert not report.degenerate, report.summary()
    assert {"zeros", "mean", "passthrough", "other_seed"} <= names and "bf16_reference" not in names
    fp32 = _task("bf16_product", "fp32")  # judged in fp32, the bf16 reference is a control again
    report = task_audit.audit_variant(fp32, build_variant(fp32, "default", CPU, "eval", 3), 9)
    bf16 = [c for c in report.controls if c.name == "bf16_reference"]
    assert not report.degenerate and bf16 and bf16[0].failed_as_it_should, report.summary()


def test_a_solution_wrong_only_on_bf16_inputs_is_a_mismatch_under_the_bf16_contract():
    v = _run("bf16_product", "bf16_product_zeros_on_bf16")
    assert v.codes == ["mismatch"], v.reasons
    assert (v.correctness.precision, v.correctness.precision_source) == ("bf16", "as written")


def test_precision_fp32_judges_the_bf16_task_in_fp32_and_says_so():
    v = _run("bf16_product", "bf16_product_zeros_on_bf16", precision="fp32")
    assert v.passed, v.reasons  # KernelBench's cast: the solution never sees bf16
    assert (v.correctness.precision, v.correctness.precision_source) == ("fp32", "flag")
    assert "contract fp32 (flag)" in v.correctness.tolerance
    assert v.to_json()["correctness"]["precision_source"] == "flag"
    out = io.StringIO()
    print_verdict(v, Console(file=out, width=200, emoji=False, color_system=None))
    assert "(contract fp32, flag)" in out.getvalue()


def test_the_precision_flag_is_part_of_the_store_key():
    task, solution = TASKS / "bf16_product.py", SOLUTIONS / "bf16_product_triton.py"
    keys = {
        evaluation_key(str(task), str(solution), EvalOptions(precision=p), "cpu")
        for p in (None, "fp32", "bf16")
    }
    assert len(keys) == 3


@pytest.mark.parametrize("solution", ["bf16_product_triton", "bf16_product_triton_fp32_math"])
def test_an_honest_bf16_triton_kernel_passes_the_bf16_contract_on_the_cpu(solution):
    v = _run("bf16_product", solution)
    assert v.passed, v.reasons
    assert (v.correctness.precision, v.correctness.precision_source) == ("bf16", "as written")


@pytest.mark.parametrize(
    "task, solution, precision",
    [("fp16_half_linear", "fp16_half_linear", "fp16"), ("bf16_gather_rows", "bf16_gather_rows", "bf16")],
)
def test_half_and_mixed_tasks_pass_their_own_contract(task, solution, precision):
    v = _run(task, solution)  # the mixed solution asserts its inputs are bf16 and int64
    assert v.passed, v.reasons
    assert (v.correctness.precision, v.correctness.precision_source) == (precision, "as written")


@pytest.mark.gpu
@pytest.mark.parametrize("solution", ["bf16_product_triton", "bf16_product_triton_fp32_math"])
def test_an_honest_bf16_triton_kernel_passes_the_bf16_contract_on_a_gpu(solution):
    v = _run("bf16_product", solution, device="cuda")
    assert v.passed, v.reasons
    assert (v.correctness.precision, v.correctness.precision_source) == ("bf16", "as written")


@pytest.mark.gpu
def test_a_solution_wrong_only_on_bf16_inputs_is_a_mismatch_on_a_gpu():
    v = _run("bf16_product", "bf16_product_zeros_on_bf16", device="cuda")
    assert v.codes == ["mismatch"], v.reasons
