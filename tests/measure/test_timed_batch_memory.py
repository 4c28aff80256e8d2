"""A timed batch's fresh inputs fit beside the other workers: calls per batch from their bytes.

Every call of a timed batch gets inputs of its own (I4), and the worker holds them until the batch
is checked. At KernelBench's published sizes five calls of 8 GiB inputs (level1/47_Sum) held 40.7
GiB in the candidate's worker on an H100, beside the baseline's worker and the parent, and a timed
call ran out of memory after every case had passed. A shape whose calls' inputs pass 2 GiB
together makes fewer calls a batch (never fewer than two); every other shape keeps the policy's.
"""

from __future__ import annotations

from types import SimpleNamespace

from kernelproof.inputs import InputSlot
from kernelproof.measure.session import TIMED_BATCH_BYTES, calls_per_batch
from kernelproof.options import TimingPolicy

GIB = 2**30


def _ctx(*shapes: tuple[int, ...]):
    slots = [InputSlot(i, "float", tuple(shape), "float32", "normal") for i, shape in enumerate(shapes)]
    return SimpleNamespace(slots=slots)


def test_small_inputs_keep_the_policy_s_calls():
    assert calls_per_batch(_ctx((4096, 4096)), TimingPolicy()) == 5  # 64 MiB a call
    assert calls_per_batch(_ctx(), TimingPolicy()) == 5  # no tensor input
    assert calls_per_batch(_ctx((8, 8)), TimingPolicy(calls_per_round=3)) == 3


def test_large_inputs_make_fewer_calls_a_batch_and_never_fewer_than_two():
    kb_47_sum = _ctx((128, 4096, 4095))  # 8.0 GiB a call
    assert calls_per_batch(kb_47_sum, TimingPolicy()) == 2
    two_inputs = _ctx((4096, 32768), (4096, 32768))  # 1 GiB a call, in two tensors
    assert calls_per_batch(two_inputs, TimingPolicy()) == 2
    just_under = _ctx((TIMED_BATCH_BYTES // 4 // 5,))  # five calls exactly fill the room
    assert calls_per_batch(just_under, TimingPolicy()) == 5
    assert calls_per_batch(kb_47_sum, TimingPolicy(calls_per_round=1)) == 1  # the policy's, if fewer
    assert 2 * 8 * GIB > TIMED_BATCH_BYTES  # the floor of two calls is what such a shape holds
