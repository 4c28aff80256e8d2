"""The parent's torch globals under concurrent evaluations (per_device > 1): a numeric-flag pin or a
seeded draw in one thread is never interleaved with another's (kernelproof/torch_globals.py)."""

from __future__ import annotations

import threading

import torch

from kernelproof import numeric_flags
from kernelproof.task import load_task
from kernelproof.torch_globals import seeded
from kernelproof.verify.case_plan import build_variant

WAIT_S = 0.5  # how long the first block waits for the second to enter (it must not)


def _run_together(*threads: threading.Thread, timeout_s: float = 10) -> None:
    """Start every thread, then wait for each (an assertion belongs in the test's own thread:
    one raised in a thread only warns)."""
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)


def test_a_pin_in_another_thread_waits_and_the_flags_end_as_they_began():
    def legacy() -> dict:
        """The flags pinned writes (torch's newer fp32_precision reads back "ieee", not "none")."""
        return {k: v for k, v in numeric_flags.read().items() if k in numeric_flags.target("fp32")}

    original = legacy()
    order: list[str] = []
    inside, entered = threading.Event(), threading.Event()
    seen_inside_first: list[dict] = []
    pinned_second: list[dict] = []

    def first():  # the downgrade check's TF32 pin
        with numeric_flags.pinned("tf32"):
            order.append("first in")
            inside.set()
            entered.wait(WAIT_S)  # the second must not get in while this is open
            seen_inside_first.append(numeric_flags.read())
            order.append("first out")

    def second():  # another evaluation's float32 reference
        inside.wait()
        with numeric_flags.pinned("fp32") as pinned:
            order.append("second in")
            entered.set()
            pinned_second.append(pinned)

    _run_together(threading.Thread(target=first), threading.Thread(target=second))
    assert order == ["first in", "first out", "second in"]
    assert pinned_second[0]["matmul.allow_tf32"] is False
    assert seen_inside_first[0]["matmul.allow_tf32"] is True  # not switched off under it
    assert legacy() == original  # not left at another block's values


def test_a_seeded_draw_is_not_moved_by_another_threads_seed():
    with seeded(5):
        expected = torch.rand(4)
    inside, entered = threading.Event(), threading.Event()
    drawn: list[torch.Tensor] = []

    def first():
        with seeded(5):
            inside.set()
            entered.wait(WAIT_S)  # another thread's seed would land here without the lock
            drawn.append(torch.rand(4))

    def second():
        inside.wait()
        with seeded(6):
            entered.set()
            torch.rand(1000)

    _run_together(threading.Thread(target=first), threading.Thread(target=second))
    assert torch.equal(drawn[0], expected)


def test_a_seeded_block_may_run_a_pinned_forward():
    with seeded(1), numeric_flags.pinned("fp32") as pinned:  # reentrant: reference_randomness does this
        assert pinned["float32_matmul_precision"] == "highest"


SLOW_INIT_TASK = """
import time
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.ws = nn.ParameterList()
        for _ in range(n):  # a slow constructor: another thread has time to seed in between
            self.ws.append(nn.Parameter(torch.randn(64)))
            time.sleep(0.002)

    def forward(self, x):
        return x * self.ws[0]


def get_inputs():
    return [torch.rand(4, 64)]


def get_init_inputs():
    return [20]
"""


def test_references_built_in_parallel_threads_get_their_seeds_weights(tmp_path):
    path = tmp_path / "slow_init.py"
    path.write_text(SLOW_INIT_TASK)
    task = load_task(path)
    dev = torch.device("cpu")

    def weights(seed: int) -> list[torch.Tensor]:
        ctx = build_variant(task, "default", dev, "eval", seed)
        return [t.clone() for t in ctx.reference.state_dict().values()]

    alone = {seed: weights(seed) for seed in range(4)}
    together: dict[int, list[torch.Tensor]] = {}

    def build(seed: int) -> None:
        together[seed] = weights(seed)

    _run_together(*(threading.Thread(target=build, args=(s,)) for s in range(4)), timeout_s=60)
    assert sorted(together) == list(range(4))  # every thread built its reference
    for seed in range(4):
        assert all(torch.equal(a, b) for a, b in zip(alone[seed], together[seed]))


def test_a_wait_for_the_lock_is_recorded_under_the_step_that_waited():
    """Evaluations in flight queue here for every reference run: the verdict's steps say how long."""
    from kernelproof.verify import steps

    holding, released = threading.Event(), threading.Event()
    recorded: list[dict] = []

    def holder():  # another evaluation's pinned reference run
        with numeric_flags.pinned("fp32"):
            holding.set()
            released.wait(WAIT_S)

    def waiter():
        holding.wait()
        with steps.recording("task.py") as clock, steps.step("setup"), steps.step("randomness"):
            threading.Timer(0.1, released.set).start()  # the holder leaves while this one waits
            with seeded(1):
                torch.randn(3)
            with seeded(2):  # nobody holds it now: no wait worth a line
                torch.randn(3)
        recorded.append(dict(clock.totals))

    _run_together(threading.Thread(target=holder), threading.Thread(target=waiter))
    waits = recorded[0]["setup/randomness/lock_wait"]
    assert waits["n"] == 1 and waits["s"] > 0.01
    assert set(recorded[0]) == {"setup", "setup/randomness", "setup/randomness/lock_wait"}


def test_outside_an_evaluation_nothing_observes_the_waits():
    from kernelproof import torch_globals

    assert torch_globals._wait_observer.get() is None
    with seeded(3):
        assert torch.randn(2).shape == (2,)
