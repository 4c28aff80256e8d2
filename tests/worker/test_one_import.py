"""The solution's module is imported once per worker; its ModelNew is built again for each shape variant.

A worker loads the candidate once per shape variant (and again for timing). It used to import the
solution's file at each load, so module-level code ran again in the same process: a solution that
registers an operator at module level with ``torch.library`` (a legitimate pattern) met its own
registration at the second import ("Only a single TORCH_LIBRARY can be used to register the
namespace", "already a kernel registered from python") and was judged ``compile_error``.
"""

from __future__ import annotations

from pathlib import Path

from kernelproof.worker import program

REPO = Path(__file__).resolve().parents[2]
RELU_UNIT = REPO / "tests" / "exploits" / "tasks" / "relu_unit.py"  # two CPU variants: two loads

# A legitimate solution: its own operator, defined and implemented at module level, with its own
# computation (a select against zero, not a call of torch.relu).
LIBRARY_OP = """
import torch
import torch.nn as nn

LIB = torch.library.Library("kp_test_x", "DEF")
LIB.define("relu(Tensor x) -> Tensor")


def _relu(x):
    return torch.where(x > 0, x, torch.zeros_like(x))


LIB.impl("relu", _relu, "CompositeExplicitAutograd")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.ops.kp_test_x.relu(x)
"""


def test_module_level_code_runs_once_and_each_load_builds_a_new_model(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    path = tmp_path / "sol.py"
    path.write_text(
        "import torch.nn as nn\n"
        f"with open({str(runs)!r}, 'a') as f:\n"
        "    f.write('x')\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self, n):\n"
        "        super().__init__()\n"
        "        self.n = n\n"
    )
    monkeypatch.delitem(__import__("sys").modules, "kernelproof_solution", raising=False)
    imported: dict = {}
    first, failed = program.load_candidate(str(path), [1], imported)
    second, failed_again = program.load_candidate(str(path), [2], imported)
    assert failed is None and failed_again is None
    assert runs.read_text() == "x"  # imported once
    assert (first.n, second.n) == (1, 2) and first is not second  # built again for each variant


def test_a_solution_registering_a_torch_library_op_at_module_level_is_judged_on_merit(tmp_path):
    from kernelproof.api import evaluate
    from kernelproof.options import EvalOptions

    solution = tmp_path / "library_op.py"
    solution.write_text(LIBRARY_OP)
    v = evaluate(str(RELU_UNIT), str(solution), EvalOptions(device="cpu", correctness_only=True, db=""))
    assert "compile_error" not in v.codes, v.reasons
    assert v.passed, v.reasons
    assert v.correctness is not None and {c.shape for c in v.correctness.cases} >= {"small", "odd"}
