"""The device gate: untimed work of several evaluations overlaps on a device, timing never does."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from proc_state import stopped
from scripted_worker import frame, reply_to, scripted

from kernelproof.api import evaluate_many
from kernelproof.errors import UsageError
from kernelproof.executors.local import LocalPool
from kernelproof.host.gate import DeviceGate
from kernelproof.measure.quiet import QuietGpu, quiet_probe
from kernelproof.options import EvalOptions

DATA = Path(__file__).resolve().parents[1] / "data"
TASK = str(DATA / "tasks" / "scale_relu.py")
# How long a thread waits for the next step of a test: never reached unless the test fails; a
# loaded machine can be slow to schedule a thread, so no step's outcome depends on a shorter wait.
PATIENCE_S = 120.0


def _until(condition) -> bool:
    """Poll `condition` until it holds (True) or PATIENCE_S passes (False)."""
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _start(target) -> threading.Thread:
    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t


def _timing(gate: DeviceGate) -> tuple[threading.Thread, threading.Event]:
    """A timing started in its own thread, and the event it sets once inside."""
    entered = threading.Event()

    def run():
        with gate.exclusive():
            entered.set()

    return _start(run), entered


def test_shared_holders_overlap_and_timing_waits_for_them_to_leave():
    gate = DeviceGate()
    inside = threading.Event()
    leave = threading.Event()

    def shared_worker():
        with gate.shared():
            inside.set()
            leave.wait(PATIENCE_S)

    _start(shared_worker)
    assert inside.wait(PATIENCE_S)
    with gate.shared():  # a second shared holder gets in at once
        assert gate.holders() == (2, False)
    t, entered_exclusive = _timing(gate)
    assert _until(lambda: gate._exclusive_waiting == 1)
    time.sleep(0.2)
    assert not entered_exclusive.is_set()  # a shared holder is still inside
    leave.set()
    t.join(PATIENCE_S)
    assert entered_exclusive.is_set()
    assert gate.holders() == (0, False)


def test_a_waiting_timing_keeps_new_shared_work_out():
    """Writer preference: timing waits for the stretches under way, not for a stream of new ones."""
    gate = DeviceGate()
    leave = threading.Event()
    order: list[str] = []
    inside = threading.Event()

    def first():
        with gate.shared():
            inside.set()
            leave.wait(PATIENCE_S)
        order.append("first left")

    def timing():
        with gate.exclusive() as waited:
            order.append("timing")
            assert gate.holders() == (0, True)
            assert waited > 0.1

    def latecomer():
        with gate.shared():
            order.append("latecomer")

    _start(first)
    assert inside.wait(PATIENCE_S)
    t = _start(timing)
    assert _until(lambda: gate._exclusive_waiting == 1)  # the timing is waiting now
    late = _start(latecomer)
    time.sleep(0.2)
    assert "latecomer" not in order  # kept out while the timing waits
    leave.set()
    t.join(PATIENCE_S)
    late.join(PATIENCE_S)
    assert order == ["first left", "timing", "latecomer"]


class FakeWorker:
    """A worker whose reply has been awaited long enough to be lent (or never, with `busy=False`)."""

    def __init__(self, busy: bool = True) -> None:
        self.busy = busy
        self.events: list[str] = []

    def lend(self, min_wait_s: float) -> bool:
        if self.busy:
            self.events.append("lent")
        return self.busy

    def give_back(self) -> None:
        self.events.append("given back")


def _holder(gate: DeviceGate, worker: FakeWorker, leave: threading.Event, inside: threading.Event):
    def run():
        with gate.shared():
            gate.lendable(worker)
            inside.set()
            leave.wait(PATIENCE_S)

    return _start(run)


def test_a_holder_awaiting_a_reply_is_lent_to_a_waiting_timing_and_given_back_after():
    gate = DeviceGate(quiet=lambda: True, lend_after_s=0.3)
    worker, leave, inside = FakeWorker(), threading.Event(), threading.Event()
    holder = _holder(gate, worker, leave, inside)
    assert inside.wait(PATIENCE_S)
    with gate.exclusive():
        assert gate.holders() == (0, True)  # the holder is still inside, counted absent
        assert worker.events == ["lent"]
        assert holder.is_alive() and not leave.is_set()  # the timing did not wait for it to leave
    assert worker.events == ["lent", "given back"]
    leave.set()
    holder.join(PATIENCE_S)
    assert gate.lent_count == 1 and gate.holders() == (0, False)


def test_a_device_that_does_not_go_quiet_gets_its_worker_back_and_the_timing_waits():
    gate = DeviceGate(quiet=lambda: False, lend_after_s=0.2)
    worker, leave, inside = FakeWorker(), threading.Event(), threading.Event()
    holder = _holder(gate, worker, leave, inside)
    assert inside.wait(PATIENCE_S)
    t, entered = _timing(gate)
    assert _until(lambda: len(worker.events) >= 2)
    assert not entered.is_set()
    assert worker.events[:2] == ["lent", "given back"]  # stopped, the device stayed busy: resumed
    leave.set()
    t.join(PATIENCE_S)
    holder.join(PATIENCE_S)
    assert entered.is_set() and gate.lent_count == 0


def test_a_holder_doing_its_own_gpu_work_is_never_lent():
    gate = DeviceGate(quiet=lambda: True, lend_after_s=0.2)
    worker, leave, inside = FakeWorker(busy=False), threading.Event(), threading.Event()
    holder = _holder(gate, worker, leave, inside)
    assert inside.wait(PATIENCE_S)
    t, entered = _timing(gate)
    assert _until(lambda: gate._exclusive_waiting == 1)
    time.sleep(0.8)  # four lending looks of the waiting timing (lend_after_s 0.2)
    assert not entered.is_set() and worker.events == []
    leave.set()
    t.join(PATIENCE_S)
    holder.join(PATIENCE_S)
    assert entered.is_set()


def _building_worker_script(pending: list):
    """A worker that answers a profile request with a build message first, and the request's own
    reply once the parent has answered the build."""

    def script(req):
        if req.get("op") == "built":
            return frame(reply_to(pending[0], kernels=[["k", 7, 0.5, -1, -1]]))
        pending.append(req)
        return frame({"op": "build", "call": "load_inline", "args": {}})

    return script


def test_a_worker_waiting_for_its_build_gives_up_its_slot_to_a_waiting_timing(tmp_path):
    """A build takes tens of seconds; the worker does nothing on the device meanwhile, so another
    evaluation's timing need not wait for it. Its reply waits for the timing instead."""
    building, finish = threading.Event(), threading.Event()
    with scripted(tmp_path, _building_worker_script([])) as w:

        def build(header):
            building.set()
            finish.wait(PATIENCE_S)
            return {"op": "built", "ok": True, "message": ""}

        w.build_handler = build
        gate = DeviceGate(quiet=lambda: True, lend_after_s=0.2)
        replies: list = []

        def holder():
            with gate.shared():
                gate.lendable(w)
                replies.append(w.request({"op": "profile", "seed": 1}, None, 60))

        t = _start(holder)
        assert building.wait(PATIENCE_S)
        with gate.exclusive():
            assert gate.holders() == (0, True) and w.lent and stopped(w.proc.pid, True)
            finish.set()  # the build ends while the timing is inside
            time.sleep(0.5)
            assert replies == []  # held back until the worker is given back
        t.join(PATIENCE_S)
        assert not w.lent and not stopped(w.proc.pid, False)  # resumed
    assert replies and replies[0][0] == {"ok": True, "kernels": [["k", 7, 0.5, -1, -1]]}
    assert gate.lent_count == 1


class FakeNvml:
    """NVML's utilisation samples: a new sample from `values` every other call after the first (the
    check polls faster than NVML samples); like NVML, a call with nothing newer raises NOT_FOUND."""

    NVML_GPU_UTILIZATION_SAMPLES = 1
    NVML_ERROR_NOT_FOUND = 6

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            super().__init__(value)
            self.value = value

    def __init__(self, values: list[int]) -> None:
        self.values = list(values)
        self.samples = [SimpleNamespace(timeStamp=100, sampleValue=SimpleNamespace(uiVal=90))]
        self.calls = 0

    def nvmlDeviceGetSamples(self, handle, kind, since):
        self.calls += 1
        if since and self.values and self.calls % 2:  # the device took one more sample meanwhile
            ts = self.samples[-1].timeStamp + 10
            self.samples.append(
                SimpleNamespace(timeStamp=ts, sampleValue=SimpleNamespace(uiVal=self.values.pop(0)))
            )
        newer = [x for x in self.samples if x.timeStamp > since]
        if not newer:
            raise self.NVMLError(self.NVML_ERROR_NOT_FOUND)
        return 0, newer


def _probe(values: list[int]) -> QuietGpu:
    probe = object.__new__(QuietGpu)
    probe.nvml, probe.handle, probe.error = FakeNvml(values), None, ""
    probe.WAIT_S = 1.0
    return probe


@pytest.mark.parametrize(
    ("values", "quiet"),
    [
        ([0, 0, 0], True),
        ([80, 0, 0], True),  # the first sample after the stop may still cover work from before it
        ([5, 0, 0, 7], True),  # SAMPLES = 2 after the skipped one: a later one is not waited for
        ([0, 5, 0, 0], True),  # the last kernels drained (or NVML's figure trailed): then quiet
        ([90, 90, 40, 0, 0], True),
        ([0, 0, 3], False),  # no two zeros in a row after the skipped one before the deadline
        ([0, 5, 0], False),
        ([0, 5, 5, 5, 5, 5, 5], False),  # a kernel that keeps running after the stop: busy
        ([0], False),  # too few samples before the deadline: cannot tell
    ],
)
def test_the_gpu_counts_as_quiet_after_two_zero_samples_in_a_row_after_the_stop(values, quiet):
    probe = _probe(values)
    assert probe() is quiet
    assert probe.last_samples == values[: len(probe.last_samples)] and probe.last_samples


def test_any_other_nvml_error_means_busy():
    probe = _probe([0, 0, 0])
    fake = probe.nvml

    def broken(handle, kind, since):
        raise fake.NVMLError(999)

    fake.nvmlDeviceGetSamples = broken
    assert probe() is False


class SpyGate(DeviceGate):
    """Records every stretch, checks that timing is alone, and makes the first two evaluations meet
    inside their first shared stretch: a run that did not overlap them breaks the barrier."""

    def __init__(self, quiet=None) -> None:
        super().__init__(quiet=quiet)
        self.log: list[tuple[str, int, float, float]] = []
        self.stopped_while_timed: list[bool] = []  # per lent worker: was it stopped (state T)?
        self.lonely_timing: list[tuple[int, bool]] = []
        self._meet = threading.Barrier(2, timeout=120)
        self._met: set[int] = set()
        self._spy_lock = threading.Lock()

    @contextmanager
    def shared(self):
        with DeviceGate.shared(self) as waited:
            me = threading.get_ident()
            with self._spy_lock:
                first_visit = me not in self._met and len(self._met) < 2
                self._met.add(me)
            if first_visit:
                self._meet.wait()
            t0 = time.monotonic()
            try:
                yield waited
            finally:
                self.log.append(("shared", me, t0, time.monotonic()))

    @contextmanager
    def exclusive(self):
        with DeviceGate.exclusive(self) as waited:
            if self.holders() != (0, True):
                self.lonely_timing.append(self.holders())
            for w in list(self._lent.values()):
                self.stopped_while_timed.append(stopped(w.proc.pid, True))
            t0 = time.monotonic()
            try:
                yield waited
            finally:
                self.log.append(("exclusive", threading.get_ident(), t0, time.monotonic()))


class SpyPool(LocalPool):
    def __init__(self, quiet=None) -> None:
        super().__init__()
        self.spy = SpyGate(quiet)

    def gate(self, device: str) -> DeviceGate:
        return self.spy


def two_in_flight_on_the_cpu(timeout_s: float) -> EvalOptions:
    """Two evaluations at once on the CPU, with short timings."""
    return EvalOptions(
        device="cpu",
        db="",
        seed=5,
        seeds_per_case=1,
        timeout_s=timeout_s,
        time_budget_s=0.5,
        min_rounds=3,
        max_rounds=4,
        per_device=2,
        time_interpreted=True,  # the timings' exclusivity is what is shown, interpreted ones' too
    )


def test_two_evaluations_per_device_overlap_their_checks_and_never_their_timing():
    pool = SpyPool()
    opts = two_in_flight_on_the_cpu(timeout_s=120)
    pairs = [(TASK, str(DATA / "solutions" / "scale_relu_triton.py"))] * 3
    try:
        verdicts = list(evaluate_many(pairs, opts, pool=pool))
    finally:
        pool.close()
    assert [v.verdict.value for v in verdicts] == ["pass"] * 3, [v.reasons for v in verdicts]
    assert all(v.timing is not None for v in verdicts)
    assert all(v.environment["per_device"] == 2 for v in verdicts)  # said in every verdict
    log = pool.spy.log
    timings = [e for e in log if e[0] == "exclusive"]
    # each evaluation has the device alone twice on the CPU: its launches counted, then its rounds
    # (the loads between them take a shared turn: kernelproof/evaluate/device_turns.py)
    assert len(timings) == 2 * 3
    assert pool.spy.lonely_timing == []
    for timing in timings:  # nothing else was inside while a timing was
        _, who, t0, t1 = timing
        others = [e for e in log if e is not timing and e[2] < t1 and t0 < e[3]]
        assert others == [], (who, others)
    threads = {who for _, who, _, _ in log}
    assert len(threads) == 2  # two evaluations in flight on the one device


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)])
def test_timings_loads_take_a_shared_turn_and_only_the_measuring_holds_the_device_alone(monkeypatch, device):
    """The candidate's program and the baselines' are loaded beside other evaluations' untimed work,
    and on a GPU the device's launch floor measured; the rounds run with the device alone
    (kernelproof/evaluate/device_turns.py)."""
    from kernelproof.evaluate import timing
    from kernelproof.measure import floor

    monkeypatch.setattr(floor, "_cache", {})  # measured in this evaluation, not an earlier one

    gate = DeviceGate()
    pool = LocalPool()
    pool.gate = lambda device: gate  # one gate, no spy's barrier: this evaluation runs alone
    seen: dict[str, list[tuple[int, bool]]] = {"load": [], "baselines": [], "rounds": [], "floor": []}

    def spied(name, real):
        def call(*args, **kwargs):
            seen[name].append(gate.holders())
            return real(*args, **kwargs)

        return call

    spies = (("load", "load_candidate"), ("baselines", "_baselines"), ("rounds", "time_variant"))
    for name, attr in (*spies, ("floor", "launch_floor")):
        monkeypatch.setattr(timing, attr, spied(name, getattr(timing, attr)))
    try:
        (verdict,) = evaluate_many(
            [(TASK, str(DATA / "solutions" / "scale_relu_triton.py"))],
            two_in_flight_on_the_cpu(120).replace(device=device),
            pool=pool,
        )
    finally:
        pool.close()
    assert verdict.verdict.value == "pass", verdict.reasons
    assert seen["load"] and all(held == (1, False) for held in seen["load"]), seen
    assert seen["baselines"] and all(held == (1, False) for held in seen["baselines"]), seen
    assert seen["rounds"] and all(held == (0, True) for held in seen["rounds"]), seen
    if device == "cpu":
        assert seen["floor"] == [], seen  # no floor to measure on the CPU
    else:  # first in a shared turn; the profile asks again, in the measuring stretch, from the cache
        assert seen["floor"][0] == (1, False) and len(floor._cache) == 1, seen
    steps = verdict.environment["steps"]
    assert {"timing/load", "timing/baselines", "timing/warm_up", "timing/rounds", "timing_wait"} <= set(steps)


@pytest.mark.gpu
def test_a_solution_with_no_kernel_of_its_own_is_refused_untimed_in_a_shared_turn(monkeypatch):
    """Plain PyTorch on a GPU: one call profiled before timing, beside others' work; refused
    ``no_custom_kernel`` with no baseline loaded and no stretch alone (evaluate/timing.py)."""
    from kernelproof.evaluate import timing

    gate = DeviceGate()
    pool = LocalPool()
    pool.gate = lambda device: gate
    seen: list[tuple[int, bool]] = []
    real = timing.account
    monkeypatch.setattr(timing, "account", lambda *a, **k: seen.append(gate.holders()) or real(*a, **k))
    try:
        (verdict,) = evaluate_many(
            [(TASK, str(DATA / "solutions" / "plain_torch.py"))],
            two_in_flight_on_the_cpu(120).replace(device="cuda:0"),
            pool=pool,
        )
    finally:
        pool.close()
    assert [r.code.value for r in verdict.reasons] == ["no_custom_kernel"], verdict.reasons
    assert seen == [(1, False)]  # one profile, in a shared turn
    assert "not timed" in verdict.coverage.note and verdict.timing is None
    steps = verdict.environment["steps"]
    assert "timing/profile_first" in steps and not {"timing/baselines", "timing/rounds", "timing_wait"} & set(
        steps
    )


def _warm(pool: LocalPool, per_device: int) -> None:
    """Started workers waiting, as in a session that has evaluated before: the candidate spares and
    the baseline spare are ready, so no worker's start (torch's import: seconds, and many more on a
    loaded machine) runs inside a race with a timeout."""
    pool.device_slots("cpu", per_device)
    pool.candidate("cpu").close()
    wanted = {("candidate", "cpu"): per_device, ("baseline", "cpu"): 1}
    assert _until(lambda: all(len(pool._spare.get(k, [])) == n for k, n in wanted.items()))
    for key in wanted:
        for w in pool._spare[key]:
            w.wait_ready()


def test_a_hung_candidate_is_stopped_while_the_other_evaluations_time_and_still_times_out():
    """The hang holds its slot for its own timeout, not the device: it is lent to each timing."""
    pool = SpyPool(quiet=lambda: True)  # on the CPU a stopped worker runs nothing
    # The two good evaluations must both be timed within the hang's 20 s of running: they took
    # 9 s on a 2-core machine at load 8, their workers started beforehand (_warm).
    opts = two_in_flight_on_the_cpu(timeout_s=20)
    _warm(pool, opts.per_device)
    hang = str(DATA / "solutions" / "forward_sleeps_forever.py")
    good = str(DATA / "solutions" / "scale_relu_triton.py")
    try:
        verdicts = {
            v.solution.path + str(i): v
            for i, v in enumerate(evaluate_many([(TASK, hang), (TASK, good), (TASK, good)], opts, pool=pool))
        }
    finally:
        pool.close()
    hung = [v for v in verdicts.values() if v.solution.path == hang]
    passed = [v for v in verdicts.values() if v.solution.path == good]
    assert [v.codes for v in hung] == [["timeout"]], [v.reasons for v in hung]
    assert [v.verdict.value for v in passed] == ["pass", "pass"], [v.reasons for v in passed]
    spy = pool.spy
    assert spy.lonely_timing == []
    assert spy.lent_count >= 1 and spy.stopped_while_timed and all(spy.stopped_while_timed)
    # Both timings ran while the hang's worker was still inside its correctness stretch.
    hang_end = max(e[3] for e in spy.log if e[0] == "shared")
    assert all(e[3] < hang_end for e in spy.log if e[0] == "exclusive")
    # Its timeout counted only the time it ran: it was stopped during the timings, so it lasted longer.
    assert hung[0].elapsed_s >= 20


def test_per_device_below_one_is_a_usage_error():
    with pytest.raises(UsageError, match="per-device"):
        list(evaluate_many([(TASK, TASK)], EvalOptions(device="cpu", db="", per_device=0)))


BUSY_GPU = Path(__file__).resolve().parents[2] / "scripts" / "busy-gpu"


@pytest.mark.gpu
def test_nvml_sees_another_process_keep_the_gpu_busy_and_then_go_quiet():
    """The check lending depends on, on the real device (found by UUID, whatever CUDA_VISIBLE_DEVICES)."""
    import subprocess
    import sys

    from kernelproof.measure.quiet import QuietGpu

    probe = QuietGpu(0)
    assert probe.nvml is not None, probe.error
    busy = subprocess.Popen([sys.executable, str(BUSY_GPU), "8"], stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout.readline().strip() == "busy"
        assert probe() is False, probe.last_samples  # matmuls in another process: not quiet
    finally:
        busy.wait(60)
    assert probe() is True, probe.last_samples  # nothing of anyone's runs now


@pytest.mark.gpu
def test_on_a_gpu_a_hung_candidate_is_lent_to_the_other_evaluations_timing():
    pool = SpyPool()
    pool.spy.quiet = quiet_probe("cuda:0")
    assert pool.spy.quiet is not None
    opts = EvalOptions(
        device="cuda:0", db="", seed=5, seeds_per_case=1, timeout_s=20, time_budget_s=0.5, per_device=2
    )
    hang = str(DATA / "solutions" / "infinite_loop.py")  # busy on the GPU until stopped
    good = str(DATA / "solutions" / "scale_relu_triton.py")  # a kernel of its own: it may pass on a GPU
    try:
        verdicts = list(evaluate_many([(TASK, hang), (TASK, good)], opts, pool=pool))
    finally:
        pool.close()
    codes = sorted(",".join(v.codes) or v.verdict.value for v in verdicts)
    assert codes == ["pass", "timeout"], [v.reasons for v in verdicts]
    assert pool.spy.lent_count >= 1 and all(pool.spy.stopped_while_timed)
    assert pool.spy.lonely_timing == []
