"""Every process a worker started, wherever it went: so that a stop of the worker stops them all.

A stop of the worker's process group (SIGSTOP to the group) misses a child that left the group: a
solution forked through a torch helper (``torch.multiprocessing.start_processes``, judged as
torch's fork by the audit hook), its children called ``os.setsid`` and spun on the CPU while the
baselines were timed, with the worker "stopped" (issue 28). Cores do not always hold them apart:
where the machine has too few to separate the two sides, candidate and baselines share them, and
the stop is then the only defence (kernelproof.host.cpus).

So a stop also reaches, one signal each:

- every process of the worker's cgroup, where it has one (a child cannot leave it: moving a
  process needs write access to another cgroup's ``cgroup.procs``, which the sandbox denies);
- every descendant of the worker found through /proc's parent links, where it has none. The
  orphan of a double fork stays a descendant: the bootstrap makes the worker a child subreaper
  (kernelproof.sandbox.contain, the ``processes`` layer), so the orphan is reparented to the
  worker, not to init, and seccomp denies the candidate clearing the mark.

A process that forks while it is being stopped is caught by listing again until no new member
appears (a stopped process forks nothing). The same members are killed when the worker ends
(:func:`end`), before its exit orphans them.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from kernelproof.sandbox.limits import Cgroup

LIST_ROUNDS = 5  # list, stop, list again: a member forking meanwhile needs one more round
STOP_WAIT_S = 0.5  # how long a stop may take to be delivered (signals are asynchronous)


def members(root: int, cgroup: Cgroup | None) -> set[int]:
    """The processes that belong to the worker ``root``: its cgroup's where it has one (a cheap
    read; its descendants are all in it), else its descendants (a scan of /proc: 2.4 ms for 85
    processes on the 2-core CPU machine)."""
    for p in cgroup.paths if cgroup is not None else ():
        try:
            return {int(x) for x in (p / "cgroup.procs").read_text().split()}
        except (OSError, ValueError):
            continue
    return descendants(root)


def descendants(root: int) -> set[int]:
    """``root``'s children, their children, and so on (from every process's parent in /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        ppid = _ppid(int(entry.name))
        if ppid is not None:
            children.setdefault(ppid, []).append(int(entry.name))
    out: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def outside(root: int, cgroup: Cgroup | None) -> set[int]:
    """The members of the worker ``root`` outside its process group (a signal to the group
    reaches the others; a worker leads its own group)."""
    return {p for p in members(root, cgroup) if _pgid(p) not in (root, None)}


def stop(root: int, cgroup: Cgroup | None) -> set[int]:
    """SIGSTOP every member of the worker ``root`` outside its process group (the group is the
    caller's); returns those signalled, to continue later with :func:`resume`."""
    stopped: set[int] = set()
    for _ in range(LIST_ROUNDS):
        new = outside(root, cgroup) - stopped
        if not new:
            break
        for pid in new:
            try:
                os.kill(pid, signal.SIGSTOP)
                stopped.add(pid)
            except OSError:
                pass  # ended meanwhile
    wait_stopped(stopped)
    return stopped


def end(root: int, cgroup: Cgroup | None) -> None:
    """SIGKILL every member of the worker ``root`` outside its process group: a child that left
    the group outlives a kill of the group (until its cgroup is removed, where it has one)."""
    for pid in outside(root, cgroup):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def resume(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass


def wait_stopped(pids: set[int], limit_s: float = STOP_WAIT_S) -> None:
    """Until every one of ``pids`` has stopped (or ended), or ``limit_s`` has passed."""
    deadline = time.monotonic() + limit_s
    waiting = set(pids)
    while waiting and time.monotonic() < deadline:
        waiting = {p for p in waiting if state(p) not in ("T", "t", "Z", "X", "")}
        if waiting:
            time.sleep(0.001)


def state(pid: int) -> str:
    """``pid``'s state letter in /proc ("" if it has gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
