"""A contained process's private mounts: its own /tmp, a /proc without other uids' processes, and
its rules reachable where another uid could not traverse (I8).

Applied in the child, as root (or in a fresh user namespace), before it drops to its own uid:

- /tmp, /var/tmp and /dev/shm become binds of its ``rw/tmp``: a solution that writes ``/tmp/x``
  writes into its own directory, and nothing one process leaves there is seen by another.
- /proc is a new procfs instance mounted with ``hidepid=invisible``: processes of other uids (the
  parent, the baseline workers, other candidates) do not exist in it, so ``/proc/<ppid>/mem``,
  ``environ``, ``cmdline`` and ``fd`` have nothing to open.
- A directory on the way to a rule that another uid cannot traverse (``/root`` holding a pyenv
  interpreter) is covered with an empty tmpfs and only the rule's paths are bound back into it.

Mounts made here are private to the process (``MS_PRIVATE``) and end with it.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if s is None else os.fsencode(s) for s in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], flags, enc[3]), f"mount {target}")


def enter_mount_namespace() -> None:
    """A mount namespace of our own, with no mount event propagating back to the host."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def enter_user_namespace() -> None:
    """Not root: a user namespace mapping our uid and gid to themselves, then a mount namespace."""
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(CLONE_NEWUSER|CLONE_NEWNS)")
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def cover(covers: Sequence[tuple[str, str | None]], keep: Sequence[str]) -> list[str]:
    """Mount over each ``(target, source)`` (a bind of `source`, or an empty tmpfs for None), then
    bind back every `keep` path the covers hid. Returns the paths bound back."""
    covered = [(t, s) for t, s in covers if os.path.isdir(t)]
    held: dict[str, int] = {}
    for k in sorted(set(keep), key=len):
        if any(_under(k, t) and k != t for t, _ in covered) and not any(_under(k, h) for h in held):
            try:
                held[k] = os.open(k, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
    sources = {s: os.open(s, os.O_PATH | os.O_CLOEXEC) for _, s in covered if s is not None}
    try:
        for target, source in covered:
            if source is None:
                mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
            else:
                mount(f"/proc/self/fd/{sources[source]}", target, None, MS_BIND | MS_REC)
        for k, fd in held.items():
            is_dir = os.path.isdir(f"/proc/self/fd/{fd}")
            os.makedirs(k if is_dir else os.path.dirname(k), exist_ok=True)
            if not is_dir and not os.path.exists(k):
                os.close(os.open(k, os.O_CREAT | os.O_WRONLY, 0o644))
            mount(f"/proc/self/fd/{fd}", k, None, MS_BIND | MS_REC)
    finally:
        for fd in [*held.values(), *sources.values()]:
            os.close(fd)
    return list(held)


def mount_proc_hidepid() -> None:
    """A new /proc in which processes of other uids are invisible."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible")


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")
