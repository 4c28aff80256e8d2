"""A candidate forks processes that leave its process group and spin while the baselines are timed
(tests/data/solutions/forks_a_spinner.py): a stop of the worker reaches them too
(kernelproof.host.members), so they cannot slow the baselines.

Candidate and baselines get every core here, the same ones (``cpu_threads`` = the usable cores):
cores do not hold the two sides apart, and the stop while baselines run is the only defence. The
attack's effect is shown with that defence off first: its children run while the worker is
"stopped". What they run is the evidence, not the ratio: on the 2-core machine even unstopped
spinners left eager's ratio within noise (its 0.05 ms windows, each after a wake-up, are rarely
preempted), where 20 that spun all the time tripled eager's time and the candidate's alike. No
timing threshold is asserted beyond the honest solution's own interval.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path

from kernelproof.api import evaluate
from kernelproof.host import members, scheduling
from kernelproof.host.process import WorkerProcess
from kernelproof.options import EvalOptions
from kernelproof.sandbox import limits

DATA = Path(__file__).resolve().parents[1] / "data"
TASK = str(DATA / "tasks" / "scale_relu.py")
SHARED = EvalOptions(
    device="cpu",
    db="",
    seed=11,
    seeds_per_case=1,
    timeout_s=120,
    time_budget_s=2,
    min_rounds=3,
    max_rounds=4,
    cpu_threads=len(os.sched_getaffinity(0)),  # every core on both sides: nothing separates them
)
SLACK = 1.5  # two evaluations of one computation on a shared machine differ by this much and more


def sol(name: str) -> str:
    return str(DATA / "solutions" / f"{name}.py")


def _eager_ratio(v) -> tuple[float, tuple[float, float]]:
    (s,) = [s for s in v.timing.shapes[0].speedups if s.baseline == "eager"]
    return s.median, s.ci95


def _watching(monkeypatch) -> list[dict[int, str]]:
    """Each stop of the candidate's worker, as seen at its end: the state of every process it
    started that left its process group (pid -> /proc state letter; "frozen" where its cgroup v2
    was frozen, which holds a process without a state letter of its own)."""
    seen: list[dict[int, str]] = []
    real = WorkerProcess.frozen

    @contextmanager
    def frozen(self):
        with real(self) as how:
            yield how
            if self.spec.role == "candidate":
                group = os.getpgid(self.proc.pid)
                left = {p for p in members.descendants(self.proc.pid) if _pgid(p) not in (group, None)}
                seen.append({p: "frozen" if how == "cgroup" else members.state(p) for p in left})

    monkeypatch.setattr(WorkerProcess, "frozen", frozen)
    return seen


def _timed_or_busy(v) -> bool:
    """A pass, or machine_busy: the neighbours of a loaded test machine (an honest candidate's
    harness work stretched beyond the gap's calibration) leave the timing unjudged, never failed."""
    return v.passed or v.codes == ["machine_busy"]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _alive(pids: set[int], limit_s: float = 5.0) -> dict[int, str]:
    """Those of `pids` still alive after up to `limit_s`, with their states (a kill is delivered
    asynchronously; a zombie has ended)."""
    deadline = time.monotonic() + limit_s
    alive = {p: members.state(p) for p in pids}
    while time.monotonic() < deadline:
        alive = {p: s for p in pids if (s := members.state(p)) not in ("", "Z", "X")}
        if not alive:
            break
        time.sleep(0.05)
    return alive


def test_a_spinner_that_left_the_process_group_runs_while_only_the_group_is_stopped(monkeypatch):
    monkeypatch.setattr(scheduling, "STOP_MEMBERS", False)  # the process group alone, as once
    monkeypatch.setattr(limits.Cgroup, "freeze", lambda self, on: False)  # (no cgroup v2 freezer either)
    seen = _watching(monkeypatch)
    v = evaluate(TASK, sol("forks_a_spinner"), SHARED)
    assert _timed_or_busy(v), v.reasons
    assert seen and all(seen), seen  # the children are there, out of the group, at every stop
    assert any(state in ("R", "S") for stop in seen for state in stop.values()), seen  # and not stopped
    assert any(state == "R" for stop in seen for state in stop.values()), seen  # spinning


def test_a_spinner_that_left_the_process_group_stands_still_with_the_worker(monkeypatch):
    seen = _watching(monkeypatch)
    attacked = evaluate(TASK, sol("forks_a_spinner"), SHARED)
    assert _timed_or_busy(attacked), attacked.reasons
    assert seen and all(seen), seen  # the attack ran: children out of the group at every stop
    assert all(state in ("T", "t", "frozen") for stop in seen for state in stop.values()), seen
    still = _alive({pid for stop in seen for pid in stop})
    assert not still, still  # they ended with the worker
    honest = evaluate(TASK, sol("plain_torch"), SHARED)
    assert _timed_or_busy(honest), honest.reasons
    if not (attacked.passed and honest.passed):
        return  # machine_busy: no speed to compare (what stood still at every stop is shown above)
    ratio, _ = _eager_ratio(attacked)
    _, (_, high) = _eager_ratio(honest)
    assert ratio <= high * SLACK, (ratio, high)  # the baseline was not slowed: no speed gained
