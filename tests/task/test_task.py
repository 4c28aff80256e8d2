"""Task loading: KernelBench files unchanged, variants by rewriting constants, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelproof.errors import TaskError
from kernelproof.task import eval_expr, instantiate, load_task, variant_source, variants_for

DATA = Path(__file__).resolve().parents[1] / "data" / "tasks"


def test_variant_overrides_propagate_to_derived_constants():
    task = load_task(DATA / "derived_constants.py")
    small = instantiate(task, "small")
    assert small.constants()["N"] == 16 and small.constants()["M"] == 8
    assert instantiate(task, "default").constants()["M"] == 32
    assert eval_expr(task.meta.flops, small.constants()) == 32


def test_each_variant_gets_its_own_module_namespace():
    task = load_task(DATA / "derived_constants.py")
    a, b = instantiate(task, "default"), instantiate(task, "small")
    assert a.module is not b.module
    assert a.get_inputs()[0].shape[1] == 64 and b.get_inputs()[0].shape[1] == 16


def test_variant_source_is_what_a_baseline_worker_runs():
    task = load_task(DATA / "derived_constants.py")
    assert "N = 16" in variant_source(task, "small")


def test_cpu_variants_come_from_the_metadata():
    task = load_task(DATA / "scale_relu.py")
    assert variants_for(task, "cpu") == ("small", "odd")
    assert variants_for(task, "cuda")[0] == "default"


def test_missing_get_inputs_names_what_is_missing(tmp_path):
    with pytest.raises(TaskError, match="get_inputs"):
        load_task(DATA / "no_get_inputs.py")


def test_syntax_error_in_a_task_points_at_the_line(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n\ndef get_inputs(:\n    pass\n")
    with pytest.raises(TaskError) as err:
        load_task(bad)
    assert ":3:" in str(err.value)


def test_variant_overriding_an_unknown_constant_is_refused(tmp_path):
    t = tmp_path / "t.py"
    t.write_text(
        "import torch\nimport torch.nn as nn\nN = 4\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return x\n"
        "def get_inputs():\n    return [torch.randn(N)]\n"
        "def get_init_inputs():\n    return []\n"
        "KERNELPROOF = {'variants': {'v': {'NOPE': 3}}}\n"
    )
    task = load_task(t)
    with pytest.raises(TaskError, match="NOPE"):
        instantiate(task, "v")


@pytest.mark.parametrize(
    ("meta", "needle"),
    [
        ("{'precision': 'fp8'}", "precision"),
        ("{'policy': 'anything'}", "policy"),
        ("{'domains': ['weird']}", "domain"),
        ("{'flops': 'N * UNDEFINED'}", "UNDEFINED"),
        ("{'colour': 1}", "unknown KERNELPROOF keys"),
        ("{'timed': ['nope']}", "nope"),
    ],
)
def test_bad_metadata_is_refused_with_the_key_named(tmp_path, meta, needle):
    t = tmp_path / "t.py"
    t.write_text(
        "import torch\nimport torch.nn as nn\nN = 4\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return x\n"
        "def get_inputs():\n    return [torch.randn(N)]\n"
        "def get_init_inputs():\n    return []\n"
        f"KERNELPROOF = {meta}\n"
    )
    with pytest.raises(TaskError, match=needle):
        load_task(t)


def test_auto_variants_perturb_size_constants_and_keep_derived_ones_consistent():
    from kernelproof.task import with_auto_variants

    task = load_task(DATA / "scale_relu.py")
    task2, extra = with_auto_variants(task, "small")
    assert extra == ("auto_odd", "auto_half")
    odd = instantiate(task2, "auto_odd").constants()
    half = instantiate(task2, "auto_half").constants()
    assert (odd["batch_size"], odd["features"]) == (7, 31)
    assert (half["batch_size"], half["features"]) == (5, 17)


def test_the_setup_probe_uses_a_small_shape_where_the_task_has_one():
    from kernelproof.evaluate.setup import probe_variant
    from kernelproof.task import load_task, variants_for

    gelu = load_task("suite/level1/09_gelu.py")  # timed at 12288 x 16384; small and odd for the CPU
    assert variants_for(gelu, "cuda")[0] == "default"
    assert probe_variant(gelu, variants_for(gelu, "cuda")) == "small"
    assert probe_variant(gelu, variants_for(gelu, "cpu")) == "small"
    assert probe_variant(gelu, ("default",)) == "default"  # only the timed shape: that one
