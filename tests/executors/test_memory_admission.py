"""Bounded GPU memory: evaluations are admitted by footprint, and one short of memory runs again alone.

Two of KernelBench's elementwise tasks (6.4 GB inputs) in flight on one H200 took it past its
memory; the second must wait instead. These run on the CPU with a small capacity and doubles.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest
import torch

from kernelproof import api, blame
from kernelproof.evaluate.setup import footprint_bytes, timed_footprint_bytes
from kernelproof.executors.device_memory import DeviceMemory
from kernelproof.executors.local import LocalPool
from kernelproof.options import EvalOptions, TimingPolicy
from kernelproof.task import load_task
from kernelproof.verdict import Reason, ReasonCode
from kernelproof.verify import footprint
from kernelproof.verify.case_plan import build_variant, make_inputs, reference_and_oracle

DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_reservation_that_does_not_fit_waits_for_the_one_in_flight():
    mem = DeviceMemory(capacity_bytes=100)
    order: list[str] = []
    first_in = threading.Event()

    def first():
        with mem.hold(70):
            order.append("first in")
            first_in.set()
            time.sleep(0.3)
            order.append("first out")

    def second():
        first_in.wait()
        with mem.hold(50) as held:
            order.append(f"second in after {held.waited_s:.1f}s")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert order[:2] == ["first in", "first out"] and order[2].startswith("second in")
    assert mem.reserved_bytes() == 0


def test_an_evaluation_alone_is_admitted_whatever_its_footprint():
    mem = DeviceMemory(capacity_bytes=10)
    with mem.hold(10**12) as held:
        assert held.waited_s < 1.0 and mem.reserved_bytes() == 10**12


def _in_thread(fn) -> threading.Thread:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def test_a_reservation_grows_when_the_others_leave_room():
    mem = DeviceMemory(capacity_bytes=100)
    order: list[str] = []
    first_in, second_in = threading.Event(), threading.Event()

    def first():
        with mem.hold(60):
            first_in.set()
            second_in.wait(5)
            time.sleep(0.2)
            order.append("first out")

    def second():
        first_in.wait(5)
        with mem.hold(30) as held:
            second_in.set()
            held.grow(70)  # 60 + 70 > 100: waits for the first to leave
            order.append("second grown")
            assert mem.reserved_bytes() == 70 and held.waited_s > 0.1

    threads = [_in_thread(first), _in_thread(second)]
    for t in threads:
        t.join(10)
    assert order == ["first out", "second grown"] and mem.reserved_bytes() == 0


def test_two_reservations_that_each_wait_to_grow_do_not_wait_forever():
    """Each holds its setup's memory and waits for room the other holds: the older goes on."""
    mem = DeviceMemory(capacity_bytes=100)
    both_in = threading.Barrier(2)
    grown: list[str] = []

    def evaluation(name: str, first: int, then: int, hold_s: float) -> None:
        with mem.hold(first) as held:
            both_in.wait(5)
            held.grow(then)
            grown.append(name)
            time.sleep(hold_s)

    a = _in_thread(lambda: evaluation("a", 40, 90, 0.3))
    time.sleep(0.05)  # a's ticket is the older
    b = _in_thread(lambda: evaluation("b", 40, 90, 0.0))
    a.join(10)
    b.join(10)
    assert not a.is_alive() and not b.is_alive(), "deadlocked"
    assert grown == ["a", "b"]


def test_the_older_grower_goes_on_when_the_last_holder_starts_to_wait_for_growth():
    """The older waits first (the newer still holds and runs), then the newer waits to grow too:
    that change must wake the older, the one allowed to go on. On an H200 four evaluations each
    waited for one of the others to be woken, for six minutes."""
    mem = DeviceMemory(capacity_bytes=100)
    a_holds, b_holds = threading.Event(), threading.Event()
    grown: list[str] = []

    def older():
        with mem.hold(0) as held:
            held.grow(30)
            a_holds.set()
            b_holds.wait(5)
            held.grow(80)  # 30 + 80 > 100 and the newer is not growing: waits
            grown.append("older")
            time.sleep(0.1)

    def newer():
        a_holds.wait(5)
        with mem.hold(0) as held:
            held.grow(30)
            b_holds.set()
            time.sleep(0.3)  # the older is waiting by now
            held.grow(80)
            grown.append("newer")

    threads = [_in_thread(older), _in_thread(newer)]
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads), f"deadlocked: {mem.describe()}"
    assert grown == ["older", "newer"] and mem.reserved_bytes() == 0


@pytest.mark.parametrize("seed", range(40))
def test_evaluations_that_hold_and_grow_in_any_order_all_finish(seed):
    """Four evaluations as the sweep runs them on one device (hold nothing, grow to setup's
    estimate, grow to the footprint, run, leave), with sizes and pauses drawn at random: each
    finishes."""
    import random

    rng = random.Random(seed)
    capacity = 138
    mem = DeviceMemory(capacity_bytes=capacity)
    finished: list[int] = []
    plans = [
        (
            rng.uniform(0, 0.05),
            rng.randint(0, 110),
            rng.randint(0, 40),
            rng.uniform(0, 0.05),
            rng.uniform(0, 0.05),
        )
        for _ in range(4)
    ]

    def evaluation(k: int) -> None:
        start, estimate, more, setup_s, run_s = plans[k]
        time.sleep(start)
        with mem.hold(0) as held:
            held.grow(estimate)
            time.sleep(setup_s)
            held.grow(estimate + more)
            time.sleep(run_s)
        finished.append(k)

    threads = [_in_thread(lambda k=k: evaluation(k)) for k in range(4)]
    for t in threads:
        t.join(20)
    assert sorted(finished) == [0, 1, 2, 3], f"stalled ({plans}): {mem.describe()}"
    assert mem.reserved_bytes() == 0


def test_a_new_arrival_waits_behind_a_reservation_waiting_to_grow():
    mem = DeviceMemory(capacity_bytes=100)
    order: list[str] = []
    holder_in, grower_in = threading.Event(), threading.Event()

    def holder():
        with mem.hold(50):
            holder_in.set()
            grower_in.wait(5)
            time.sleep(0.3)
            order.append("holder out")

    def grower():
        holder_in.wait(5)
        with mem.hold(10) as held:
            grower_in.set()
            held.grow(50)  # 50 + 50 <= 100: at once
            order.append("grown")
            held.grow(90)  # waits for the holder
            order.append("grown again")
            time.sleep(0.1)

    def arrival():
        grower_in.wait(5)
        time.sleep(0.1)  # the grower is waiting by now
        with mem.hold(20):
            order.append("arrival in")

    threads = [_in_thread(holder), _in_thread(grower), _in_thread(arrival)]
    for t in threads:
        t.join(10)
    assert order == ["grown", "holder out", "grown again", "arrival in"], order


def test_a_small_arrival_goes_beside_a_large_one_into_room_the_oldest_arrival_cannot_use():
    """On an H200 with four in flight, level 1's large tasks (90-120 GB each) ran one at a time, and
    a small evaluation behind the next large one waited too: 45 % of the evaluations' time was
    waiting to arrive. A newer arrival now goes past the oldest waiting one into room it cannot
    use, as long as the oldest's request still fits beside everything that went past it."""
    mem = DeviceMemory(capacity_bytes=100)
    order: list[str] = []
    large_in, release, small_in = threading.Event(), threading.Event(), threading.Event()

    def evaluation(name: str, nbytes: int, entered: threading.Event | None = None) -> None:
        with mem.hold(nbytes):
            order.append(f"{name} in")
            if entered is not None:
                entered.set()
            release.wait(5)
        order.append(f"{name} out")

    a = _in_thread(lambda: evaluation("a", 70, large_in))
    large_in.wait(5)
    b = _in_thread(lambda: evaluation("b", 60))  # 70 + 60 > 100: waits
    time.sleep(0.1)
    c = _in_thread(lambda: evaluation("c", 25, small_in))  # fits beside a; 60 + 25 <= 100 beside b
    assert small_in.wait(5), f"the small arrival waited behind the large one: {mem.describe()}"
    d = _in_thread(lambda: evaluation("d", 20))  # 60 + 25 + 20 > 100: would delay b, waits
    time.sleep(0.2)
    assert "d in" not in order and "b in" not in order, order
    release.set()
    for t in (a, b, c, d):
        t.join(10)
    assert order.index("c in") < order.index("a out") < order.index("b in"), order
    assert order.index("c in") < order.index("d in"), order
    assert mem.reserved_bytes() == 0


def test_no_arrival_goes_past_an_older_one_that_fits_now():
    mem = DeviceMemory(capacity_bytes=100)
    with mem.hold(50):
        mem._queue.append(10**6)  # an older arrival of 40, not yet woken: it fits beside the 50 held
        mem._arriving[10**6] = 40
        assert not mem._may_arrive(10**6 + 1, 10)
        mem._arriving[10**6] = 60  # it does not fit: a newer one that leaves it room goes past it
        assert mem._may_arrive(10**6 + 1, 10) and not mem._may_arrive(10**6 + 1, 50)
        mem._queue.remove(10**6)
        del mem._arriving[10**6]


def test_newer_growers_go_past_an_older_one_that_waits_a_bounded_number_of_times(monkeypatch):
    """A small evaluation may run beside a large one instead of behind the next large one, but a
    stream of them must not keep a large one waiting for ever."""
    from kernelproof.executors import device_memory as memory_module

    monkeypatch.setattr(memory_module, "OVERTAKE_LIMIT", 1)
    mem = DeviceMemory(capacity_bytes=100)
    order: list[str] = []
    holder_in, release = threading.Event(), threading.Event()
    a_waiting, b_out = threading.Event(), threading.Event()

    def holder():
        with mem.hold(60):
            holder_in.set()
            release.wait(5)
            order.append("holder out")

    def grower(name: str, need: int, started: threading.Event | None, done: threading.Event | None) -> None:
        with mem.hold(0) as held:
            if started is not None:
                started.set()
            held.grow(need)
            order.append(f"{name} grown")
            time.sleep(0.1)
        order.append(f"{name} out")
        if done is not None:
            done.set()

    h = _in_thread(holder)
    holder_in.wait(5)
    a = _in_thread(lambda: grower("a", 80, a_waiting, None))  # 60 + 80 > 100: waits
    a_waiting.wait(5)
    time.sleep(0.1)
    b = _in_thread(lambda: grower("b", 30, None, b_out))  # fits beside the holder: past a, once
    assert b_out.wait(5), "the small grower did not go beside the holder"
    c = _in_thread(lambda: grower("c", 30, None, None))  # a was passed once already: c waits
    time.sleep(0.2)
    assert order == ["b grown", "b out"], order
    release.set()
    for t in (h, a, b, c):
        t.join(10)
    assert order == ["b grown", "b out", "holder out", "a grown", "a out", "c grown", "c out"], order
    assert mem.reserved_bytes() == 0


def test_where_every_holder_waits_to_grow_one_that_fits_goes_before_the_oldest_over_commits(monkeypatch):
    """A large evaluation's cases (60) grow to its timed rounds (90) while a small one's cases (20)
    grow to its own (35), past its overtakes: the small one fits beside what is held and goes first;
    the oldest going first would over-commit the device (110 of 100)."""
    from kernelproof.executors import device_memory as memory_module

    monkeypatch.setattr(memory_module, "OVERTAKE_LIMIT", 0)
    mem = DeviceMemory(capacity_bytes=100)
    order: list[str] = []
    a_in, b_in, a_waiting = threading.Event(), threading.Event(), threading.Event()
    peak: list[int] = []

    def large():
        with mem.hold(60) as held:
            a_in.set()
            b_in.wait(5)
            a_waiting.set()
            held.grow(90)
            peak.append(mem.reserved_bytes())
            order.append("large grown")

    def small():
        a_in.wait(5)
        with mem.hold(20) as held:
            b_in.set()
            a_waiting.wait(5)
            time.sleep(0.2)  # the large one waits to grow by now
            held.grow(35)
            peak.append(mem.reserved_bytes())
            order.append("small grown")
            time.sleep(0.1)
        order.append("small out")

    threads = [_in_thread(large), _in_thread(small)]
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads), f"deadlocked: {mem.describe()}"
    assert order == ["small grown", "small out", "large grown"], order
    assert max(peak) <= 100, peak  # never over-committed
    assert mem.reserved_bytes() == 0


def test_a_newer_grower_goes_beside_an_older_one_where_both_fit():
    mem = DeviceMemory(capacity_bytes=100)
    grown: list[str] = []
    with mem.hold(0) as a, mem.hold(0) as b:
        a.grow(60)
        b.grow(40)
        grown.append("both")
    assert grown == ["both"] and mem.reserved_bytes() == 0


def test_an_evaluation_holds_the_estimate_before_setup_and_its_footprint_before_the_worker(monkeypatch):
    """The parent's setup allocates inside the evaluation's reservation, never beside it."""
    v, grows = _grows_of(
        monkeypatch, "plain_torch", EvalOptions(device="cpu", db="", correctness_only=True, seeds_per_case=1)
    )
    assert v.passed, v.reasons
    from kernelproof.task import variants_for
    from kernelproof.verify.footprint import case_need

    task = load_task(DATA / "tasks" / "scale_relu.py")
    need = case_need(task, variants_for(task, "cpu"), "cpu")  # the meta device's estimate
    estimate = need.evaluation_bytes  # the whole evaluation's, not the floor of one case
    assert estimate and need.case_bytes and estimate > need.case_bytes
    assert grows == [estimate, v.environment["memory"]["footprint_bytes"]]
    assert grows[1] >= grows[0]  # what setup measured is at least the estimate from the same sizes
    assert {"setup/admission", "admission"} <= set(v.environment["steps"])


def _grows_of(monkeypatch, solution: str, options: EvalOptions):
    """(the verdict, each size the evaluation's reservation was asked to grow to, in order)."""
    from kernelproof.executors import device_memory as memory_module
    from kernelproof.measure import parent_clock

    grows: list[int] = []
    real = memory_module.DeviceMemory._grow

    def recorded(self, ticket, nbytes):
        grows.append(nbytes)
        return real(self, ticket, nbytes)

    monkeypatch.setattr(memory_module.DeviceMemory, "_grow", recorded)
    # this test's subject is the reservation: no clock check may turn a loaded CI machine's burst
    # into this honest candidate's timing_tamper (with --time-when-busy the load is no error)
    monkeypatch.setattr(parent_clock, "CHECKS_OFF", True)
    pool = LocalPool(prespawn=False)
    monkeypatch.setattr(pool, "memory", lambda device: DeviceMemory(10**12))
    try:
        v = api.evaluate(
            str(DATA / "tasks" / "scale_relu.py"),
            str(DATA / "solutions" / f"{solution}.py"),
            options,
            pool=pool,
        )
    finally:
        pool.close()
    return v, grows


TIMED_QUICK = EvalOptions(
    device="cpu",
    db="",
    seed=5,
    seeds_per_case=1,
    time_budget_s=1,
    min_rounds=3,
    max_rounds=3,
    time_when_busy=True,
)


def test_the_timed_rounds_room_is_reserved_only_once_the_cases_have_passed(monkeypatch):
    """A candidate that fails its cases never reserves the timed rounds' memory (the larger figure:
    a batch in every timed worker); one that passes grows to it after its cases, before it is timed.
    So a large task's cases leave room beside them for smaller evaluations (docs/timing.md)."""
    passed, grows = _grows_of(monkeypatch, "plain_torch", TIMED_QUICK)
    assert passed.passed and passed.timing is not None, passed.reasons
    memory = passed.environment["memory"]
    assert memory["footprint_bytes"] > memory["correctness_bytes"]  # the timed rounds hold more here
    # one call's room past the cases (a GPU's screen of a solution with no kernel of its own)
    assert memory["correctness_bytes"] < memory["profile_bytes"] < memory["footprint_bytes"], memory
    steps = [g for i, g in enumerate(grows) if i == 0 or g != grows[i - 1]]  # (a repeat holds as is)
    assert steps[-2:] == [memory["correctness_bytes"], memory["footprint_bytes"]], grows
    assert "timing_admission" in passed.environment["steps"]

    failed, grows = _grows_of(monkeypatch, "wrong_shape", TIMED_QUICK)
    assert not failed.passed and failed.timing is None
    memory = failed.environment["memory"]
    assert memory["footprint_bytes"] > memory["correctness_bytes"]
    assert max(grows) == memory["correctness_bytes"] and memory["footprint_bytes"] not in grows, grows
    assert "timing_admission" not in failed.environment["steps"]


def test_under_the_sanitizer_the_whole_footprint_is_reserved_before_the_cases(monkeypatch):
    """The sanitizer's worker starts beside the candidate's inside a shared turn, where a wait for
    memory could wait on an evaluation that itself waits for that turn: nothing grows there."""
    v, grows = _grows_of(monkeypatch, "plain_torch", dataclasses.replace(TIMED_QUICK, sanitize=True))
    memory = v.environment["memory"]
    assert memory["footprint_bytes"] > memory["correctness_bytes"], v.reasons
    assert memory["footprint_bytes"] in grows and memory["correctness_bytes"] not in grows[1:], grows


def test_the_footprint_counts_inputs_weights_outputs_and_what_setup_measured():
    task = load_task(DATA / "tasks" / "scale_relu.py")
    ctx = build_variant(task, "default", torch.device("cpu"), "train", 3)
    reference_and_oracle(ctx, make_inputs(ctx, "normal", 1))
    inp, w, out = 64 * 96 * 4, 2 * 96 * 4, 64 * 96 * 4
    estimate = 3 * (inp + w) + 5 * out + (w + 3 * inp + 3 * out)
    assert footprint_bytes([ctx], 0) == estimate
    assert footprint_bytes([ctx], 10**9) == 10**9 + (w + 3 * inp + 3 * out)


def test_the_parents_handoff_buffers_are_counted_beside_its_measure_on_a_gpu(monkeypatch):
    """The parent's own cudaMallocs for the worker's handoff (a task case's large inputs lent, its
    outputs offered) are outside torch's allocator: setup's measure of the parent never sees them.
    Large inputs only above a large case's size; outputs from the wire's bulk size; none on the CPU
    or where the handoff is off."""
    from kernelproof.evaluate import setup as setup_module
    from kernelproof.evaluate.correctness import LARGE_CASE_BYTES
    from kernelproof.wire import handoff
    from kernelproof.wire.protocol import BULK_MIN_BYTES

    sizes = {
        "small": (1024, 0, 1024),
        "bulk_out": (1024, 0, BULK_MIN_BYTES),
        "large": (LARGE_CASE_BYTES + 1, 0, 8),
    }
    monkeypatch.setattr(setup_module, "_case_sizes", lambda ctx: sizes[ctx])
    cuda = torch.device("cuda", 0)
    assert setup_module.handoff_bytes(["small", "bulk_out", "large"], torch.device("cpu")) == 0
    monkeypatch.setattr(handoff, "available", lambda: False)
    assert setup_module.handoff_bytes(["large"], cuda) == 0
    monkeypatch.setattr(handoff, "available", lambda: True)
    assert setup_module.handoff_bytes(["small"], cuda) == 0
    assert setup_module.handoff_bytes(["bulk_out", "large"], cuda) == BULK_MIN_BYTES + LARGE_CASE_BYTES + 1


def test_the_handoff_buffers_of_a_variant_setup_never_drew_are_counted_from_the_meta_sizes(monkeypatch):
    """An audit served from an earlier evaluation leaves a variant with no drawn inputs to count:
    the meta device's sizes of the largest variant are the floor (on an H100, KernelBench
    level1/47_Sum's second candidate in a process was admitted 8.6 GB short and an honest kernel's
    timed call ran out of memory). Drawn slots larger than the floor still count whole."""
    from kernelproof.evaluate import setup as setup_module
    from kernelproof.evaluate.correctness import LARGE_CASE_BYTES
    from kernelproof.verify.footprint import Estimate
    from kernelproof.wire import handoff

    sizes = {"undrawn": (0, 0, 0), "large": (2 * LARGE_CASE_BYTES, 0, 8)}
    monkeypatch.setattr(setup_module, "_case_sizes", lambda ctx: sizes[ctx])
    monkeypatch.setattr(handoff, "available", lambda: True)
    cuda = torch.device("cuda", 0)
    big = LARGE_CASE_BYTES + 4096  # 47_Sum: one 8.6 GB input, a few KB out
    meta = Estimate("default", big, big // 4, 0, 0, 16384, 4096)
    assert setup_module.handoff_bytes(["undrawn"], cuda) == 0  # what was counted before
    assert setup_module.handoff_bytes(["undrawn"], cuda, meta) == big
    assert setup_module.handoff_bytes(["large"], cuda, meta) == 2 * LARGE_CASE_BYTES
    small = Estimate("default", 1024, 256, 0, 0, 1024, 256)
    assert setup_module.handoff_bytes(["undrawn"], cuda, small) == 0
    assert setup_module.handoff_bytes(["undrawn"], torch.device("cpu"), meta) == 0


def test_the_timed_rounds_count_a_batch_of_inputs_and_outputs_in_every_timed_worker(monkeypatch):
    """The candidate's worker and each cold baseline's hold a batch's calls, each with inputs and
    outputs of its own, and the parent keeps its share; the candidate's worker has let go of its
    correctness cases' buffers before it loads for them (kernelproof/worker/loading.py). A small
    batch is kept while the next is drawn (B1), so each worker holds two of them; large calls make
    fewer of them a batch, and a large batch goes before the next (kernelproof/worker/state.py)."""
    from kernelproof.measure import session

    task = load_task(DATA / "tasks" / "scale_relu.py")
    ctx = build_variant(task, "default", torch.device("cpu"), "train", 3)
    reference_and_oracle(ctx, make_inputs(ctx, "normal", 1))
    inp, w, out = 64 * 96 * 4, 2 * 96 * 4, 64 * 96 * 4
    parent = 3 * (inp + w) + 5 * out
    policy = TimingPolicy()  # five calls a batch
    assert timed_footprint_bytes([ctx], 0, 2, policy) == parent + 2 * (w + 2 * 5 * (inp + out))
    assert timed_footprint_bytes([ctx], 10**9, 3, policy) == 10**9 + 3 * (w + 2 * 5 * (inp + out))
    assert timed_footprint_bytes([ctx], 10**9, 0, policy) == 0  # correctness only: nothing timed
    monkeypatch.setattr(session, "TIMED_BATCH_BYTES", 2 * inp)  # a batch's room: two calls' inputs
    assert timed_footprint_bytes([ctx], 0, 2, policy) == parent + 2 * (w + 2 * 2 * (inp + out))
    monkeypatch.setattr(footprint, "KEPT_BATCH_BYTES", inp)  # a batch past the bound: one held
    assert timed_footprint_bytes([ctx], 0, 2, policy) == parent + 2 * (w + 2 * (inp + out))


def test_the_meta_devices_sizes_floor_the_timed_rounds_where_setup_drew_no_inputs():
    """A variant whose audit the store served has no inputs drawn when setup counts: the timed
    rounds' reservation then comes from the meta device's sizes, as the correctness cases' does."""
    from kernelproof.measure.session import calls_for
    from kernelproof.verify.footprint import Estimate, parent_share, timed_bytes

    gib = 2**30
    est = Estimate("default", 8 * gib, 2 * gib, 0, 0, gib // 8, gib // 32)
    calls = calls_for(est.input_bytes, TimingPolicy())
    assert calls == 2  # 8 GiB a call: two a batch
    assert timed_bytes(est, 2, calls) == parent_share(8 * gib, 0, gib // 8) + 2 * 2 * (8 * gib + gib // 8)
    assert timed_bytes(est, 0, calls) == 0


def test_a_timed_evaluation_reserves_its_rounds_and_records_both_phases():
    v = api.evaluate(
        str(DATA / "tasks" / "scale_relu.py"),
        str(DATA / "solutions" / "plain_torch.py"),
        EvalOptions(device="cpu", db="", seeds_per_case=1, baselines=("eager",), time_budget_s=0.2),
    )
    memory = v.environment["memory"]
    assert 0 < memory["correctness_bytes"] < memory["footprint_bytes"], memory
    only = api.evaluate(
        str(DATA / "tasks" / "scale_relu.py"),
        str(DATA / "solutions" / "plain_torch.py"),
        EvalOptions(device="cpu", db="", seeds_per_case=1, correctness_only=True),
    )
    assert only.environment["memory"]["correctness_bytes"] == only.environment["memory"]["footprint_bytes"]


@pytest.mark.parametrize(
    ("cases", "weighed"), [((4, 4), 90 * 10**9), ((4, 2), 40 * 10**9), ((0, 0), 40 * 10**9)]
)
def test_a_failure_is_weighed_against_the_footprint_of_the_phase_it_came_in(cases, weighed):
    """A kernel that crashes among its cases never reached the timed rounds: their memory is not
    its excuse (too_large), nor is it a fact about its failure."""
    from kernelproof.verdict import Correctness

    v = _crashed_out_of_memory(TASK, SOL, "cpu")
    memory = {"footprint_bytes": 90 * 10**9, "correctness_bytes": 40 * 10**9, "admission_wait_s": 0.0}
    v = dataclasses.replace(
        v,
        environment={**v.environment, "memory": memory},
        correctness=Correctness(*cases, 0.0, 0.0, "rel 1e-5", "fp32"),
    )
    pool = LocalPool(prespawn=False)
    try:
        assert blame.memory_facts(v, "cpu", pool).footprint_bytes == weighed
    finally:
        pool.close()


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
    return blame.error_verdict(task, solution, device, reason)


def _passed(task, solution, device):
    return blame.error_verdict(task, solution, device, Reason(ReasonCode.INTERNAL_ERROR, "stand-in"))


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


def _unmapped_out_of_memory(task, solution, device):
    message = "case default/task/0: could not place the case's inputs on cuda:0: CUDA out of memory. Tried to allocate 6.00 GiB"
    return blame.error_verdict(task, solution, device, Reason(ReasonCode.CRASH, message))


def test_a_worker_out_of_memory_on_a_lent_input_runs_again_alone(monkeypatch, fake_pool):
    """H200, KernelBench level1/22_Tanh with six in flight: the worker could not map a 6 GiB input
    (on an H100, level1/94_MSELoss: nor copy two 4 GiB ones from the wire): a crash, run again alone."""
    pool, events = fake_pool
    calls = _evaluations(monkeypatch, [_unmapped_out_of_memory, _passed])
    v = api.evaluate(TASK, SOL, EvalOptions(device="cpu", db="", per_device=2), pool=pool)
    assert len(calls) == 2 and events == ["alone"] and v.reasons[0].message == "stand-in"


OOM_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if WHERE == "reference" and x.dtype != torch.float64:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
        if WHERE == "oracle" and x.dtype == torch.float64:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 12.00 GiB")
        return torch.sigmoid(x)


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("where", ["reference", "oracle"])
def test_the_reference_or_oracle_out_of_memory_is_too_large_never_the_tasks_error(tmp_path, where):
    """H200, KernelBench level1/21_Sigmoid with six in flight: the reference's forward ran out of
    GPU memory and was called the task's error. Out of memory is the device's (too_large, tried
    again alone beside other evaluations); the oracle never falls back to a weaker one for it."""
    task = tmp_path / "sigmoid_oom.py"
    task.write_text(f"WHERE = {where!r}\n" + OOM_TASK)
    sol = tmp_path / "sol.py"
    sol.write_text(OOM_TASK.replace("class Model", "class ModelNew").replace("WHERE ==", "None =="))
    v = api.evaluate(str(task), str(sol), EvalOptions(device="cpu", db="", correctness_only=True))
    assert v.codes == ["too_large"], v.reasons
    assert "out of memory" in v.reasons[0].message.lower()


def _crashed_with_footprint(footprint: int):
    def make(task, solution, device):
        v = _crashed_out_of_memory(task, solution, device)
        env = {**v.environment, "memory": {"footprint_bytes": footprint, "admission_wait_s": 0.0}}
        return dataclasses.replace(v, environment=env)

    return make


@pytest.mark.parametrize(("footprint", "codes"), [(137 * 10**9, ["too_large"]), (10 * 10**9, ["crash"])])
def test_a_worker_out_of_memory_in_an_evaluation_larger_than_the_device_is_too_large(
    monkeypatch, fake_pool, footprint, codes
):
    """A footprint beyond what the device admits, and a worker out of memory: the task's size, not
    the solution's crash. Within the device, a crash stays one."""
    from kernelproof.executors.device_memory import DeviceMemory

    pool, _ = fake_pool
    monkeypatch.setattr(pool, "memory", lambda device: DeviceMemory(129 * 10**9))
    _evaluations(monkeypatch, [_crashed_with_footprint(footprint)])
    v = api.evaluate(TASK, SOL, EvalOptions(device="cpu", db="", per_device=1), pool=pool)
    assert v.codes == codes
    if codes == ["too_large"]:
        assert "137 GB" in v.reasons[0].message and "129 GB" in v.reasons[0].message
        assert v.environment["memory"]["footprint_bytes"] == footprint and v.verdict.value == "error"


def test_out_of_memory_in_the_log_of_a_dead_worker_decides_nothing(tmp_path):
    """The worker's log is the solution's to write: "out of memory" before a death with the
    harness's own exit status is a crash, shown with its log, never too_large (I10). Whether it
    was kernelproof's own lack of memory is for the parent's facts (memory_blame)."""
    import types

    from kernelproof.host.process import SpawnSpec, WorkerProcess
    from kernelproof.wire.protocol import EXIT_HARNESS

    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB."
    w = WorkerProcess(SpawnSpec("baseline", "cpu"))
    real = w.proc
    try:
        w.wait_ready()
        w.kill()
        for rc in (EXIT_HARNESS, -9):
            w.log_path.write_text(f'  File "worker/poison.py", line 24, in fill\n{oom}\n')
            w.proc = types.SimpleNamespace(wait=lambda timeout=None, rc=rc: rc, returncode=rc, pid=w.proc.pid)
            died = w._death()
            assert died.code == "crash", died.message
            assert "out of memory" in died.detail  # shown to the user, deciding nothing
    finally:
        w.proc = real
        w.close()
