"""Shape specialisation made visible: the task's shapes decide, perturbed shapes are also run.

A kernel written only for a KernelBench file's one row length passed on every default before;
now it passes with the flag shape_specialized, naming the shape and the first failure, and
``--shape-variants auto`` (the agent's default) fails it with the same code.
"""

from __future__ import annotations

from pathlib import Path

from kernelproof.api import evaluate
from kernelproof.options import EvalOptions

DATA = Path(__file__).resolve().parents[1] / "data"
TASK = str(DATA / "tasks" / "kb_row_mean.py")
OPTS = EvalOptions(device="cpu", db="", seed=21, correctness_only=True, seeds_per_case=1, timeout_s=120)


def sol(name: str) -> str:
    return str(DATA / "solutions" / f"{name}.py")


def test_a_hard_coded_row_length_passes_the_task_with_the_flag_that_names_the_shape():
    v = evaluate(TASK, sol("row_mean_hardcoded"), OPTS)
    assert v.passed, v.reasons
    flag = next(f for f in v.flags if f.startswith("shape_specialized"))
    assert "auto_" in flag and "cols=" in flag, flag
    assert any(c.startswith("auto_") for c in v.settings["cases"])


def test_under_shape_variants_auto_the_same_kernel_fails_as_shape_specialized():
    v = evaluate(TASK, sol("row_mean_hardcoded"), OPTS.replace(shape_variants="auto"))
    assert not v.passed
    assert v.codes[0] == "shape_specialized", v.reasons
    assert "passes the task's own shapes" in v.reasons[0].message


def test_a_general_kernel_passes_every_probed_shape_without_a_flag():
    for mode in ("probe", "auto"):
        v = evaluate(TASK, sol("row_mean_general"), OPTS.replace(shape_variants=mode))
        assert v.passed, (mode, v.reasons)
        assert not any(f.startswith("shape_specialized") for f in v.flags)


def test_the_task_alone_runs_no_probed_shape():
    v = evaluate(TASK, sol("row_mean_hardcoded"), OPTS.replace(shape_variants="task"))
    assert v.passed and not any(c.startswith("auto_") for c in v.settings["cases"])


def test_a_large_tasks_probes_are_made_smaller_and_still_catch_a_hard_coded_width(monkeypatch, tmp_path):
    """Probes need not be as large as the task's shape to break a kernel that assumes it: above
    PROBE_CASE_BYTES (by the meta estimate) their sizes are divided, small constants untouched."""
    from kernelproof.evaluate import setup

    big = tmp_path / "tall_row_mean.py"
    big.write_text(Path(TASK).read_text().replace("batch_size = 8", "batch_size = 4096"))
    monkeypatch.setattr(setup, "PROBE_CASE_BYTES", 64 * 1024)
    hard = evaluate(str(big), sol("row_mean_hardcoded"), OPTS)
    assert hard.passed, hard.reasons
    divided = next(
        f for f in hard.flags if f.startswith("auto shape variants at the task's sizes divided by")
    )
    assert int(divided.split("divided by ")[1].split()[0]) >= 2, divided
    specialized = next(f for f in hard.flags if f.startswith("shape_specialized"))
    assert "cols=63" in specialized, specialized  # 64 is below the floor: the odd width stays the probe
    general = evaluate(str(big), sol("row_mean_general"), OPTS.replace(shape_variants="auto"))
    assert general.passed and any(c.startswith("auto_") for c in general.settings["cases"]), general.reasons


def test_dividing_sizes_leaves_the_small_constants_alone():
    from kernelproof.task import SHRINK_FLOOR, load_task, with_auto_variants

    task = load_task(TASK)
    task = task.__class__(**{**task.__dict__, "constants": {**task.constants, "batch_size": 4096}})
    shrunk, extra = with_auto_variants(task, "default", 16)
    odd = shrunk.meta.variants["auto_odd"]
    assert odd["batch_size"] == 4096 // 16 - 1 and odd["cols"] == 63 and SHRINK_FLOOR == 64
    assert (
        with_auto_variants(task, "default", 4096)[0].meta.variants["auto_odd"]["batch_size"]
        == SHRINK_FLOOR - 1
    )
