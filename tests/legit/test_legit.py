"""The legit zoo: correct solutions that kernelproof must pass (zero false positives).

Two groups. Every example solution under examples/ against the suite task at the same relative
path under suite/ (correctness only on the CPU, one seed per case, to keep CI time down). And
hard legitimate cases written to sit next to an exploit they resemble: a reduction whose atomics
reorder its additions (next to A2), a split-precision matmul at fp32 accuracy (next to A9's TF32
dot), a kernel specialised per shape with a general fallback (next to A11), a scalar loss (next
to A5), a kernel importing a library module the worker had not loaded, a task that is in place by
contract (next to A8), and block partial sums combined by a small ATen epilogue, timed on the CPU
where launch accounting counts launches (next to E2). GPU rows are marked `gpu` and run unchanged
on a CUDA machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelproof.api import evaluate
from kernelproof.options import EvalOptions

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TASKS = HERE / "tasks"
SOLUTIONS = HERE / "solutions"
EXPLOIT_TASKS = REPO / "tests" / "exploits" / "tasks"
DATA_TASKS = REPO / "tests" / "data" / "tasks"
SEED = 20260514  # fixed: every case plan and input reproduces


@dataclass(frozen=True)
class Legit:
    solution: str  # file stem under solutions/
    task: Path  # the task file
    device: str = "cpu"
    timing: bool = False  # run the timing rounds too (GPU: launch accounting lives there)

    @property
    def id(self) -> str:
        return self.solution if self.device == "cpu" else f"{self.solution}[cuda]"


L = Legit
CASES = (
    L("atomic_row_mean", EXPLOIT_TASKS / "row_mean.py"),
    L("atomic_row_mean", EXPLOIT_TASKS / "row_mean.py", device="cuda", timing=True),
    L("split_precision_matmul", EXPLOIT_TASKS / "matmul.py"),
    L("split_precision_matmul", EXPLOIT_TASKS / "matmul_gpu.py", device="cuda", timing=True),
    L("shape_specialised_row_mean", EXPLOIT_TASKS / "row_mean.py"),
    L("shape_specialised_row_mean", EXPLOIT_TASKS / "row_mean.py", device="cuda", timing=True),
    L("partial_sums_row_mean", EXPLOIT_TASKS / "row_mean.py", timing=True),  # CPU launch accounting
    L("mse_loss_scalar", TASKS / "mse_loss.py"),
    L("gelu_libdevice", TASKS / "gelu_tanh.py"),
    L("gelu_libdevice", TASKS / "gelu_tanh.py", device="cuda", timing=True),
    L("scale_shift_inplace", TASKS / "scale_shift_inplace.py", device="cuda", timing=True),
    L("cudnn_benchmark_affine", EXPLOIT_TASKS / "scale_shift.py", timing=True),
    L("folded_batchnorm", TASKS / "batchnorm_eval.py"),
    L("lazy_cpp_extension", DATA_TASKS / "scale_relu.py"),  # a build requested from __init__, in a try
    L("torch_library_op_from_tmp", DATA_TASKS / "scale_relu.py"),  # load of /tmp files, torch.ops
    L("load_in_init_from_tmp", DATA_TASKS / "scale_relu.py"),  # load of /tmp files from __init__
    L("load_at_import_from_literal_tmp", DATA_TASKS / "scale_relu.py"),  # load of "/tmp/..." at import
    L("native_load_in_init", DATA_TASKS / "scale_relu.py", device="cuda", timing=True),  # load_cuda request
    L("cuda_graph_affine", EXPLOIT_TASKS / "scale_shift.py"),
    L("cuda_graph_affine", EXPLOIT_TASKS / "scale_shift.py", device="cuda", timing=True),
    L("partial_sums_row_mean", EXPLOIT_TASKS / "row_mean.py", device="cuda", timing=True),
    L("autotuned_gelu", TASKS / "gelu_tanh.py", timing=True),
    L("autotuned_gelu", TASKS / "gelu_tanh.py", device="cuda", timing=True),
    L("cudnn_benchmark_affine", EXPLOIT_TASKS / "scale_shift.py", device="cuda", timing=True),
    L("cpu_extension_published_flags", DATA_TASKS / "scale_relu.py"),  # -ftree-vectorize, include_paths()
    L("cpu_extension_empty_cuda_sources", DATA_TASKS / "scale_relu.py"),  # cuda_sources=[], with_cuda=False
    L("torch_library_inline_op", DATA_TASKS / "scale_relu.py", timing=True),  # torch.ops calls are launches
    L("python_style_gelu", TASKS / "gelu_tanh.py"),  # dataclass, NamedTuple, logging, print, __main__
    L("autotuned_gelu_pruned", TASKS / "gelu_tanh.py", timing=True),  # prune_configs_by, warmup=, rep=
    L("autotuned_gelu_pruned", TASKS / "gelu_tanh.py", device="cuda", timing=True),
    L("triton_asserts_cuda_inputs", TASKS / "gelu_tanh.py", device="cuda", timing=True),
    L("cuda_extension_published_flags", DATA_TASKS / "scale_relu.py", device="cuda", timing=True),
    L("lazy_cuda_extension", DATA_TASKS / "scale_relu.py", device="cuda", timing=True),  # CUDA-L1's pattern
)


def _relative(path) -> str:
    return os.path.relpath(path, os.getcwd())


def _options(device: str, timing: bool) -> EvalOptions:
    return EvalOptions(
        device=device,
        db="",
        seed=SEED,
        correctness_only=not timing,
        seeds_per_case=1,
        time_budget_s=2.0,
        min_rounds=2,
        max_rounds=6,
        timeout_s=600.0,
    )


def describe(v) -> str:
    reasons = "; ".join(f"{r.code.value}: {r.message[:300]}" for r in v.reasons)
    return f"verdict {v.verdict.value}, reasons [{reasons}], flags {list(v.flags)}"


def _param(c: Legit):
    return pytest.param(c, id=c.id, marks=[pytest.mark.gpu] if c.device == "cuda" else [])


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_hard_legit_case_passes(case: Legit):
    sol = SOLUTIONS / f"{case.solution}.py"
    v = evaluate(_relative(case.task), _relative(sol), _options(case.device, case.timing))
    assert v.passed, describe(v)
    assert v.correctness.cases_passed == v.correctness.cases_run > 0


def test_cudnn_benchmark_is_flagged_and_the_baselines_follow_it():
    v = evaluate(
        _relative(EXPLOIT_TASKS / "scale_shift.py"),
        _relative(SOLUTIONS / "cudnn_benchmark_affine.py"),
        _options("cpu", True),
    )
    assert v.passed, describe(v)
    assert any("torch.backends.cudnn.benchmark=True" in f and "allowed" in f for f in v.flags), describe(v)
    assert any(f.startswith("numeric_neutral_setting: the baselines ran with") for f in v.flags), describe(v)


def test_task_in_place_by_contract_passes():
    v = evaluate(
        _relative(TASKS / "scale_shift_inplace.py"),
        _relative(SOLUTIONS / "scale_shift_inplace.py"),
        _options("cpu", False),
    )
    assert v.passed, describe(v)


def _example_pairs() -> list:
    pairs = []
    for sol in sorted((REPO / "examples").glob("**/*.py")):
        rel = sol.relative_to(REPO / "examples")
        task = REPO / "suite" / rel
        if task.is_file():
            pairs.append(pytest.param(task, sol, id=str(rel.with_suffix(""))))
    return pairs


def _level1_pairs() -> list:
    return [p for p in _example_pairs() if str(p.id).startswith("level1/")]


def _other_pairs() -> list:
    """Level 2 and 3: level 1's examples pass through the timed test below, which checks the same
    cases (same options and seed) before it times them."""
    return [p for p in _example_pairs() if not str(p.id).startswith("level1/")]


def test_every_example_is_judged_by_one_of_the_two_example_tests():
    assert len(_level1_pairs()) + len(_other_pairs()) == len(_example_pairs()) >= 25


@pytest.mark.parametrize(("task", "solution"), _other_pairs())
def test_example_solution_passes(task: Path, solution: Path):
    v = evaluate(_relative(task), _relative(solution), _options("cpu", False))
    assert v.passed, describe(v)


@pytest.mark.parametrize(("task", "solution"), _level1_pairs())
def test_level1_example_passes_timed_on_the_cpu(task: Path, solution: Path, monkeypatch):
    """Timed too, with a small budget: the hidden re-check of a timed output once failed an honest
    gelu here (a bound from another case), which correctness-only runs never reach."""
    from kernelproof.measure import session

    opts = _options("cpu", True).replace(time_budget_s=0.3, min_rounds=2, max_rounds=2, time_interpreted=True)
    monkeypatch.setattr(session, "HIDDEN_FETCH_PROBABILITY", 1.0)  # every round re-checks a timed output
    v = evaluate(_relative(task), _relative(solution), opts)
    assert v.passed, describe(v)
    assert v.correctness.cases_passed == v.correctness.cases_run > 0  # every case, as untimed runs check
    assert v.timing is not None and v.timing.shapes


UNSUPPORTED = HERE / "unsupported"


@pytest.mark.parametrize(
    ("solution", "code", "says"),
    [
        ("load_beside_own_file", "compile_error", "read-only to the solution in kernelproof"),
        ("cache_beside_own_file", "forbidden_construct", "read-only in kernelproof"),
    ],
)
def test_a_write_beside_the_solutions_own_file_is_refused_saying_why(solution, code, says):
    """What kernelproof cannot allow (the folder of the file it runs stays read-only to it) is refused
    with a message that names kernelproof's limit and where to write instead, never a bare error."""
    v = evaluate(
        _relative(DATA_TASKS / "scale_relu.py"),
        _relative(UNSUPPORTED / f"{solution}.py"),
        _options("cpu", False),
    )
    assert not v.passed and v.reasons[0].code.value == code, describe(v)
    assert says in v.reasons[0].message and "tempfile.gettempdir()" in v.reasons[0].message, describe(v)


def test_a_gpu_kernels_own_cuda_check_fails_on_the_cpu_with_the_parents_note():
    """triton_asserts_cuda_inputs passes on a GPU (its `gpu` row). On the CPU it asks for no build
    the machine cannot do, so the parent knows of nothing it lacks: its `assert x.is_cuda` is its own
    runtime_error there (the same words a wrong solution could raise decide nothing), and the
    parent's note names the device it chose and where the solution is judged."""
    v = evaluate(
        _relative(TASKS / "gelu_tanh.py"),
        _relative(SOLUTIONS / "triton_asserts_cuda_inputs.py"),
        _options("cpu", False),
    )
    assert v.verdict.value == "fail" and v.codes == ["runtime_error"], describe(v)
    assert "assert x.is_cuda" in v.reasons[0].message and "--device cuda" in v.reasons[0].message, describe(v)
