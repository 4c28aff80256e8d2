"""When and where a worker runs: stopped or going, and on which cores.

Split from :mod:`kernelproof.host.process`, which spawns a worker and talks to it; this is the
parent's hold on its CPU time. A worker is stopped (:meth:`Scheduling.pause`) half-way through
starting, frozen while a baseline is timed or the machine's load is read (:meth:`Scheduling.frozen`),
and lent to the device gate while its request waits for the GPU (:meth:`Scheduling.lend`,
host/gate.py); a stop reaches the processes it started that left its group
(:mod:`kernelproof.host.members`), so no child of the solution runs while the baselines are
timed. Time stopped is counted (:meth:`Scheduling.stopped_s`) and never charged to a request's
timeout. :meth:`Scheduling.pin` keeps the worker on its own cores (kernelproof.host.cpus).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from kernelproof.host import cpus, members, zygote
from kernelproof.sandbox import limits

# Tests only: False stops only the worker's process group, as kernelproof once did, to show what a
# child that left the group does meanwhile (never the CLI, never a stored verdict).
STOP_MEMBERS = True


class Scheduling:
    """The stop, freeze, lend and pin of one worker; :class:`~kernelproof.host.process.WorkerProcess`
    has them, with the process and cgroup it spawned."""

    proc: subprocess.Popen | zygote.Forked  # the worker (its process group's leader)
    cgroup: limits.Cgroup | None  # its cgroup, where the machine gives it one

    def _init_scheduling(self) -> None:
        """The state of a worker that runs, unpinned, with nothing stopped yet."""
        self.paused = False  # stopped by pause() until resume()
        self.cores: tuple[int, ...] = ()  # the cores pin() gave it
        self._cores_lease: tuple[int, tuple[int, ...]] | None = None  # a candidate's own set (cpus.py)
        self.pinned = ""  # how they hold: "affinity", "affinity+cpuset", or "" (not pinned)
        self._stopped_s = 0.0  # seconds spent stopped, over the worker's life
        self._paused_at = 0.0
        self._stopped_members: set[int] = set()  # processes outside its group that pause() stopped
        self._busy_since: float | None = None  # a request is waiting for its reply since then
        self._lending = threading.Condition()
        self.lent = False  # stopped by the device gate while another evaluation is timed (lend)

    def pause(self, members_too: bool = True) -> None:
        """Stop the worker's processes (SIGSTOP) where they are, e.g. half-way through starting:
        its process group, and (`members_too`) every process it started that left the group
        (:mod:`kernelproof.host.members`), which a frozen cgroup holds already."""
        if not self.paused and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGSTOP)
                self.paused = True
                self._paused_at = time.monotonic()
            except OSError:
                return
            if STOP_MEMBERS and members_too:
                self._stopped_members = members.stop(self.proc.pid, self.cgroup)

    def pin_candidate(self, threads: int) -> str:
        """Pin a candidate's worker to a set of cores no other live candidate worker holds, where
        there are enough (kernelproof/host/cpus.py); the same set at every later load."""
        if self._cores_lease is None:
            me = weakref.ref(self)

            def alive() -> bool:
                worker = me()
                return worker is not None and worker.proc.poll() is None

            self._cores_lease = cpus.take_candidate_cores(threads, alive)
        return self.pin(self._cores_lease[1])

    def give_back_cores(self) -> None:
        """The candidate's set is free for the next worker (this one has ended)."""
        lease, self._cores_lease = self._cores_lease, None
        if lease is not None:
            cpus.give_back_candidate_cores(lease[0])

    def pin(self, cores: tuple[int, ...]) -> str:
        """Pin every thread of the worker to `cores` (and its cgroup, where cpusets can be written):
        what it starts from now on inherits them, and its filter keeps a candidate from widening
        them. Returns what holds, as the verdict says it ("" when no cores were asked for)."""
        if not cores or not hasattr(os, "sched_setaffinity"):
            return ""
        done, pinned = [], 0
        try:
            for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
                try:
                    os.sched_setaffinity(int(tid), cores)
                    pinned += 1
                except (OSError, ValueError):
                    pass  # a thread that ended meanwhile, or one this process may not pin
        except OSError:
            pass
        if pinned:
            done.append("affinity")
        if self.cgroup is not None and self.cgroup.confine_cpus(cores):
            done.append("cpuset")
        self.cores = cores
        self.pinned = "+".join(done)
        return self.pinned

    @contextmanager
    def frozen(self) -> Iterator[str]:
        """The worker and everything it started stand still meanwhile (a baseline is timed, the
        machine's load is read). Yields how: "cgroup" (its cgroup frozen: every process in it,
        including those that left its process group), "process group" (stopped by signals: its
        process group, and every process of its cgroup or every descendant outside it), or ""
        (it could not be stopped)."""
        if self.lent or self.paused or self.proc.poll() is not None:
            yield "process group" if self.paused else ""
            return
        how = ""
        if self.cgroup is not None and self.cgroup.freeze(True):
            how = "cgroup"
        self.pause(members_too=not how)
        how = how or ("process group" if self.paused else "")
        if how != "cgroup":  # a frozen cgroup's processes never show `T`: its events file said frozen
            members.wait_stopped({self.proc.pid})
        try:
            yield how
        finally:
            self.resume()
            if how == "cgroup" and self.cgroup is not None:
                self.cgroup.freeze(False)

    def resume(self) -> None:
        """Let a paused worker go on, and the members its pause stopped."""
        if self.paused:
            self.paused = False
            self._stopped_s += time.monotonic() - self._paused_at
            try:
                os.killpg(self.proc.pid, signal.SIGCONT)
            except OSError:
                pass
            members.resume(self._stopped_members)
            self._stopped_members = set()

    def stopped_s(self) -> float:
        """Seconds this worker has spent stopped so far (a stop under way included)."""
        return self._stopped_s + (time.monotonic() - self._paused_at if self.paused else 0.0)

    def lend(self, min_wait_s: float) -> bool:
        """Stop the worker if a request of ours has waited at least `min_wait_s` for its reply, so
        that another evaluation can time the device meanwhile (host/gate.py). Until
        :meth:`give_back` its reply is held back from the caller, and the stopped time does not
        count towards the request's timeout. False if no request is waiting that long."""
        with self._lending:
            since = self._busy_since
            if self.lent or self.paused or since is None or time.monotonic() - since < min_wait_s:
                return False
            self.pause()
            self.lent = self.paused
            return self.lent

    def give_back(self) -> None:
        """End a lend: the worker goes on, and its reply reaches its caller."""
        with self._lending:
            if self.lent:
                self.lent = False
                self.resume()
                self._lending.notify_all()
