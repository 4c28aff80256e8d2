"""Landlock, called directly through its three system calls (I8).

Why not the PyPI package ``landlock``: it handles only the filesystem rights of the first ABIs.
kernelproof needs the TCP rules of ABI 4 (bind and connect handled, none allowed), the device
ioctl right of ABI 5 (``/dev/nvidia*``) and the scoping of ABI 6 (no signal to, and no abstract
unix socket of, a process outside the worker's domain), so this module is a small ctypes wrapper
over ``landlock_create_ruleset`` (444), ``landlock_add_rule`` (445) and
``landlock_restrict_self`` (446) as ``include/uapi/linux/landlock.h`` defines them.

Landlock restricts the calling thread and the threads and processes it starts afterwards, never
threads that already run: :func:`restrict` must be called before anything starts a thread (torch,
CUDA and CUPTI all do), so the worker's entry point calls it before torch is imported.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

SYS_CREATE_RULESET = 444  # x86_64 and aarch64 share these numbers (unified syscall table)
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1 << 0  # flag: return the highest ABI the kernel supports
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2
PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights, and the ABI that introduced each (landlock.h).
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
# Rights that make sense on a file (the kernel refuses a file rule that carries any other).
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

READ = READ_FILE | READ_DIR
READ_EXEC = READ | EXECUTE
WRITE = (
    WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_SYM
    | REFER
    | TRUNCATE
)
ACCESS = {  # the access names a plan uses
    "r": READ,
    "rx": READ_EXEC,
    "rw": READ | WRITE,  # never EXECUTE: nothing written here can be started (execve)
    "dev": READ | WRITE_FILE | TRUNCATE | IOCTL_DEV,  # device nodes: read, write, ioctl
}


class LandlockError(OSError):
    """A Landlock call failed; ``errno`` and the call are in the message."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in landlock.h: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _call(nr: int, *args: object) -> int:
    rc = _libc.syscall(ctypes.c_long(nr), *args)
    if rc < 0:
        err = ctypes.get_errno()
        raise LandlockError(err, f"landlock syscall {nr}: {os.strerror(err)}")
    return rc


def abi_version() -> int:
    """The Landlock ABI this kernel offers; 0 where it has none (or it is disabled at boot)."""
    try:
        return _call(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except LandlockError:
        return 0


@dataclass(frozen=True)
class Enforced:
    abi: int  # the kernel's Landlock ABI
    fs: bool  # filesystem rules enforced
    tcp: bool  # TCP bind and connect denied (ABI 4)
    scoped: bool  # signals and abstract unix sockets scoped to the domain (ABI 6)
    skipped: tuple[str, ...]  # rule paths that do not exist here (nothing to allow)


def restrict(rules: list[tuple[str, str]], deny_tcp: bool = True, scope: bool = True) -> Enforced:
    """Enforce `rules` ((path, access name) pairs) on this thread and everything it starts.

    Everything not allowed by a rule is denied: every filesystem right this ABI knows is handled,
    TCP bind and connect are handled with no port allowed, and signals and abstract unix sockets
    are scoped. Raises LandlockError where the kernel has no Landlock.
    """
    abi = abi_version()
    if abi < 1:
        raise LandlockError(
            0, "this kernel offers no Landlock (CONFIG_SECURITY_LANDLOCK off, or not in lsm=)"
        )
    handled_fs = FS_BY_ABI.get(abi, FS_BY_ABI[5])
    attr = _RulesetAttr(handled_fs, 0, 0)
    if deny_tcp and abi >= 4:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
    if scope and abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    ruleset = _call(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    skipped = []
    try:
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                skipped.append(path)
                continue
            try:
                allowed = ACCESS[access] & handled_fs
                if not os.path.isdir(f"/proc/self/fd/{fd}"):
                    allowed &= FILE_RIGHTS
                beneath = _PathBeneathAttr(allowed, fd)
                _call(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(beneath), 0)
            except LandlockError as exc:
                raise LandlockError(exc.errno, f"landlock rule {access} on {path}: {exc.strerror}") from None
            finally:
                os.close(fd)
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"prctl(NO_NEW_PRIVS): {os.strerror(err)}")
        _call(SYS_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    return Enforced(abi, True, attr.handled_access_net != 0, attr.scoped != 0, tuple(skipped))
