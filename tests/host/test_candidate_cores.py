"""Each candidate's worker in flight on cores of its own, never the baselines'.

With one set of cores for every candidate, four evaluations in flight on a 16-core H200 host built
their ModelNew and ran their cases on one core: 55_ and 56_ (a 32768 x 32768 Linear each) spent
28 s each in correctness/load side by side (results/h200-2026-12-03-f).
"""

from __future__ import annotations

import os

import pytest

from kernelproof.host import cpus
from kernelproof.host.process import SpawnSpec, WorkerProcess


@pytest.fixture
def sixteen(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setattr(cpus, "_holders", {})


def test_the_sets_are_disjoint_and_never_the_baselines(sixteen):
    one = cpus.candidate_sets(1)
    assert one[0] == cpus.plan(1).candidate == (15,)
    assert one == [(c,) for c in range(15, 0, -1)]  # core 0 is the baselines'
    two = cpus.candidate_sets(2)
    assert two[0] == (14, 15) and two[-1] == (2, 3) and len(two) == 7
    flat = [c for s in two for c in s]
    assert len(flat) == len(set(flat)) and not set(flat) & set(cpus.plan(2).baseline)


def test_workers_in_flight_get_sets_of_their_own_and_a_freed_set_is_taken_again(sixteen):
    leases = [cpus.take_candidate_cores(1, lambda: True) for _ in range(4)]
    assert [cores for _, cores in leases] == [(15,), (14,), (13,), (12,)]
    cpus.give_back_candidate_cores(leases[1][0])
    assert cpus.take_candidate_cores(1, lambda: True)[1] == (14,)


def test_a_holder_that_ended_without_giving_back_no_longer_counts(sixteen):
    running = {"first": True}
    cpus.take_candidate_cores(1, lambda: running["first"])
    assert cpus.take_candidate_cores(1, lambda: True)[1] == (14,)
    running["first"] = False  # killed, never closed
    assert cpus.take_candidate_cores(1, lambda: True)[1] == (15,)


def test_where_the_cores_cannot_be_separated_every_candidate_shares_one_set(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    monkeypatch.setattr(cpus, "_holders", {})
    assert cpus.candidate_sets(2) == [cpus.plan(2).candidate]
    a = cpus.take_candidate_cores(2, lambda: True)[1]
    assert a == cpus.take_candidate_cores(2, lambda: True)[1] == cpus.plan(2).baseline


def test_the_verdict_names_the_cores_the_candidate_was_given(sixteen):
    assert "candidate [13], baselines [0]" in cpus.plan(1).describe((13,))
    assert "candidate [15], baselines [0]" in cpus.plan(1).describe()


@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 3, reason="needs three cores: two candidates and the baselines'"
)
def test_two_live_candidate_workers_run_on_different_cores():
    workers = [WorkerProcess(SpawnSpec("candidate", "cpu")) for _ in range(2)]
    try:
        for w in workers:
            w.wait_ready()
            assert w.pin_candidate(1)
        mine = [set(os.sched_getaffinity(w.proc.pid)) for w in workers]
        assert mine[0] != mine[1] and len(mine[0]) == len(mine[1]) == 1
        assert not (mine[0] | mine[1]) & set(cpus.plan(1).baseline)
        first = workers[0].cores
        workers[0].close()
        third = WorkerProcess(SpawnSpec("candidate", "cpu"))
        workers.append(third)
        third.wait_ready()
        third.pin_candidate(1)
        assert third.cores == first  # the closed worker's set, free again
    finally:
        for w in workers:
            w.close()


def test_a_worker_holds_its_lease_while_it_lives_and_gives_it_back_when_closed(monkeypatch):
    monkeypatch.setattr(cpus, "_holders", {})
    w = WorkerProcess(SpawnSpec("candidate", "cpu"))
    try:
        w.wait_ready()
        w.pin_candidate(1)
        w.pin_candidate(1)  # a later load (another shape variant): the same lease
        assert [cores for cores, _ in cpus._holders.values()] == [w.cores]
        assert set(os.sched_getaffinity(w.proc.pid)) == set(w.cores)
    finally:
        w.close()
    assert cpus._holders == {}
