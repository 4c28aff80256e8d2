"""Numeric flags: precision settings stay pinned, cuDNN's algorithm-choice modes are the solution's."""

from __future__ import annotations

import torch

from kernelproof import numeric_flags
from kernelproof.verdict import ReasonCode
from kernelproof.worker.checks import flags as flag_check


def test_cudnn_modes_are_neutral_and_precision_flags_are_not():
    want = numeric_flags.target("fp32")
    now = {**want, "cudnn.benchmark": True, "cudnn.deterministic": True}
    assert numeric_flags.precision_differences(want, now) == []
    assert numeric_flags.neutral_settings("fp32", now) == {
        "cudnn.benchmark": True,
        "cudnn.deterministic": True,
    }
    tf32 = {**want, "matmul.allow_tf32": True}
    assert numeric_flags.precision_differences(want, tf32) == ["matmul.allow_tf32"]
    reduced = {**want, "matmul.allow_fp16_reduced_precision_reduction": False}
    assert numeric_flags.precision_differences(want, reduced) == [
        "matmul.allow_fp16_reduced_precision_reduction"
    ]


def test_the_worker_check_allows_benchmark_mode_and_refuses_tf32():
    with numeric_flags.pinned("fp32"):
        torch.backends.cudnn.benchmark = True
        assert flag_check.check(numeric_flags.target("fp32")) is None
        torch.backends.cuda.matmul.allow_tf32 = True
        refused = flag_check.check(numeric_flags.target("fp32"))
    assert refused is not None and refused["code"] == ReasonCode.FLAGS_CHANGED.value
    assert "matmul.allow_tf32" in refused["message"]


def test_a_reduced_precision_reduction_switched_off_is_flags_changed():
    with numeric_flags.pinned("fp32"):
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        refused = flag_check.check(numeric_flags.target("fp32"))
    assert refused is not None and "bf16_reduced_precision" in refused["message"]


def test_a_baseline_is_given_only_the_candidates_benchmark_mode():
    settings = {"cudnn.benchmark": True, "cudnn.deterministic": True}
    assert numeric_flags.baseline_setting(settings) == {"cudnn.benchmark": True}
    with numeric_flags.pinned("fp32"):
        numeric_flags.apply(
            "fp32", {"cudnn.benchmark": True, "matmul.allow_tf32": True}
        )  # only NEUTRAL keys count
        now = numeric_flags.read()
    assert now["cudnn.benchmark"] is True and now["matmul.allow_tf32"] is False


def test_the_flag_names_the_setting_and_says_it_is_allowed():
    text = numeric_flags.neutral_flag({"cudnn.benchmark": True})
    assert text.startswith("numeric_neutral_setting:") and "torch.backends.cudnn.benchmark=True" in text
    assert numeric_flags.neutral_flag({}) == ""
