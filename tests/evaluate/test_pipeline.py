"""End-to-end evaluations on the CPU: a good solution passes; every kind of bad input gets its code.

Each case runs the real pipeline: a spawned, guarded worker, the fp64 oracle in the parent, the
interleaved timing rounds where asked. Every failure must come back as a verdict with a reason
code and a message pointing at the cause, within the timeout, and the next evaluation must work.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from kernelproof.api import evaluate
from kernelproof.options import EvalOptions
from kernelproof.wire import protocol

DATA = Path(__file__).resolve().parents[1] / "data"
TASK = str(DATA / "tasks" / "scale_relu.py")
FAST = EvalOptions(device="cpu", db="", seed=11, correctness_only=True, seeds_per_case=1, timeout_s=60)


def sol(name: str) -> str:
    return str(DATA / "solutions" / f"{name}.py")


def test_correct_triton_solution_passes_with_timing_and_ci():
    v = evaluate(
        TASK,
        sol("scale_relu_triton"),
        FAST.replace(correctness_only=False, time_budget_s=2, max_rounds=6, time_interpreted=True),
    )
    assert v.passed, v.reasons
    assert v.correctness.cases_passed == v.correctness.cases_run > 0
    assert v.solution.backend == "triton"
    shape = v.timing.shapes[0]
    assert shape.candidate.n > 0 and shape.baselines["eager"].n > 0
    # Interpreted on the CPU: the rounds are measured, the headline speedup is withheld (tests/measure/test_claims.py)
    (eager,) = [s for s in shape.speedups if s.baseline == "eager"]
    assert eager.median is not None and eager.ci95[0] <= eager.median <= eager.ci95[1]
    assert v.speedup["eager"].median is None and not v.claims.speed
    assert v.to_json()["schema"] == "kernelproof.verdict/2"


@pytest.mark.parametrize(
    ("name", "code", "needle"),
    [
        ("syntax_error", "compile_error", "syntax_error.py:5: "),
        ("no_modelnew", "compile_error", "ModelNew"),
        ("wrong_ctor", "runtime_error", "constructing ModelNew"),
        ("wrong_shape", "wrong_shape", "shape"),
        ("wrong_dtype", "wrong_dtype", "float64"),
        ("raises_forward", "runtime_error", "line 13"),
        ("segfault", "crash", "SIGSEGV"),
        ("ctypes_crash", "forbidden_construct", "ctypes"),
    ],
)
def test_bad_solution_gets_its_reason_code_and_a_pointer_to_the_cause(name, code, needle):
    v = evaluate(TASK, sol(name), FAST)
    assert v.verdict.value == "fail"
    assert code in v.codes, v.reasons
    text = " ".join(r.message + " " + r.detail for r in v.reasons)
    assert needle in text


def test_infinite_loop_is_killed_by_the_timeout_and_the_next_evaluation_works():
    v = evaluate(TASK, sol("infinite_loop"), FAST.replace(timeout_s=8))
    assert v.codes == ["timeout"]
    again = evaluate(TASK, sol("scale_relu_triton"), FAST)
    assert again.passed


def test_plain_torch_solution_is_evaluated_and_flagged():
    v = evaluate(TASK, sol("plain_torch"), FAST)
    assert v.passed
    assert v.solution.backend == "torch"
    assert any(f.startswith("plain_torch") for f in v.flags)


def test_task_without_get_inputs_is_a_task_error():
    v = evaluate(str(DATA / "tasks" / "no_get_inputs.py"), sol("plain_torch"), FAST)
    assert v.verdict.value == "error"
    assert v.codes == ["task_error"]
    assert "get_inputs" in v.reasons[0].message


def test_task_whose_reference_raises_is_a_task_error():
    v = evaluate(str(DATA / "tasks" / "reference_raises.py"), sol("plain_torch"), FAST)
    assert v.verdict.value == "error"
    assert v.codes == ["task_error"]
    assert "RuntimeError" in v.reasons[0].message


def test_kernelbench_compat_reports_the_allclose_rule_beside_the_verdict():
    v = evaluate(TASK, sol("scale_relu_triton"), FAST.replace(kernelbench_compat=True))
    assert v.passed and v.correctness.kernelbench_compatible is True


def test_seed_is_recorded_and_reproduces_the_cases():
    a = evaluate(TASK, sol("scale_relu_triton"), FAST.replace(seed=123))
    b = evaluate(TASK, sol("scale_relu_triton"), FAST.replace(seed=123))
    assert a.settings["seed"] == 123
    assert [c.rel_norm_err for c in a.correctness.cases] == [c.rel_norm_err for c in b.correctness.cases]


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "code"), [("illegal_memory", "crash"), ("gpu_oom", "crash")])
def test_gpu_faults_cost_one_worker_and_the_next_evaluation_works(name, code):
    opts = FAST.replace(device="cuda")
    v = evaluate(TASK, sol(name), opts)
    assert code in v.codes, v.reasons
    assert evaluate(TASK, sol("scale_relu_triton"), opts).passed
    assert torch.cuda.is_available()


@pytest.mark.gpu
def test_sanitize_rejects_an_out_of_bounds_read_that_the_comparison_cannot_see():
    opts = FAST.replace(device="cuda", sanitize=True)
    plain = evaluate(TASK, sol("oob_read"), FAST.replace(device="cuda"))
    assert plain.passed  # the outputs are right
    v = evaluate(TASK, sol("oob_read"), opts)
    assert "sanitizer_error" in v.codes, (v.reasons, v.flags)


def test_large_cases_are_drawn_in_the_worker_and_the_second_run_answers_by_fingerprint(monkeypatch):
    from kernelproof.evaluate import correctness

    monkeypatch.setattr(correctness, "LARGE_CASE_BYTES", 0)  # every case takes the large-case path
    good = evaluate(TASK, sol("scale_relu_triton"), FAST)
    assert good.passed, good.reasons
    bad = evaluate(TASK, sol("wrong_dtype"), FAST)
    assert "wrong_dtype" in bad.codes


def test_sanitizer_evidence_counts_without_the_tools_summary(tmp_path, monkeypatch):
    """A tool that streams an error record and never prints its summary still rejects."""
    import kernelproof.verify.sanitize as sanitize_mod

    fake = tmp_path / "compute-sanitizer"
    fake.write_text(
        "#!/bin/sh\n"
        'echo "========= COMPUTE-SANITIZER"\n'
        'echo "========= Invalid __global__ read of size 4 bytes"\n'
        "shift 4\n"  # --tool X --print-limit N
        'exec "$@"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")

    def run_first_case(worker, timeout_s):
        worker.wait_ready(timeout_s)

    reasons, notes = sanitize_mod.sanitize(
        run_first_case, "cpu", tools=("memcheck", "racecheck"), budget_s=120
    )
    assert [r.code.value for r in reasons] == ["sanitizer_error"], notes
    assert "streamed records" in notes[0], notes
    assert len(notes) == 1, "the first tool with evidence ends the gate"


@pytest.mark.gpu
@pytest.mark.parametrize("distribution", ["spiky", "heavy", "normal"])
def test_a_seed_draws_the_same_case_on_the_gpu_every_time(distribution):
    """The parent and the worker draw a large case from one seed; they must agree bit for bit."""
    from kernelproof.inputs import draw

    shape = (4096, 4096)  # 16 Mi elements: ~16k spike positions, some repeated
    first = draw(shape, distribution, "any", 1234, "cuda", torch.float32)
    for _ in range(3):
        assert torch.equal(draw(shape, distribution, "any", 1234, "cuda", torch.float32), first)


INPLACE_TASK = str(Path(__file__).resolve().parents[1] / "legit" / "tasks" / "scale_shift_inplace.py")


@pytest.mark.parametrize(
    ("name", "which"),
    [("inplace_skipped", "argument 0 (updated in place)"), ("inplace_wrong_return", "(run 1): ")],
)
def test_an_in_place_task_compares_the_updated_input_and_the_returned_output(name, which):
    v = evaluate(INPLACE_TASK, sol(name), FAST)
    assert "mismatch" in v.codes, v.reasons
    assert which in v.reasons[0].message, v.reasons[0].message


def test_an_in_place_declaration_that_disagrees_with_the_reference_is_flagged(tmp_path):
    source = Path(INPLACE_TASK).read_text()
    undeclared = tmp_path / "undeclared.py"
    undeclared.write_text(source.replace('    "inplace": [0],', ""))
    v = evaluate(str(undeclared), sol("inplace_skipped"), FAST)
    assert any(f.startswith("inplace_undeclared: ") and "argument 0" in f for f in v.flags), v.flags
    assert v.passed  # undeclared, the update is not a result: the flag is what says so

    unused = tmp_path / "unused.py"
    unused.write_text(Path(TASK).read_text() + '\nKERNELPROOF = {**KERNELPROOF, "inplace": [0]}\n')
    v = evaluate(str(unused), sol("scale_relu_triton"), FAST)
    assert any(f.startswith("inplace_unused: ") for f in v.flags), v.flags

    declared = evaluate(INPLACE_TASK, INPLACE_TASK.replace("tasks", "solutions"), FAST)
    assert declared.passed and not any(f.startswith("inplace_") for f in declared.flags), declared.flags


BIG_TASK = """
import torch
import torch.nn as nn

rows = 512
cols = 1024  # 2 MiB per tensor: above the wire's bulk threshold


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []


KERNELPROOF = {"variants": {"odd": {"rows": 513, "cols": 1023}}, "cpu": ["default", "odd"]}
"""
BIG_SOLUTION = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0{extra}
"""


@pytest.mark.skipif(not protocol.BULK_AVAILABLE, reason="memfd with seals is Linux-only")
def test_large_tensors_cross_as_sealed_files_and_are_judged_like_any_other(tmp_path, monkeypatch):
    task = tmp_path / "big.py"
    task.write_text(BIG_TASK)
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text(BIG_SOLUTION.format(extra=""))
    bad.write_text(BIG_SOLUTION.format(extra=" + (x > 3).float()"))  # wrong only in the tail
    read = []
    real = protocol.read_sealed
    monkeypatch.setattr(protocol, "read_sealed", lambda fd, meta: read.append(meta) or real(fd, meta))
    v = evaluate(str(task), str(good), FAST)
    assert v.passed, v.reasons
    assert read and all(m["nbytes"] >= protocol.BULK_MIN_BYTES for m in read)  # outputs came as files
    v = evaluate(str(task), str(bad), FAST)
    assert "mismatch" in v.codes, v.reasons


def test_a_traceback_names_the_solution_file_the_user_gave_not_the_workers_copy():
    v = evaluate(TASK, sol("raises_forward"), FAST)
    text = " ".join(r.message + " " + r.detail for r in v.reasons)
    assert f'File "{sol("raises_forward")}", line 13' in text, text
    assert "/ro/solution/" not in text, text
