"""``kernelproof kernelbench RUN_DIR``: a KernelBench run folder judged as it is, on the CPU.

The run folder and the KernelBench-layout checkout are made here: three problems whose ids sort
differently by name (1, 10, 2), several samples per problem, a missing sample and a broken one.
KernelBench's own analysis script reads what is written, where a clone of KernelBench at the
pinned commit is at hand (``KERNELPROOF_KERNELBENCH_CLONE``; it skips, saying why, elsewhere).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import DATA, REPO, make_verdict, run_here, run_piped

from kernelproof import api
from kernelproof.report import kernelbench_run as kb

PINNED = re.search(
    r'PINNED_COMMIT = "([0-9a-f]{40})"', (REPO / "benchmarks" / "kernelbench_sweep.py").read_text()
).group(1)
PROBLEMS = {  # file in KernelBench/level1 -> test task
    "1_Scale_ReLU.py": "scale_relu.py",
    "2_Row_mean.py": "kb_row_mean.py",
    "10_Scale_ReLU_again.py": "scale_relu.py",
}
SAMPLES = {  # (problem, sample) -> solution; (1, 2) and (2, 1) are missing
    (1, 0): "plain_torch.py",  # plain PyTorch: its speed is a claim on the CPU, so it is timed
    (1, 1): "syntax_error.py",  # broken: compile_error
    (2, 0): "row_mean_general.py",
    (2, 2): "row_mean_general.py",  # the same bytes as sample 0: one evaluation's verdict serves both
    (10, 1): "wrong_shape.py",
}


def make_checkout(root: Path) -> Path:
    level = root / "KernelBench" / "level1"
    level.mkdir(parents=True)
    for name, task in PROBLEMS.items():
        shutil.copy(DATA / "tasks" / task, level / name)
    return root


def make_run(run: Path) -> Path:
    run.mkdir(parents=True)
    for (pid, sid), solution in SAMPLES.items():
        shutil.copy(DATA / "solutions" / solution, run / f"level_1_problem_{pid}_sample_{sid}_kernel.py")
    (run / "level_2_problem_1_sample_0_kernel.py").write_text("# another level: not judged\n")
    (run / "level_1_problem_7_sample_0_kernel.py").write_text("# no problem 7 in the checkout\n")
    return run


def test_maps_samples_to_problems_by_the_number_prefix_never_by_position(tmp_path):
    run = kb.find_run(make_run(tmp_path / "run"), 1, make_checkout(tmp_path / "kb"))
    assert sorted(p.name for p in run.problems.values()) != [run.problems[i].name for i in (1, 2, 10)]
    assert {i: p.name for i, p in run.problems.items()} == {
        i: n for n in PROBLEMS for i in [int(n.split("_")[0])]
    }
    pairs = {(t.name, s.name) for t, s in run.pairs()}
    assert ("10_Scale_ReLU_again.py", "level_1_problem_10_sample_1_kernel.py") in pairs
    assert ("2_Row_mean.py", "level_1_problem_2_sample_2_kernel.py") in pairs
    assert len(pairs) == len(SAMPLES)
    assert run.num_samples == 3
    assert {(s.problem, s.sample) for s in run.missing} == {(1, 2), (2, 1), (10, 0), (10, 2)}
    assert run.strays == ("level_1_problem_7_sample_0_kernel.py",)


def test_refuses_a_checkout_without_the_level_and_a_run_without_samples(tmp_path, capsys):
    checkout = make_checkout(tmp_path / "kb")
    (tmp_path / "empty").mkdir()
    ran = run_here(capsys, "kernelbench", tmp_path / "empty", "--level", "1", "--kernelbench", checkout)
    assert ran.code == 2 and "no level_1_problem_<P>_sample_<S>_kernel.py" in ran.err, ran
    ran = run_here(capsys, "kernelbench", tmp_path / "empty", "--level", "3", "--kernelbench", checkout)
    assert ran.code == 2 and "no level3 folder in" in ran.err, ran
    run = make_run(tmp_path / "run")
    ran = run_here(
        capsys, "kernelbench", run, "--level", "1", "--kernelbench", checkout, "--pass-at-k", "0,1"
    )
    assert ran.code == 2 and "--pass-at-k values must be at least 1" in ran.err, ran
    assert not (run / "eval_results.json").exists()


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """One judged run (timed, briefly), and a second run of the same command served by the store."""
    root = tmp_path_factory.mktemp("kbrun")
    checkout, run = make_checkout(root / "kb"), make_run(root / "runs" / "myrun")
    (run / "eval_results.json").write_text(
        '{"1": [{"sample_id": 0, "compiled": true}]}\n'
    )  # KernelBench's own
    args = ["kernelbench", run, "--level", "1", "--kernelbench", checkout, "--device", "cpu"]
    # module-scoped, so the suite's function-scoped switch for a loaded machine does not reach it
    args += ["--db", root / "kb.sqlite", "--seeds-per-case", "1", "--time-budget", "0.3", "--time-when-busy"]
    args += ["--time-interpreted"]  # its samples are interpreted Triton kernels: timed only when asked
    first = run_piped(*args, "--json", root / "first.json", columns=120)
    again = run_piped(*args, "--json", root / "again.json", columns=120)
    return root, run, first, again


def _results(run: Path) -> dict:
    return json.loads((run / "eval_results.json").read_text())


def test_writes_eval_results_in_kernelbench_shape_sorted_by_problem_id(judged):
    _, run, first, _ = judged
    assert first.code == 1, first.out + first.err  # a broken and a wrong sample were rejected
    results = _results(run)
    assert list(results) == ["1", "2", "10"]
    for pid, entries in results.items():
        assert [e["sample_id"] for e in entries] == [0, 1, 2], pid
        for e in entries:
            assert set(e) == {"sample_id", "compiled", "correctness", "metadata", "runtime", "runtime_stats"}
    by = {(int(p), e["sample_id"]): e for p, es in results.items() for e in es}
    assert by[(1, 0)]["correctness"] and by[(1, 0)]["compiled"]
    for e in by.values():  # a runtime only where the speed is a claim (a loaded machine withholds it)
        claimed = e["metadata"]["kernelproof"].get("speed_claimed", False)
        assert (e["runtime"] > 0) == claimed and (e["runtime_stats"] != {}) == claimed, e
    assert by[(2, 0)]["runtime"] == -1.0  # Triton's interpreter: its speed is never a claim
    assert not by[(1, 1)]["compiled"] and by[(1, 1)]["metadata"]["kernelproof"]["codes"] == ["compile_error"]
    assert by[(10, 1)]["compiled"] and not by[(10, 1)]["correctness"]
    assert (
        by[(10, 1)]["metadata"]["kernelproof"]["codes"] == ["wrong_shape"] and by[(10, 1)]["runtime"] == -1.0
    )
    for missing in ((1, 2), (2, 1), (10, 0), (10, 2)):
        assert by[missing]["metadata"]["kernelproof"]["verdict"] == "missing"
        assert not by[missing]["correctness"] and by[missing]["runtime"] == -1.0
    assert by[(2, 0)]["correctness"] and by[(2, 2)]["correctness"]
    assert (
        "stray" not in first.out
        and "no problem in level 1 for level_1_problem_7_sample_0_kernel.py" in first.out
    )
    assert (run / "eval_results.before-kernelproof.json").read_text().startswith('{"1": [{"sample_id": 0')


def test_runtime_is_the_mean_ms_per_call_and_the_reference_time_is_where_kernelbench_looks(judged):
    root, run, _, _ = judged
    verdicts = json.loads((root / "first.json").read_text())
    entry = _results(run)["1"][0]
    doc = next(v for v in verdicts if v["solution"]["path"].endswith("problem_1_sample_0_kernel.py"))
    shape = kb.headline_timing(doc)
    baseline = (
        json.loads((run / "baseline_time_torch.json").read_text())["level1"]
        if (run / "baseline_time_torch.json").exists()
        else None
    )
    if doc["claims"]["speed"]:  # a quiet machine: the plain-PyTorch sample's speed is a claim
        assert entry["runtime"] == shape["candidate"]["mean_ms"]
        assert entry["runtime_stats"]["mean"] == shape["candidate"]["mean_ms"]
        assert entry["runtime_stats"]["std"] == shape["candidate"]["std_ms"] >= 0
        assert entry["metadata"]["ref_runtime"] == shape["baselines"]["eager"]["mean_ms"]
        assert set(baseline) == set(PROBLEMS)  # every problem of the level, by file name
        assert baseline["1_Scale_ReLU.py"]["mean"] == entry["metadata"]["ref_runtime"]
        assert baseline["10_Scale_ReLU_again.py"]["mean"] == kb.NOT_TIMED_MEAN  # no sample passed
    else:  # a busy machine timed it anyway, flagged: no claim, so KernelBench's "not measured"
        assert (
            entry["runtime"] == -1.0
            and entry["runtime_stats"] == {}
            and "ref_runtime" not in entry["metadata"]
        )
        assert baseline is None  # nothing timed as a claim: no baseline file


def test_fast_p_and_pass_at_k_count_a_problem_without_a_correct_sample_as_incorrect(judged):
    _, run, first, _ = judged
    results = _results(run)
    base = json.loads((run / "baseline_time_torch.json").read_text())["level1"]
    # pass@1 per problem with n=3 samples: c/3 (1 correct, 2 correct, 0 correct), over all 3 problems
    assert "correct: 2/3 problems; pass@1=0.333, pass@3=0.667" in first.out, first.out
    speedups = {
        p: base[n]["mean"] / results[str(p)][0]["runtime"]
        for n in PROBLEMS
        for p in [int(n.split("_")[0])]
        if p != 10
    }
    expected = ", ".join(f"fast_{p:g}={sum(s > p for s in speedups.values()) / 3:.0%}" for p in kb.KB_P)
    assert f"fast_p vs eager, sample 0: {expected}" in first.out, first.out
    passk = json.loads((run / "pass_at_k_results.json").read_text())
    assert passk["metadata"]["total_problems"] == 3 and passk["problems"]["10"]["correct_samples"] == 0
    assert passk["averages"]["avg_pass@1"] == pytest.approx((1 / 3 + 2 / 3 + 0) / 3)


def test_a_second_run_is_served_by_the_store_and_writes_the_same_results(judged):
    root, run, first, again = judged
    assert again.code == 1, again.out + again.err
    served = json.loads((root / "again.json").read_text())
    assert len(served) == len(SAMPLES) and all(v.get("stored") for v in served)
    assert "kept the earlier" not in again.out  # the results file there is kernelproof's own now
    assert [e["correctness"] for es in _results(run).values() for e in es] == [
        (pid, sid) in {(1, 0), (2, 0), (2, 2)} for pid in (1, 2, 10) for sid in range(3)
    ]


def test_the_files_have_the_schema_kernelbench_analysis_reads(judged):
    """What scripts/benchmark_eval_analysis.py (pinned commit) reads, field by field."""
    _, run, _, _ = judged
    results = _results(run)
    assert all(re.fullmatch(r"[0-9]+", pid) for pid in results)  # int(pid) and str(pid) lookups
    for entries in results.values():
        assert sum(e["sample_id"] == 0 for e in entries) <= 1  # "Multiple entries for sample_id = 0"
        for e in entries:
            assert (
                type(e["sample_id"]) is int and type(e["compiled"]) is bool and type(e["correctness"]) is bool
            )
            assert isinstance(e["runtime"], float) and isinstance(e["metadata"], dict)
    baseline = json.loads((run / "baseline_time_torch.json").read_text())
    assert list(baseline) == ["level1"] and all("mean" in v for v in baseline["level1"].values())


def _clone() -> Path | None:
    for where in (os.environ.get("KERNELPROOF_KERNELBENCH_CLONE"), REPO / ".kernelbench" / "clone"):
        if where and Path(where).exists():
            return Path(where)
    return None


def test_kernelbench_analysis_script_at_the_pinned_commit_reads_the_results(judged, tmp_path):
    clone = _clone()
    if clone is None:
        pytest.skip(
            "no KernelBench clone: set KERNELPROOF_KERNELBENCH_CLONE (or clone into .kernelbench/clone)"
        )
    git = ["git", f"--git-dir={clone / '.git' if (clone / '.git').exists() else clone}"]
    if subprocess.run([*git, "cat-file", "-e", f"{PINNED}^{{commit}}"], capture_output=True).returncode:
        pytest.skip(f"the KernelBench clone at {clone} lacks the pinned commit {PINNED}")
    archive = subprocess.run(
        [*git, "archive", PINNED, "src/kernelbench", "scripts/benchmark_eval_analysis.py"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive, check=True)
    make_checkout(tmp_path)  # the script's dataset: the problems judged here, at KernelBench/level1
    _, run, _, _ = judged
    out = tmp_path / "analysis.json"
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "src"), os.environ.get("PYTHONPATH", "")])
    )
    ran = subprocess.run(
        [sys.executable, "scripts/benchmark_eval_analysis.py", f"run_name={run.name}", "level=1",
         "hardware=cpu", "baseline=baseline_time_torch", f"baseline_file={run / 'baseline_time_torch.json'}",
         f"eval_results_dir={run.parent}", f"output_file={out}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    missing = re.search(r"ModuleNotFoundError: No module named '([^']+)'", ran.stderr)
    if missing:
        pytest.skip(f"KernelBench's environment is not installed here (no module {missing.group(1)!r})")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    doc = json.loads(out.read_text())
    assert doc["total_count"] == 3 and doc["total_eval"] == 3
    assert doc["correct_count"] == 2  # sample 0 of problems 1 and 2; problem 10's sample 0 is missing
    assert doc["compiled_count"] == 2
    results = _results(run)
    base = json.loads((run / "baseline_time_torch.json").read_text())["level1"]
    ratios = [
        base[n]["mean"] / results[n.split("_")[0]][0]["runtime"] for n in ("1_Scale_ReLU.py", "2_Row_mean.py")
    ]
    for p in ("0.0", "0.5", "1.0", "2.0"):
        assert doc["fast_p"][p] == pytest.approx(sum(r > float(p) for r in ratios) / 3)


def test_bench_counts_a_task_without_a_solution_as_incorrect_in_fast_p(monkeypatch, tmp_path, capsys):
    for folder in ("suite", "sols"):
        (tmp_path / folder).mkdir()
    for name in ("a", "b"):
        (tmp_path / "suite" / f"{name}.py").write_text("")
    (tmp_path / "sols" / "a.py").write_text("")
    fast = make_verdict("pass", baselines_ms={"eager": 4.0}, candidate_ms=2.0)  # 2x faster
    monkeypatch.setattr(api, "bench", lambda pairs, options, **k: iter([fast]))
    ran = run_here(capsys, "bench", tmp_path / "suite", "--solutions", tmp_path / "sols", "--db", "")
    assert ran.code == 0, ran
    assert "vs eager: fast_0=50%, fast_1=50%" in ran.out, ran.out
    assert "fast_p counts the 1 task(s) without a solution as incorrect" in ran.out, ran.out


def test_correctness_only_writes_untimed_results_and_no_baseline_file(tmp_path):
    checkout, run = make_checkout(tmp_path / "kb"), make_run(tmp_path / "run")
    ran = run_piped(
        "kernelbench", run, "--level", "1", "--kernelbench", checkout, "--device", "cpu", "--db", "",
        "--correctness-only", "--seeds-per-case", "1", "--num-samples", "1", columns=120,
    )  # fmt: skip
    assert ran.code == 0, ran.out + ran.err  # sample 0 of problems 1 and 2: both pass
    assert "3 problems, 2 with samples, 1 sample(s) each" in ran.out, ran.out  # problem 10 has sample 1 only
    assert "fast_p: not measured" in ran.out and "correct: 2/3 problems; pass@1=0.667" in ran.out, ran.out
    results = _results(run)
    assert {p: len(es) for p, es in results.items()} == {"1": 1, "2": 1}  # --num-samples 1: sample 0 alone
    assert all(e["runtime"] == -1.0 and e["runtime_stats"] == {} for es in results.values() for e in es)
    assert not (run / "baseline_time_torch.json").exists()


def _entry(sid: int, verdict: str, codes: tuple[str, ...] = (), runtime: float = -1.0) -> dict:
    return {
        "sample_id": sid,
        "compiled": "compile_error" not in codes,
        "correctness": verdict == "pass",
        "metadata": {"kernelproof": {"verdict": verdict, "codes": list(codes)}},
        "runtime": runtime,
        "runtime_stats": {},
    }


def test_unjudgeable_problems_count_as_incorrect_and_a_second_figure_leaves_them_out(tmp_path):
    names = ["1_A.py", "2_B.py", "3_C.py", "4_D.py"]
    problems = {i + 1: kb.Problem(i + 1, n, tmp_path / n) for i, n in enumerate(names)}
    samples = tuple(kb.Sample(p, s, tmp_path / f"{p}_{s}") for p in (1, 2, 3, 4) for s in (0, 1))
    run = kb.KernelBenchRun(tmp_path, 1, problems, samples, 2)
    results = {
        "1": [_entry(0, "pass", runtime=1.0), _entry(1, "fail", ("mismatch",))],
        "2": [_entry(0, "error", ("too_large",)), _entry(1, "missing")],  # never judged on its merits
        "3": [_entry(0, "error", ("degenerate_task",)), _entry(1, "error", ("degenerate_task",))],
        "4": [_entry(0, "error", ("too_large",)), _entry(1, "fail", ("mismatch",))],  # one was judged
    }
    base = {"level1": {"1_A.py": {"mean": 3.0}, "2_B.py": {"mean": None}, "3_C.py": {"mean": None}}}
    s = kb.score(run, results, base, ks=(1, 2))
    assert s.fast_p["sample 0"][2.0] == pytest.approx(1 / 4)  # KernelBench: every problem of the level
    assert s.fast_p["best of 2"][0.0] == pytest.approx(1 / 4)
    assert s.unjudged == {"too_large": 1, "degenerate_task": 1}
    assert s.fast_p_judged["sample 0"][2.0] == pytest.approx(1 / 2)  # problems 1 and 4 left
    assert s.pass_at_k[1] == pytest.approx(0.5 / 4) and s.pass_at_k_judged[1] == pytest.approx(0.5 / 2)
    assert s.pass_at_k[2] == pytest.approx(1 / 4)


def test_pass_at_k_is_kernelbench_unbiased_estimator():
    assert kb.calc_pass_at_k(3, 1, 1) == pytest.approx(1 / 3)
    assert kb.calc_pass_at_k(5, 2, 2) == pytest.approx(1 - (3 / 5) * (2 / 4))
    assert kb.calc_pass_at_k(4, 3, 2) == 1.0  # fewer wrong samples than k
    assert (
        kb.calc_pass_at_k(0, 0, 1) == 0.0
    )  # a problem with no sample is incorrect (KernelBench's gives 1.0)


@pytest.mark.gpu
def test_a_run_of_the_example_kernels_is_timed_on_the_gpu(tmp_path):
    """The suite's level 1 as a KernelBench checkout (its files are named <P>_<name>.py), the shipped
    examples as sample 0 and a broken sample 1: passes timed in mean ms, the reference's time beside."""
    level = tmp_path / "kb" / "KernelBench" / "level1"
    level.mkdir(parents=True)
    run = tmp_path / "runs" / "examples"
    run.mkdir(parents=True)
    for name in ("06_softmax.py", "09_gelu.py", "10_silu.py"):
        shutil.copy(REPO / "suite" / "level1" / name, level / name)
        pid = int(name.split("_")[0])
        shutil.copy(REPO / "examples" / "level1" / name, run / f"level_1_problem_{pid}_sample_0_kernel.py")
        (run / f"level_1_problem_{pid}_sample_1_kernel.py").write_text("class ModelNew(:\n")
    ran = run_piped(
        "kernelbench", run, "--level", "1", "--kernelbench", tmp_path / "kb", "--device", "cuda",
        "--db", "", "--time-budget", "2", "--exit-zero", columns=140,
    )  # fmt: skip
    assert ran.code == 0, ran.out + ran.err
    results = _results(run)
    assert list(results) == ["6", "9", "10"]
    for pid, (good, broken) in results.items():
        assert good["correctness"] and good["runtime"] > 0 and good["metadata"]["ref_runtime"] > 0, pid
        assert good["runtime_stats"]["hardware"].startswith("NVIDIA"), good["runtime_stats"]
        assert not broken["compiled"] and broken["runtime"] == -1.0
    base = json.loads((run / "baseline_time_torch.json").read_text())["level1"]
    assert all(v["mean"] > 0 for v in base.values())
    assert "correct: 3/3 problems; pass@1=0.500, pass@2=1.000" in ran.out, ran.out
    assert "fast_p vs eager, sample 0: fast_0=100%" in ran.out, ran.out


def test_the_scores_fit_80_columns_and_read_as_docs_kernelbench_md_shows_them():
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from kernelproof.commands.kernelbench import _print_scores

    ps = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
    scores = SimpleNamespace(
        problems=100,
        with_samples=100,
        correct=61,
        pass_at_k={1: 0.48, 4: 0.61},
        fast_p={"sample 0": dict(zip(ps, (0.48, 0.41, 0.30, 0.18, 0.06, 0.02))), "best of 4": {}},
        unjudged={"degenerate_task": 1, "too_large": 1},
        pass_at_k_judged={1: 0.49, 4: 0.62},
        fast_p_judged={},
    )
    run = SimpleNamespace(level=1, num_samples=4, missing=(1, 2, 3))
    out = io.StringIO()
    _print_scores(Console(file=out, width=80, color_system=None), run, scores, False)
    lines = out.getvalue().splitlines()
    assert max(len(ln) for ln in lines) <= 80, out.getvalue()
    shown = (REPO / "docs" / "kernelbench.md").read_text().split("## What is printed", 1)[1]
    shown = shown.split("```text\n", 1)[1].split("```", 1)[0]
    for line in lines[:3]:  # the doc's block is what a pipe shows, line by line
        assert line in shown.splitlines(), (line, shown)
