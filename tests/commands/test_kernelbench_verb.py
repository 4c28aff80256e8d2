"""``kernelproof kernelbench`` speaks KernelBench's terms on a small machine (issue 49, items 1-5).

A run folder in KernelBench's own layout is made here (``runs/<run>/level_1_problem_P_sample_S_kernel.py``
beside ``generation_config.yaml``, problems in ``KernelBench/level1``): CUDA-only samples, a missing
file, a wrong sample, a correct plain-PyTorch sample and a problem too large for any machine. It is
judged on the CPU at reduced sizes; what cannot be judged here is decided before any evaluation; a
busy machine never makes a correct sample incorrect; the fast_p that KernelBench's analysis computes
from the files written, by KernelBench's own formula (written out below), is the table's.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from cli_support import DATA, make_verdict, run_here, run_piped

from kernelproof import api
from kernelproof.commands import kernelbench as command
from kernelproof.errors import UsageError
from kernelproof.report import kernelbench_run as kb
from kernelproof.report import scaled_tasks

# KernelBench's published fast_p (src/kernelbench/score.py, scripts/benchmark_eval_analysis.py at the
# pinned commit), written out: sample 0 of every problem of the level (a problem absent from
# eval_results.json is patched in as incorrect); a problem counts when correct and the baseline
# file's mean over its runtime is above p; the denominator is every problem.
KB_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


def kernelbench_fast_p(eval_results: dict, baseline: dict, level: int, problems: dict[int, str]) -> dict:
    rows = []
    for pid in sorted(problems):
        entries = [e for e in eval_results.get(str(pid), []) if e["sample_id"] == 0]
        entry = entries[0] if entries else {"correctness": False, "runtime": -1.0}
        rows.append(
            (entry["correctness"], baseline[f"level{level}"][problems[pid]]["mean"], entry["runtime"])
        )
    n = len(rows)
    return {p: sum(1 for ok, base, rt in rows if ok and base / rt > p) / n for p in KB_P}


CUDA_SAMPLE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
__global__ void scale_relu(const float* x, const float* s, const float* b, float* y, int n, int f) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f) * s[i % f] + b[i % f];
}
torch::Tensor run(torch::Tensor x, torch::Tensor s, torch::Tensor b) {
    auto y = torch::empty_like(x);
    int n = x.numel(), f = s.numel();
    scale_relu<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), s.data_ptr<float>(), b.data_ptr<float>(),
                                         y.data_ptr<float>(), n, f);
    return y;
}
"""
ext = load_inline("scale_relu_ext", cpp_sources="torch::Tensor run(torch::Tensor x, torch::Tensor s, "
                  "torch::Tensor b);", cuda_sources=source, functions=["run"])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return ext.run(x.contiguous(), self.scale, self.bias)
'''

HUGE_TASK = '''"""Doubling a vector of 2**46 floats: too large for any machine at any reduced size asked here."""

import torch
import torch.nn as nn

size = 2**46


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.rand(size)]


def get_init_inputs():
    return []
'''

HUGE_SAMPLE = """
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x + x
"""

PROBLEMS = {1: "1_Scale_ReLU.py", 2: "2_Huge_Double.py", 3: "3_Scale_ReLU_cuda.py"}


def make_checkout(root: Path, *, prepared: bool = False, huge: bool = True) -> Path:
    """KernelBench's layout (KernelBench/level1), or the sweep's prepared folder (level1 directly);
    problem 2 too large for any machine (``huge``) or the small task again."""
    level = root / "level1" if prepared else root / "KernelBench" / "level1"
    level.mkdir(parents=True)
    shutil.copy(DATA / "tasks" / "scale_relu.py", level / PROBLEMS[1])
    if huge:
        (level / PROBLEMS[2]).write_text(HUGE_TASK)
    else:
        shutil.copy(DATA / "tasks" / "scale_relu.py", level / PROBLEMS[2])
    shutil.copy(DATA / "tasks" / "scale_relu.py", level / PROBLEMS[3])
    if prepared:
        (root / "KERNELBENCH_COMMIT").write_text("423217d9fda91e0c2d67e4a43bf62f96f6d104f1\n")
    return root


def make_run(run: Path) -> Path:
    """Two samples per problem (generation_config.yaml says so, and the level): problem 1 correct
    plain PyTorch and wrong; problem 2 too large, its sample 1 missing; problem 3 CUDA only, twice."""
    run.mkdir(parents=True)
    (run / "generation_config.yaml").write_text(
        "run_name: smoke\ndataset_src: local\nlevel: 1\nnum_samples: 2\nbackend: cuda\nprecision: fp32\n"
    )
    shutil.copy(DATA / "solutions" / "plain_torch.py", run / "level_1_problem_1_sample_0_kernel.py")
    shutil.copy(DATA / "solutions" / "wrong_shape.py", run / "level_1_problem_1_sample_1_kernel.py")
    (run / "level_1_problem_2_sample_0_kernel.py").write_text(HUGE_SAMPLE)
    (run / "level_1_problem_3_sample_0_kernel.py").write_text(CUDA_SAMPLE)
    (run / "level_1_problem_3_sample_1_kernel.py").write_text(CUDA_SAMPLE.replace("scale_relu_ext", "ext_1"))
    return run


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _results(run: Path) -> dict:
    return json.loads((run / "eval_results.json").read_text())


def _by(results: dict) -> dict:
    return {(int(p), e["sample_id"]): e for p, es in results.items() for e in es}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    root = tmp_path_factory.mktemp("kbsmoke")
    checkout, run = make_checkout(root / "kb"), make_run(root / "runs" / "smoke")
    ran = run_piped(
        "kernelbench", run, "--kernelbench", checkout, "--sizes", "small", "--device", "cpu",
        "--db", root / "kb.sqlite", "--seeds-per-case", "1", "--time-budget", "0.3", "--json", root / "v.json",
        "--time-when-busy",  # module-scoped: the suite's switch for a loaded machine does not reach it
        columns=120,
    )  # fmt: skip
    return root, run, ran


def test_a_mixed_run_at_reduced_sizes_gets_every_verdict_right_and_exits_1(smoke):
    root, run, ran = smoke
    assert ran.code == 1, ran.out + ran.err  # the wrong sample, never hidden by the errors beside it
    by = _by(_results(run))
    assert set(by) == {(p, s) for p in PROBLEMS for s in (0, 1)}  # num_samples from generation_config
    assert by[(1, 0)]["correctness"] and by[(1, 0)]["compiled"]  # plain PyTorch: nothing to build
    assert not by[(1, 1)]["correctness"] and by[(1, 1)]["compiled"]
    assert by[(1, 1)]["metadata"]["kernelproof"]["codes"] == ["wrong_shape"]
    assert by[(2, 0)]["metadata"]["kernelproof"]["codes"] == ["too_large"]
    assert by[(2, 1)]["metadata"]["kernelproof"]["verdict"] == kb.MISSING
    for sid in (0, 1):  # CUDA only, on a machine without CUDA: never built, so never compiled
        entry = by[(3, sid)]
        assert entry["metadata"]["kernelproof"]["codes"] == ["environment"], entry
        assert not entry["compiled"] and not entry["correctness"] and entry["runtime"] == -1.0
    assert all(e["metadata"]["kernelproof"]["sizes"] == "1/16" for e in by.values())
    assert "run smoke, sizes 1/16" in ran.out and "not KernelBench's score" in ran.out, ran.out
    assert "environment 2: judge it on a machine with a CUDA GPU" in ran.out, ran.out
    assert "too_large 1: judge it on a device with more memory" in ran.out, ran.out


def test_what_this_machine_cannot_judge_is_printed_before_any_evaluation(smoke):
    _, _, ran = smoke
    lines = ran.err.splitlines() + ran.out.splitlines()
    finished = [ln for ln in lines if ln.startswith("[")]
    assert [ln.split()[1] for ln in finished[:3]] == ["error"] * 3, lines
    assert {ln.split()[-1] for ln in finished[:3]} == {"environment", "too_large"}, lines
    said = next(i for i, ln in enumerate(lines) if "cannot be judged on this machine" in ln)
    assert said < lines.index(finished[3]), lines
    assert "evaluation; judging the other 2" in " ".join(ran.out.split()), ran.out


def test_reduced_sizes_are_judged_on_scaled_copies_whose_store_key_is_their_own(smoke):
    root, run, _ = smoke
    verdicts = json.loads((root / "v.json").read_text())
    scaled = run / scaled_tasks.SCALED_FOLDER / "sizes-1of16" / "level1" / PROBLEMS[1]
    assert "features = 32" not in (root / "kb" / "KernelBench" / "level1" / PROBLEMS[1]).read_text()
    judged_tasks = {v["task"]["path"] for v in verdicts}
    assert str(scaled) in judged_tasks
    original = _sha256(root / "kb" / "KernelBench" / "level1" / PROBLEMS[1])
    assert all(v["task"]["sha256"] != original for v in verdicts)  # the store's key is not the full size's
    assert _by(_results(run))[(1, 0)]["metadata"]["kernelproof"]["task_sha256"] == _sha256(scaled)


def test_kernelbench_fast_p_formula_over_the_written_files_is_the_table(smoke):
    _, run, ran = smoke
    base_file = run / "baseline_time_torch.json"
    if not base_file.exists():  # nothing was timed as a claim (a loaded machine withholds it)
        assert "fast_p: not measured" in ran.out, ran.out
        return
    fast = kernelbench_fast_p(_results(run), json.loads(base_file.read_text()), 1, PROBLEMS)
    shown = ", ".join(f"fast_{p:g}={v:.0%}" for p, v in fast.items())
    assert f"fast_p vs eager, sample 0: {shown}" in " ".join(ran.out.split()), ran.out


def _mixed(tmp_path: Path, verdicts: dict) -> tuple[Path, Path]:
    """A run folder whose samples are judged by ``verdicts`` ((problem, sample) -> Verdict) instead of
    an evaluation: what the files and the table make of each outcome, in milliseconds."""
    checkout = make_checkout(tmp_path / "kb", huge=False)
    run = tmp_path / "runs" / "mixed"
    run.mkdir(parents=True)
    for pid, sid in verdicts:
        shutil.copy(
            DATA / "solutions" / "plain_torch.py", run / f"level_1_problem_{pid}_sample_{sid}_kernel.py"
        )
    return checkout, run


def _judged_by(monkeypatch, verdicts):
    def judge(run, options, **kwargs):
        for s in run.samples:
            if s.path is not None:
                yield s, verdicts[(s.problem, s.sample)]

    monkeypatch.setattr(api, "kernelbench", judge)


def _untimed(v):
    """The verdict as a speed that is no claim leaves it (an interpreted kernel, a busy machine)."""
    from dataclasses import replace

    from kernelproof.verdict import Claims

    return replace(v, claims=Claims(speed=False, speed_withheld="triton_interpreter"))


def test_kernelbench_fast_p_formula_equals_the_table_on_a_mixed_run(monkeypatch, tmp_path, capsys):
    verdicts = {
        (1, 0): make_verdict("pass", baselines_ms={"eager": 3.0}, candidate_ms=1.0),  # 3x faster
        (1, 1): make_verdict("fail", ("mismatch",)),
        (2, 0): _untimed(make_verdict("pass", baselines_ms={"eager": 1.0}, candidate_ms=0.5)),  # no claim
        (3, 0): make_verdict("pass", baselines_ms={"eager": 1.0}, candidate_ms=1.6),  # slower
        (3, 1): make_verdict("error", ("machine_busy",)),
    }
    checkout, run = _mixed(tmp_path, verdicts)
    _judged_by(monkeypatch, verdicts)
    monkeypatch.setattr(command, "QUIET_WAIT_S", 0.0)
    ran = run_here(capsys, "kernelbench", run, "--kernelbench", checkout, "--db", "", "--device", "cpu")
    assert ran.code == 1, ran  # the mismatch; the busy sample's error does not hide it
    results = _results(run)
    by = _by(results)
    assert by[(2, 0)]["correctness"] and by[(2, 0)]["runtime"] == -1.0 and by[(2, 0)]["runtime_stats"] == {}
    assert by[(1, 0)]["runtime"] == 1.0 and set(by[(1, 0)]["runtime_stats"]) >= {"mean", "std", "min", "max"}
    base = json.loads((run / "baseline_time_torch.json").read_text())
    assert base["level1"][PROBLEMS[2]]["mean"] == kb.NOT_TIMED_MEAN  # its only sample's speed is no claim
    fast = kernelbench_fast_p(results, base, 1, PROBLEMS)
    assert fast[0.0] == pytest.approx(2 / 3) and fast[1.0] == pytest.approx(1 / 3)  # the formula, by hand
    shown = ", ".join(f"fast_{p:g}={v:.0%}" for p, v in fast.items())
    assert f"fast_p vs eager, sample 0: {shown}" in " ".join(ran.out.split()), ran.out  # wrapped at 80


@pytest.mark.parametrize("quiet_later", [True, False], ids=["quiet-later", "busy-throughout"])
def test_a_busy_machine_never_makes_a_correct_sample_incorrect_and_a_failure_still_exits_1(
    monkeypatch, tmp_path, capsys, quiet_later
):
    """The machine forced busy while timing, as tests of machine_busy force it
    (tests/measure/test_timing_defences.py): the correct plain-PyTorch sample is judged again (timed, when the
    machine seemed quiet between), then on correctness alone, and counts as correct; the wrong
    sample beside it makes the exit code 1."""
    from kernelproof.measure import busy, parent_clock
    from kernelproof.report import feasibility

    monkeypatch.setattr(parent_clock, "BUSY_IS_ERROR", True)
    monkeypatch.setattr(
        busy, "judge", lambda *a, **k: busy.Quiet(True, 9.0, 2, None, "9.0 other tasks runnable")
    )
    monkeypatch.setattr(feasibility, "quiet_within", lambda max_s: quiet_later)
    checkout = make_checkout(tmp_path / "kb")
    run = tmp_path / "runs" / "busy"
    run.mkdir(parents=True)
    shutil.copy(DATA / "solutions" / "plain_torch.py", run / "level_1_problem_1_sample_0_kernel.py")
    shutil.copy(DATA / "solutions" / "wrong_shape.py", run / "level_1_problem_1_sample_1_kernel.py")
    ran = run_here(
        capsys, "kernelbench", run, "--kernelbench", checkout, "--problems", "1", "--device", "cpu",
        "--db", "", "--seeds-per-case", "1", "--time-budget", "0.3",
    )  # fmt: skip
    assert ran.code == 1, ran
    by = _by(_results(run))
    correct = by[(1, 0)]
    assert correct["correctness"] and correct["runtime"] == -1.0, correct
    assert "too busy to time" in correct["metadata"]["kernelproof"]["note"]
    assert not by[(1, 1)]["correctness"]
    text = " ".join((ran.out + ran.err).split())
    assert "could not be timed: the machine" in text and "judging their correctness alone" in text, text
    assert ("judging them again one at a time" in text) == quiet_later, text


def test_exit_code_puts_a_rejection_before_any_error_of_the_machine_or_of_kernelproof():
    fail, env = make_verdict("fail", ("mismatch",)), make_verdict("error", ("environment",))
    internal = make_verdict("error", ("internal_error",))
    assert command.exit_code([env, fail, internal]) == 1
    assert command.exit_code([env, make_verdict("pass")]) == 2
    assert command.exit_code([internal, env]) == 3
    assert command.exit_code([make_verdict("pass")]) == 0


def test_results_at_other_sizes_are_kept_beside_never_mixed(monkeypatch, tmp_path, capsys):
    verdicts = {(1, 0): make_verdict("pass", baselines_ms={"eager": 2.0}, candidate_ms=1.0)}
    checkout, run = _mixed(tmp_path, verdicts)
    _judged_by(monkeypatch, verdicts)
    args = ["kernelbench", run, "--kernelbench", checkout, "--db", "", "--device", "cpu", "--problems", "1"]
    assert run_here(capsys, *args).code == 0
    assert _by(_results(run))[(1, 0)]["metadata"]["kernelproof"]["sizes"] == "published"
    ran = run_here(capsys, *args, "--sizes", "8")
    assert ran.code == 0, ran
    assert {e["metadata"]["kernelproof"]["sizes"] for e in _by(_results(run)).values()} == {"1/8"}
    kept = json.loads((run / "eval_results.sizes-published.json").read_text())
    assert kept["1"][0]["metadata"]["kernelproof"]["sizes"] == "published"
    assert (run / "baseline_time_torch.sizes-published.json").exists()


def test_the_sweeps_prepared_folder_is_taken_with_level_and_problems_from_the_files(tmp_path, capsys):
    checkout = make_checkout(tmp_path / "prepared", prepared=True)
    run = tmp_path / "runs" / "prep"
    run.mkdir(parents=True)
    shutil.copy(DATA / "solutions" / "plain_torch.py", run / "level_1_problem_1_sample_0_kernel.py")
    (run / "level_1_problem_3_sample_0_kernel.py").write_text(CUDA_SAMPLE)
    ran = run_here(
        capsys, "kernelbench", run, "--kernelbench", checkout, "--problems", "1-2", "--device", "cpu",
        "--db", "", "--correctness-only", "--seeds-per-case", "1",
    )  # fmt: skip
    assert ran.code == 0, ran  # problem 3's CUDA sample is outside --problems
    results = _results(run)
    assert list(results) == ["1"] and results["1"][0]["correctness"], results
    assert "correct: 1/2 problems" in ran.out, ran.out  # the level is the problems asked for


def test_problems_take_ids_and_ranges_and_the_level_is_read_from_the_file_names(tmp_path):
    assert kb.parse_problems("1,19") == {1, 19}
    assert kb.parse_problems("1,3-5") == {1, 3, 4, 5}
    for bad in ("a", "5-3", "1,,2"):
        with pytest.raises(UsageError):
            kb.parse_problems(bad)
    run = tmp_path / "run"
    run.mkdir()
    (run / "level_2_problem_4_sample_0_kernel.py").write_text("")
    assert kb.run_level(run, None, {}) == 2
    assert kb.run_level(run, None, {"level": "3"}) == 3 and kb.run_level(run, 1, {"level": "3"}) == 1
    (run / "level_1_problem_4_sample_0_kernel.py").write_text("")
    with pytest.raises(UsageError, match="say which with --level"):
        kb.run_level(run, None, {})


def test_kernelbench_backend_and_timing_method_are_accepted_with_their_meaning_or_refused(tmp_path, capsys):
    checkout = make_checkout(tmp_path / "kb")
    run = make_run(tmp_path / "runs" / "r")
    base = ["kernelbench", run, "--kernelbench", checkout, "--no-write", "--db", ""]
    ran = run_here(capsys, *base, "--backend", "tilelang")
    assert ran.code == 2 and "cannot build or run tilelang kernels" in ran.err, ran
    ran = run_here(capsys, *base, "--timing_method", "do_bench")
    assert ran.code == 2 and "cannot time as do_bench does" in ran.err, ran
    ran = run_here(capsys, *base, "--timing-method", "nonsense")
    assert ran.code == 2 and "KernelBench's timing methods are" in ran.err, ran


def test_compiled_means_a_build_ran_and_succeeded_or_none_was_needed():
    env = make_verdict("error", ("environment",)).to_json()
    assert not kb.compiled(env, needs_build=True)  # a CUDA sample never built
    assert kb.compiled(env | {"build": {"ok": True}}, needs_build=True)
    assert not kb.compiled(env | {"build": {"ok": False}}, needs_build=True)
    assert kb.compiled(make_verdict("fail", ("mismatch",)).to_json(), needs_build=False)
    assert not kb.compiled(make_verdict("fail", ("compile_error",)).to_json(), needs_build=False)


def test_size_constants_are_scaled_and_the_structure_kept():
    source = "import torch\nN = 2048 * 2\nbatch_size = 16\nK = 2**20\nname = 'x'\n\ndef f():\n    M = 4096\n"
    out = scaled_tasks.scaled_source(source, 16)
    assert "N = 256\n" in out and "batch_size = 16\n" in out and f"K = {2**16}\n" in out
    assert "    M = 4096" in out and "name = 'x'" in out  # only module-level integer constants
    assert scaled_tasks.scaled_source(source, 1) == source
    assert scaled_tasks.parse_sizes("small") == 16 and scaled_tasks.parse_sizes("published") == 1
    with pytest.raises(UsageError):
        scaled_tasks.parse_sizes("tiny")


@pytest.mark.gpu
def test_a_cuda_sample_built_and_timed_on_the_gpu_is_compiled_with_kernelbench_runtime_stats(tmp_path):
    """On a GPU the CUDA sample is built (``compiled`` true from the build's own record), judged
    correct and timed: runtime and runtime_stats with ``std``, as KernelBench's timing writes them."""
    checkout = make_checkout(tmp_path / "kb", huge=False)
    run = tmp_path / "runs" / "gpu"
    run.mkdir(parents=True)
    (run / "level_1_problem_3_sample_0_kernel.py").write_text(CUDA_SAMPLE)
    ran = run_piped(
        "kernelbench", run, "--kernelbench", checkout, "--device", "cuda", "--db", "", "--time-budget", "2",
        "--backend", "cuda", "--timing-method", "cuda_event", columns=140,
    )  # fmt: skip
    assert ran.code == 0, ran.out + ran.err
    entry = _results(run)["3"][0]
    assert entry["compiled"] and entry["correctness"], entry
    assert entry["metadata"]["kernelproof"]["speed_claimed"] and entry["runtime"] > 0, entry
    assert entry["runtime_stats"]["std"] >= 0 and entry["runtime_stats"]["hardware"].startswith("NVIDIA")


def test_time_stats_record_the_standard_deviation_kernelbench_writes_as_std():
    import numpy as np

    from kernelproof.measure.stats import summarize

    samples = [1.0, 1.5, 2.0, 4.0]
    assert summarize(samples).std_ms == pytest.approx(float(np.std(samples)))  # KernelBench: np.std
    entry = kb.sample_entry(kb.Sample(1, 0, None), make_verdict("pass", candidate_ms=2.0).to_json())
    assert set(entry["runtime_stats"]) >= {"mean", "std", "min", "max", "num_trials", "hardware", "device"}
