"""A task's audit is run once for the candidates of that task that arrive together (issue 48).

With several evaluations in flight, the candidates of one task (a training batch, a GRPO group)
used to miss the audit cache together and each ran the whole audit. One audit per key at a time
(kernelproof/verify/single_flight.py): the later ones wait and are served the first one's report,
then still run the check under their own weights, as any served report made under other weights
does.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import torch

from kernelproof.task import load_task
from kernelproof.verify import audit
from kernelproof.verify.case_plan import build_variant
from kernelproof.verify.single_flight import KeyedLocks

DATA = Path(__file__).resolve().parents[1] / "data"
TASK = str(DATA / "tasks" / "scale_relu.py")
CANDIDATES = 6


def _counting(monkeypatch) -> tuple[list[str], list[int]]:
    """The distributions the whole audit runs, and the seeds whose own weights were checked."""
    whole: list[str] = []
    these: list[int] = []
    real, real_check = audit._audit_distribution, audit.check_these_weights

    def counted(ctx, dist, *rest):
        if len(rest) < 5 or rest[4] == audit.CONTROLS:
            whole.append(dist)
            time.sleep(0.05)  # the first audit is still running when the others arrive
        return real(ctx, dist, *rest)

    def checked(task, ctx, seed, *rest):
        these.append(seed)
        return real_check(task, ctx, seed, *rest)

    monkeypatch.setattr(audit, "_audit_distribution", counted)
    monkeypatch.setattr(audit, "check_these_weights", checked)
    monkeypatch.setattr(audit, "_CACHE", {})
    return whole, these


def test_candidates_of_one_task_arriving_together_share_one_audit(monkeypatch):
    whole, these = _counting(monkeypatch)
    task = load_task(TASK)
    # each candidate's evaluation draws its weights from a seed of its own (the task has parameters)
    contexts = [
        build_variant(task, "default", torch.device("cpu"), "train", 3 + i) for i in range(CANDIDATES)
    ]
    start = threading.Barrier(CANDIDATES)
    reports: list = [None] * CANDIDATES

    def candidate(i: int) -> None:
        start.wait()
        reports[i] = audit.audit_variant(task, contexts[i], 100 + i, None)

    threads = [threading.Thread(target=candidate, args=(i,)) for i in range(CANDIDATES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    once = len(whole)
    assert 0 < once <= len(audit.AUDIT_DISTRIBUTIONS)  # one whole audit, not one per candidate
    assert all(r is not None and not r.degenerate for r in reports)
    assert len(these) == CANDIDATES - 1  # every one served still checked its own weights (they differ)
    assert len(set(these)) == CANDIDATES - 1
    assert len(audit._IN_FLIGHT) == 0  # no lock is kept once nobody waits


def test_a_refresh_runs_the_audit_again_whatever_is_kept(monkeypatch):
    whole, _ = _counting(monkeypatch)
    task = load_task(TASK)
    ctx = build_variant(task, "default", torch.device("cpu"), "train", 3)
    audit.audit_variant(task, ctx, 5, None)
    once = len(whole)
    audit.audit_variant(task, ctx, 6, None, refresh=True)
    assert len(whole) == 2 * once


def test_keyed_locks_let_other_keys_through_while_one_is_held():
    locks = KeyedLocks()
    entered = threading.Event()
    with locks.hold("a"):
        t = threading.Thread(target=lambda: locks.hold("b").__enter__() or entered.set())
        t.start()
        t.join(5)
        assert entered.is_set()
