"""No evaluation holds two cases at once: correctness and the audit free one before the next.

At KernelBench's published sizes (6.4 GB a tensor) the audit kept inputs, reference, oracle and
every control alive together, and correctness drew a case while the last was still referenced.
Weak references to each case's tensors are taken as they are made; when the next is drawn, the
earlier ones must be gone.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import torch

from kernelproof import api
from kernelproof.evaluate import correctness
from kernelproof.options import EvalOptions
from kernelproof.task import load_task
from kernelproof.verify import audit
from kernelproof.verify.case_plan import build_variant

DATA = Path(__file__).resolve().parents[1] / "data"
TASK, SOL = str(DATA / "tasks" / "scale_relu.py"), str(DATA / "solutions" / "plain_torch.py")


class Alive:
    """Weak references to the tensors each drawing made; `check` says how many earlier ones live."""

    def __init__(self) -> None:
        self.refs: list[weakref.ref] = []
        self.still_alive: list[int] = []

    def watch(self, tensors) -> None:
        self.refs += [weakref.ref(t) for t in tensors if isinstance(t, torch.Tensor)]

    def check(self) -> None:
        gc.collect()  # only cycles; plain references are what is counted
        self.still_alive.append(sum(r() is not None for r in self.refs))


def test_correctness_frees_a_case_before_it_draws_the_next(monkeypatch):
    alive = Alive()
    make, both = correctness.make_inputs, correctness.reference_and_oracle

    def drawn(ctx, dist, seed, **kw):
        alive.check()
        args = make(ctx, dist, seed, **kw)
        alive.watch(args)
        return args

    def judged_against(ctx, args):
        ref, orc = both(ctx, args)
        alive.watch(ref + orc)
        return ref, orc

    monkeypatch.setattr(correctness, "make_inputs", drawn)
    monkeypatch.setattr(correctness, "reference_and_oracle", judged_against)
    v = api.evaluate(TASK, SOL, EvalOptions(device="cpu", db="", correctness_only=True, seeds_per_case=2))
    assert v.passed, v.reasons
    assert len(alive.still_alive) >= 4 and set(alive.still_alive) == {0}, alive.still_alive


def test_correctness_held_cases_before_the_fix_would_be_seen(monkeypatch):
    """The check itself: a drawing that keeps its case alive (as before) is counted."""
    alive = Alive()
    kept = []
    make = correctness.make_inputs

    def drawn(ctx, dist, seed, **kw):
        alive.check()
        args = make(ctx, dist, seed, **kw)
        alive.watch(args)
        kept.append(args)
        return args

    monkeypatch.setattr(correctness, "make_inputs", drawn)
    assert api.evaluate(TASK, SOL, EvalOptions(device="cpu", db="", correctness_only=True)).passed
    assert max(alive.still_alive) > 0


def test_the_audit_holds_one_control_at_a_time(monkeypatch):
    """Each control is compared and gone before the next is made; the case's inputs go before
    the other seed's are drawn."""
    seen: list[int] = []
    controls: list[weakref.ref] = []
    real = audit.compare

    def compared(candidate, oracle, ref, tol):
        gc.collect()
        seen.append(sum(r() is not None for r in controls))
        controls.append(weakref.ref(candidate))
        return real(candidate, oracle, ref, tol)

    monkeypatch.setattr(audit, "compare", compared)
    monkeypatch.setattr(audit, "_CACHE", {})
    task = load_task(TASK)
    ctx = build_variant(task, "default", torch.device("cpu"), "train", 3)
    report = audit.audit_variant(task, ctx, 5)
    assert not report.degenerate and len(seen) >= 10
    assert set(seen) == {0}, seen
