"""Resource limits for worker processes that hold as root and with CUDA (I8).

RLIMIT_AS breaks CUDA initialisation (the driver reserves large virtual ranges) and RLIMIT_NPROC
does not bind root, so memory and process counts are limited with cgroups: cgroup v2's
``memory.max``/``pids.max`` where the unified hierarchy has those controllers, else v1's
``memory.limit_in_bytes``/``pids.max``. Where neither can be written (an unprivileged container),
:func:`create` returns None and the verdict's environment says that no limits were applied; the
worker's wall-clock timeout still holds everywhere.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
FREEZE_WAIT_S = 0.5  # how long a freeze may take to settle


@dataclass
class Cgroup:
    paths: list[Path]  # one directory per hierarchy the process joins
    kind: str  # "v2" | "v1"

    def add(self, pid: int) -> None:
        for p in self.paths:
            (p / "cgroup.procs").write_text(str(pid))

    def oom_killed(self) -> bool:
        for p in self.paths:
            for name in ("memory.events", "memory.oom_control"):
                f = p / name
                try:
                    text = f.read_text()
                except OSError:
                    continue
                for line in text.splitlines():
                    key, _, val = line.partition(" ")
                    if key in ("oom_kill", "oom") and val.strip().isdigit() and int(val) > 0:
                        return True
        return False

    def confine_cpus(self, cores: tuple[int, ...]) -> bool:
        """Confine the cgroup to `cores` (cgroup v2 cpuset, or v1's where it was joined); False
        where no cpuset can be written here."""
        for p in self.paths:
            try:
                (p / "cpuset.cpus").write_text(",".join(map(str, cores)))
                return True
            except OSError:
                continue
        return False

    def freeze(self, on: bool) -> bool:
        """Freeze (or thaw) every process of the cgroup (v2's cgroup.freeze). True: frozen, as its
        ``cgroup.events`` says (or thawed); False where it cannot, and where the freeze did not
        settle within ``FREEZE_WAIT_S`` (it is thawed again: the caller stops the processes by
        signals instead). A frozen process is not in the stopped state ``T`` that a signal's stop
        shows: the events file is the only word that the freeze holds."""
        for p in self.paths:
            try:
                (p / "cgroup.freeze").write_text("1" if on else "0")
            except OSError:
                continue
            if not on:
                return True
            deadline = time.monotonic() + FREEZE_WAIT_S  # freezing completes asynchronously
            while time.monotonic() < deadline:
                try:
                    if "frozen 1" in (p / "cgroup.events").read_text():
                        return True
                except OSError:
                    break
                time.sleep(0.002)
            try:
                (p / "cgroup.freeze").write_text("0")
            except OSError:
                pass
            return False
        return False

    def remove(self) -> None:
        for p in self.paths:
            try:
                for pid in (p / "cgroup.procs").read_text().split():
                    try:
                        os.kill(int(pid), 9)
                    except OSError:
                        pass
                p.rmdir()
            except OSError:
                pass


def create(memory_bytes: int, max_pids: int) -> Cgroup | None:
    """A fresh cgroup with the limits, or None where cgroups cannot be written here."""
    name = f"kernelproof-{uuid.uuid4().hex[:12]}"
    try:
        controllers = (CGROUP_ROOT / "cgroup.controllers").read_text().split()
    except OSError:
        controllers = []
    if {"memory", "pids"} <= set(controllers):
        try:
            p = CGROUP_ROOT / name
            p.mkdir()
            (p / "memory.max").write_text(str(memory_bytes))
            (p / "pids.max").write_text(str(max_pids))
            return Cgroup([p], "v2")
        except OSError:
            pass
    made: list[Path] = []
    try:
        mem = CGROUP_ROOT / "memory" / name
        pids = CGROUP_ROOT / "pids" / name
        mem.mkdir()
        made.append(mem)
        (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
        pids.mkdir()
        made.append(pids)
        (pids / "pids.max").write_text(str(max_pids))
        return Cgroup(made, "v1")
    except OSError:
        for p in made:
            try:
                p.rmdir()
            except OSError:
                pass
        return None
