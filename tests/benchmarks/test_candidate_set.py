"""benchmarks/candidates/: the candidate set that looks like training traffic (issue 48, item 1).

The manifest is checked whole (every file there, parsed, a ModelNew in it, kinds and expectations
well formed, at least 200 candidates over at least 20 KernelBench tasks), every Triton and PyTorch
candidate is imported in a child process (several patch clocks or flags at import, by design), a
task is scaled to its CPU shape through kernelproof's own variants, and the smoke set (4 tasks, 12
candidates, correctness only on the CPU) gets the verdicts its manifest expects.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import candidate_set  # noqa: E402


def test_the_manifest_names_at_least_200_well_formed_candidates_over_20_tasks():
    doc, candidates = candidate_set.load()
    assert candidate_set.problems(doc, candidates) == []
    assert len(candidates) >= 200
    assert len({c.task for c in candidates}) >= 20
    kinds = {c.kind for c in candidates}
    for kind in ("honest_triton", "honest_cuda", "plain_torch", "wrong_tail", "nocompile_cuda", "exploit"):
        assert kind in kinds
    per_task: dict[str, set[str]] = {}
    for c in candidates:
        per_task.setdefault(c.task, set()).add(c.kind)
    for task, have in per_task.items():  # every task has the whole spread of the issue
        assert {"honest_triton", "honest_cuda", "plain_torch", "nocompile_cuda", "exploit"} <= have, task
        assert any(k.startswith("wrong") for k in have), task


def test_a_missing_file_a_bad_kind_and_a_pass_with_codes_are_each_named(tmp_path):
    doc, candidates = candidate_set.load()
    doc = json.loads(json.dumps(doc))
    first = doc["candidates"][0]
    first["kind"] = "clever"
    first["expect"]["gpu"] = {"verdict": "pass", "codes": ["mismatch"]}
    doc["candidates"][1]["file"] = "level1/nowhere.py"
    doc["candidates"][2]["expect"]["cpu"] = {"verdict": "fail", "codes": ["no_such_code"]}
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    for row in doc["candidates"][:3]:
        src = candidate_set.HERE / row["file"]
        if src.is_file():
            (tmp_path / row["file"]).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / row["file"]).write_text(src.read_text())
    found = candidate_set.problems(*candidate_set.load(tmp_path / "manifest.json"))
    text = "\n".join(found)
    assert "kind 'clever'" in text
    assert "a pass has no codes" in text
    assert "nowhere.py does not exist" in text
    assert "'no_such_code' is not a reason code" in text


def test_an_expectation_needs_the_verdict_one_of_its_codes_and_each_flag():
    exp = candidate_set.Expectation("fail", ("mismatch", "nonfinite"))
    assert exp.met_by("fail", ["nonfinite"], [])
    assert not exp.met_by("fail", ["runtime_error"], [])
    assert not exp.met_by("error", ["mismatch"], [])
    flagged = candidate_set.Expectation("pass", (), ("plain_torch",))
    assert flagged.met_by("pass", [], ["plain_torch: the solution defines no Triton or CUDA kernel"])
    assert not flagged.met_by("pass", [], [])


def test_every_triton_and_torch_candidate_imports_and_defines_an_nn_module_model_new():
    _, candidates = candidate_set.load()
    files = [str(c.file) for c in candidates if c.backend != "cuda"]  # a CUDA file builds at import
    probe = (
        "import importlib.util, sys, torch.nn as nn\n"
        "bad = []\n"
        "for i, path in enumerate(sys.argv[1:]):\n"
        "    spec = importlib.util.spec_from_file_location(f'candidate_{i}', path)\n"
        "    m = importlib.util.module_from_spec(spec)\n"
        "    try:\n"
        "        spec.loader.exec_module(m)\n"
        "        ok = isinstance(m.ModelNew, type) and issubclass(m.ModelNew, nn.Module)\n"
        "    except Exception as exc:\n"
        "        ok = repr(exc)\n"
        "    if ok is not True:\n"
        "        bad.append((path, ok))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe, *files],
        capture_output=True,
        text=True,
        env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def test_a_task_scaled_for_the_cpu_runs_at_the_manifest_sizes_through_kernelproofs_variants(tmp_path):
    from kernelproof.task import instantiate, load_task, variants_for

    source = candidate_set.HERE / "tasks" / "76_Gemm_Add_ReLU.py"
    bare = tmp_path / "bare.py"
    bare.write_text(source.read_text().split("\nKERNELPROOF = ")[0])  # a KernelBench file has no dict
    sizes = {"batch_size": 5, "in_features": 33, "out_features": 17}
    scaled = candidate_set.scaled_task(bare, sizes, tmp_path / "level2" / "scaled.py")
    task = load_task(scaled)
    assert variants_for(task, "cpu") == ("cpu",)
    module = instantiate(task, "cpu").module
    (x,) = module.get_inputs()
    assert tuple(x.shape) == (5, 33)
    assert module.get_init_inputs() == [33, 17, (17,)]  # constants derived from the sizes follow them


@pytest.mark.slow
def test_the_smoke_set_gets_every_verdict_its_manifest_expects():
    r = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "candidate_set.py"), "--smoke"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "12 verdicts, 0 unexpected" in r.stdout, r.stdout[-4000:]


@pytest.mark.gpu
def test_two_tasks_candidates_get_their_gpu_verdicts_at_the_published_sizes():
    """On a GPU, with KernelBench prepared in .kernelbench (benchmarks/kernelbench_sweep.py --prepare):
    ReLU's and Gemm_Add_ReLU's twenty-one candidates, timed with every check on, as the manifest says."""
    import torch

    kb = REPO / ".kernelbench"
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    if not (kb / "level1").is_dir():
        pytest.skip("needs KernelBench prepared in .kernelbench (benchmarks/kernelbench_sweep.py --prepare)")
    r = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "candidate_set.py"),
            "--kernelbench",
            str(kb),
            "--device",
            "cuda",
            "--per-device",
            "2",
            "--only",
            "level1/19_ReLU/",
            "--only",
            "level2/76_Gemm_Add_ReLU/",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=3000,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-4000:]
    assert "21 verdicts, 0 unexpected" in r.stdout, r.stdout[-6000:]
