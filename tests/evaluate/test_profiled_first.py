"""A one-shape task's candidate is profiled before its rounds on a GPU, and refused there only when
its call ran no kernel of its own (evaluate/timing.py, ``_profiled_first``).

The profile itself needs a GPU; here the parent's side is driven with the profile's reply faked at
its seam (``account``), which is what the rule reads."""

from __future__ import annotations

import random

import pytest

from kernelproof.evaluate import timing
from kernelproof.measure.attribution import KernelIdentity
from kernelproof.measure.floor import LaunchFloor
from kernelproof.verdict import Coverage, ReasonCode


def _profiled(monkeypatch: pytest.MonkeyPatch, fraction: float, policy: str = "strict"):
    seen: dict[str, object] = {}

    def account(worker, ctx, seed, identity, policy_, limit, floor_us):
        seen["identity"] = identity
        kernels = (("my_kernel" if fraction else "ampere_sgemm", "solution" if fraction else "aten", 1.0),)
        return Coverage(fraction, kernels, policy_)

    monkeypatch.setattr(timing, "account", account)
    monkeypatch.setattr(timing, "launch_floor", lambda device: LaunchFloor(2.0, 200, "measured"))
    monkeypatch.setattr(timing, "baseline_kernels", lambda *a: ["ampere_sgemm"])
    flags: list[str] = []
    identity, refused = timing._profiled_first(
        object(), None, "default", [timing.Program("eager", object())], random.Random(0),
        KernelIdentity(jitted=frozenset({"my_kernel"})), policy, 30.0, "cuda:0", flags,
    )  # fmt: skip
    return identity, refused, seen


def test_a_call_with_no_kernel_of_its_own_is_refused_before_its_rounds(monkeypatch):
    identity, refused, _ = _profiled(monkeypatch, 0.0)
    assert refused is not None and refused.timing is None and refused.speedup == {}
    assert [r.code for r in refused.reasons] == [ReasonCode.NO_CUSTOM_KERNEL]
    assert refused.coverage is not None and refused.coverage.custom_fraction == 0.0
    assert "before the rounds" in refused.coverage.note


@pytest.mark.parametrize("fraction", [0.3, 1.0])
def test_a_call_with_kernels_of_its_own_goes_on_to_its_rounds(monkeypatch, fraction):
    """Low coverage is not refused here: the profile after the rounds decides it, reconciled with
    the parent's clock; this one only spares the rounds of a candidate that cannot pass."""
    identity, refused, seen = _profiled(monkeypatch, fraction)
    assert refused is None
    # the baselines' kernels joined the identity once, and the profile after the rounds reuses it
    assert identity.baseline == frozenset({"ampere_sgemm"})
    assert seen["identity"] is identity
