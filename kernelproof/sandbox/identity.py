"""An unprivileged uid of its own for each contained process, and the switch to it (I8).

Landlock cannot stop a process from signalling, tracing or reading ``/proc/<pid>`` of a process
of the same uid that it can see, and ``RLIMIT_NPROC`` counts processes per uid (root is exempt).
So when kernelproof runs as root (the GPU machines do), every live worker and builder runs as a
uid of its own, claimed by creating ``<sandbox root>/uids/<uid>`` exclusively: two parents on one
machine never hand out the same uid at once. The parent and the baseline workers keep theirs.

Without root there is no other uid to switch to: the contained process gets a user namespace
(for its private mounts) and the parent should be non-dumpable (:func:`make_parent_nondumpable`),
which the CLI does and a caller of ``api.evaluate`` may ask for; a library never does it silently.
"""

from __future__ import annotations

import ctypes
import os
import random
from pathlib import Path

UID_BASE = 1_879_048_192  # 0x70000000: far above login users and subuid ranges (which start at 100000)
UID_SPAN = 1 << 24  # uids handed out: a claim collides with a live one with probability ~1e-7
PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37

_libc = ctypes.CDLL(None, use_errno=True)


def claim(root: Path) -> int:
    """A uid no live contained process of this machine holds; release it with :func:`release`."""
    uids = root / "uids"
    uids.mkdir(mode=0o700, exist_ok=True)
    for _ in range(64):
        uid = UID_BASE + random.randrange(UID_SPAN)
        try:
            os.close(os.open(uids / str(uid), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            return uid
        except FileExistsError:
            continue
    raise OSError("no free uid for a contained process after 64 tries")


def release(root: Path, uid: int) -> None:
    try:
        os.unlink(root / "uids" / str(uid))
    except OSError:
        pass


def become(uid: int, gid: int) -> None:
    """Drop to `uid`/`gid` for good: supplementary groups first, then the gid, then the uid (the
    other order leaves root's groups, or cannot change the gid any more)."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != gid or os.getgroups():
        raise OSError(f"the switch to uid {uid} did not hold")
    name = f"kp{uid}"
    os.environ["USER"] = name  # the worker's bootstrap: nothing else runs yet
    os.environ["LOGNAME"] = name


def parent_dumpable() -> bool:
    return _libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 1


def make_parent_nondumpable() -> None:
    """Make this process's memory, environment and descriptors unreadable through /proc to other
    processes of its uid (the workers, where they cannot get a uid of their own). Also disables
    its core dumps, which is why only the CLI, or a caller who asks, does it."""
    if _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def become_subreaper() -> None:
    """Make this process the reaper of its descendants' orphans: a child that double-forks and
    exits leaves its grandchild with this process, not with init, so it stays a descendant, found
    and stopped with the worker where there is no cgroup (kernelproof.host.members). The
    seccomp filter denies prctl(PR_SET_CHILD_SUBREAPER) afterwards: the candidate cannot clear it."""
    if _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER, 1) failed")


def is_subreaper() -> bool:
    flag = ctypes.c_int(0)
    if _libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
        return False
    return flag.value == 1
