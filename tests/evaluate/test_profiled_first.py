"""On a GPU, a solution that defines no kernel of its own is profiled once before any timing and
refused there (evaluate/timing.py, ``_no_kernel_of_its_own``): none of its GPU time can be its own.

The profile itself needs a GPU; here the parent's side is driven with the profile's reply faked at
its seam (``account``), which is what the rule reads."""

from __future__ import annotations

import random

import pytest

from kernelproof.evaluate import timing
from kernelproof.measure.attribution import KernelIdentity
from kernelproof.measure.floor import LaunchFloor
from kernelproof.verdict import Coverage, ReasonCode


def _profiled(monkeypatch: pytest.MonkeyPatch, kernels: tuple, identity: KernelIdentity):
    def account(worker, ctx, seed, own, policy, limit, floor_us):
        assert own is identity
        gpu = sum(ms for _, _, ms in kernels)
        mine = sum(ms for _, origin, ms in kernels if origin == "solution")
        return Coverage(mine / gpu if gpu else None, kernels, policy)

    monkeypatch.setattr(timing, "account", account)
    monkeypatch.setattr(timing, "launch_floor", lambda device: LaunchFloor(2.0, 200, "measured"))
    flags: list[str] = []
    return timing._no_kernel_of_its_own(
        object(), None, random.Random(0), identity, "strict", 30.0, "cuda:0", flags
    )


def test_gpu_work_of_a_solution_with_no_kernel_of_its_own_is_refused_before_timing(monkeypatch):
    refused = _profiled(monkeypatch, (("ampere_sgemm_128x64_nn", "library", 1.5),), KernelIdentity())
    assert refused is not None and refused.timing is None and refused.speedup == {}
    assert [r.code for r in refused.reasons] == [ReasonCode.NO_CUSTOM_KERNEL]
    assert refused.coverage is not None and refused.coverage.custom_fraction == 0.0
    assert "not timed" in refused.coverage.note and "durations not its alone" in refused.coverage.note


def test_a_call_with_no_gpu_work_decides_nothing_and_timing_goes_on(monkeypatch):
    assert _profiled(monkeypatch, (), KernelIdentity()) is None
