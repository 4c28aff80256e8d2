"""Decoys beside the legit zoo: each resembles a legit pair and must fail, with a message that says why.

A legit pattern allowed (folded weights recomputed in a load hook, a build requested from
anywhere, a small ATen epilogue) must not open a way through for the decoy next to it.
"""

from __future__ import annotations

from pathlib import Path

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
