"""Decoys beside the legit zoo: each resembles a legit pair and must fail, with a message that says why.

A legit pattern allowed (folded weights recomputed in a load hook, a build requested from
anywhere, a small ATen epilogue) must not open a way through for the decoy next to it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_legit import TASKS, _options, _relative, describe

from kernelproof.api import evaluate
from kernelproof.verdict import ReasonCode

DECOYS = Path(__file__).resolve().parent / "decoys"


def test_folded_weights_never_recomputed_fail_naming_the_perturbation():
    v = evaluate(
        _relative(TASKS / "batchnorm_eval.py"),
        _relative(DECOYS / "folded_batchnorm_stale.py"),
        _options("cpu", False),
    )
    assert not v.passed and v.reasons[0].code is ReasonCode.MISMATCH, describe(v)
    message = v.reasons[0].message
    assert "perturbed" in message and "load_state_dict" in message, message
    assert "scale" in message and "shift" in message, message


EXPLOIT_TASKS = Path(__file__).resolve().parents[1] / "exploits" / "tasks"
COVERAGE_DECOYS = [
    ("one_element_softmax", "softmax.py"),
    ("copy_then_aten_softmax", "softmax.py"),
    ("host_mean_copied_up", "row_mean.py"),
]


@pytest.mark.gpu
@pytest.mark.parametrize(("decoy", "task"), COVERAGE_DECOYS)
def test_coverage_decoys_fail_under_strict_on_the_gpu(decoy, task):
    """Beside the CUDA-graph and partial-sums legit rows, which pass under strict (test_legit.py)."""
    v = evaluate(_relative(EXPLOIT_TASKS / task), _relative(DECOYS / f"{decoy}.py"), _options("cuda", True))
    assert not v.passed, describe(v)
    codes = {r.code for r in v.reasons}
    assert codes & {ReasonCode.LOW_KERNEL_COVERAGE, ReasonCode.NO_CUSTOM_KERNEL}, describe(v)
    assert v.coverage is not None and v.coverage.custom_fraction_raw is not None


def test_a_requested_build_that_fails_is_a_compile_error_even_when_caught():
    task = Path(__file__).resolve().parents[1] / "data" / "tasks" / "scale_relu.py"
    v = evaluate(_relative(task), _relative(DECOYS / "lazy_cpp_broken.py"), _options("cpu", False))
    assert not v.passed and v.reasons[0].code is ReasonCode.COMPILE_ERROR, describe(v)
    assert "kp_lazy_broken" in v.reasons[0].message, describe(v)


def test_a_load_request_the_parent_will_not_read_is_a_compile_error_naming_the_file():
    """The parent reads a load request's files in the worker's own scratch folder, as the worker's
    /tmp maps there, and refuses one with a second hard link even though the worker could read it."""
    task = Path(__file__).resolve().parents[1] / "data" / "tasks" / "scale_relu.py"
    v = evaluate(_relative(task), _relative(DECOYS / "load_linked_source.py"), _options("cpu", False))
    assert not v.passed and v.reasons[0].code is ReasonCode.COMPILE_ERROR, describe(v)
    message = v.reasons[0].message
    assert "/tmp/kp_linked/scale_relu.cpp" in message and "2 hard links" in message, describe(v)


def test_a_custom_operator_loaded_but_never_called_is_no_custom_kernel_on_the_cpu():
    """Beside torch_library_inline_op (test_legit.py), whose torch.ops calls count as launches."""
    task = Path(__file__).resolve().parents[1] / "data" / "tasks" / "scale_relu.py"
    v = evaluate(_relative(task), _relative(DECOYS / "torch_library_op_unused.py"), _options("cpu", True))
    assert not v.passed and ReasonCode.NO_CUSTOM_KERNEL in {r.code for r in v.reasons}, describe(v)
