"""Bounded GPU memory: evaluations are admitted by footprint, and one short of memory runs again alone.

Two of KernelBench's elementwise tasks (6.4 GB inputs) in flight on one H200 took it past its
memory; the second must wait instead. These run on the CPU with a small capacity and doubles.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import torch

from kernelproof import api
from kernelproof.evaluate.setup import footprint_bytes
from kernelproof.executors.local import LocalPool
from kernelproof.executors.memory import DeviceMemory
from kernelproof.options import EvalOptions
from kernelproof.task import load_task
from kernelproof.verdict import Reason, ReasonCode
from kernelproof.verify.cases import build_variant, make_inputs, reference_and_oracle

DATA = Path(__file__).parent / "data"


def test_a_reservation_that_does_not_fit_waits_for_the_one_in_flight():
    mem = DeviceMemory(capacity_bytes=100)
    order: list[str] = []
    first_in = threading.Event()

    def first():
        with mem.reserve(70):
            order.append("first in")
            first_in.set()
            time.sleep(0.3)
            order.append("first out")

    def second():
        first_in.wait()
        with mem.reserve(50) as waited:
            order.append(f"second in after {waited:.1f}s")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert order[:2] == ["first in", "first out"] and order[2].startswith("second in")
    assert mem.reserved_bytes() == 0


def test_an_evaluation_alone_is_admitted_whatever_its_footprint():
    mem = DeviceMemory(capacity_bytes=10)
    with mem.reserve(10**12) as waited:
        assert waited < 1.0 and mem.reserved_bytes() == 10**12


def test_the_footprint_counts_inputs_weights_outputs_and_what_setup_measured():
    task = load_task(DATA / "tasks" / "scale_relu.py")
    ctx = build_variant(task, "default", torch.device("cpu"), "train", 3)
    reference_and_oracle(ctx, make_inputs(ctx, "normal", 1))
    inp, w, out = 64 * 96 * 4, 2 * 96 * 4, 64 * 96 * 4
    estimate = 3 * (inp + w) + 5 * out + (w + 2 * inp + 3 * out)
    assert footprint_bytes([ctx], 0) == estimate
    assert footprint_bytes([ctx], 10**9) == 10**9 + (w + 2 * inp + 3 * out)


@pytest.fixture
def fake_pool(monkeypatch):
    """A pool whose admission is recorded; the store is off."""
    pool = LocalPool(prespawn=False)
    events: list[str] = []
    alone = pool.device_alone

    def recorded(device, slots):
        events.append("alone")
        return alone(device, slots)

    monkeypatch.setattr(pool, "device_alone", recorded)
    yield pool, events
    pool.close()


def _evaluations(monkeypatch, outcomes: list):
    """evaluate_pair replaced: each call takes the next outcome (a verdict-making function or an exception)."""
    calls = []

    def fake(task, solution, options, device, workers):
        calls.append(device)
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome(task, solution, device)

    monkeypatch.setattr(api, "evaluate_pair", fake)
    return calls


def _crashed_out_of_memory(task, solution, device):
    reason = Reason(ReasonCode.CRASH, "forward raised OutOfMemoryError: CUDA out of memory")
    return api._error_verdict(task, solution, device, reason)


def _passed(task, solution, device):
    return api._error_verdict(task, solution, device, Reason(ReasonCode.INTERNAL_ERROR, "stand-in"))


TASK, SOL = str(DATA / "tasks" / "scale_relu.py"), str(DATA / "solutions" / "scale_relu_triton.py")


def test_a_candidate_out_of_memory_beside_a_neighbour_runs_again_alone(monkeypatch, fake_pool):
    pool, events = fake_pool
    calls = _evaluations(monkeypatch, [_crashed_out_of_memory, _passed])
    v = api.evaluate(TASK, SOL, EvalOptions(device="cpu", db="", per_device=2), pool=pool)
    assert len(calls) == 2 and events == ["alone"]
    assert v.codes == ["internal_error"]  # the second run's verdict, not the crash


def test_the_parent_out_of_memory_alone_is_too_large_and_never_stored(monkeypatch, fake_pool, tmp_path):
    pool, events = fake_pool
    _evaluations(monkeypatch, [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 12.00 GiB")])
    db = tmp_path / "r.sqlite"
    v = api.evaluate(TASK, SOL, EvalOptions(device="cpu", db=str(db), per_device=1), pool=pool)
    assert v.codes == ["too_large"] and v.verdict.value == "error"
    assert "12.00 GiB" in v.reasons[0].message and events == []
    from kernelproof.store import Store

    assert Store(str(db)).count() == 0
