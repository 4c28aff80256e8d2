"""The worker's and the builder's system-call filter (I8), through pyseccomp over libseccomp.

A deny list, not an allow list: torch, CUDA, Triton and the compilers Triton starts (ptxas, the C
compiler, ldconfig) inherit the filter and must keep working, and the calls they need change with
every driver. What is denied is what reaches another process or widens the sandbox:

- reading or writing another process: ptrace, process_vm_readv/writev, pidfd_open/getfd/send_signal,
  kcmp (Landlock's signal scope and a uid of its own cover kill(2): seccomp cannot tell pids apart);
- leaving the sandbox: mount and its new API, umount2, pivot_root, chroot, unshare, setns, and
  clone with any namespace flag; clone3 answers ENOSYS (its flags sit in memory seccomp cannot
  read), so glibc falls back to clone, whose flags it can;
- kernel surfaces with a history of escapes: the io_uring calls, userfaultfd, bpf,
  perf_event_open, keyctl/add_key/request_key, open_by_handle_at, module and kexec loading;
- widening the cores the parent pinned the worker to: sched_setaffinity (kernelproof.host.cpus);
- clearing the child-subreaper mark the bootstrap set (prctl(PR_SET_CHILD_SUBREAPER)): orphans of
  the worker's children stay its descendants, stopped and ended with it (kernelproof.host.members);
- new sockets other than AF_UNIX (the channel to the parent is inherited; TCP is also denied by
  Landlock, and this covers UDP, raw and netlink sockets, which Landlock does not).

Denied calls fail with EPERM (ENOSYS for clone3), so a library sees an ordinary error, never a kill.
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass

DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_open",
    "pidfd_getfd",
    "pidfd_send_signal",
    "kcmp",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "userfaultfd",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "open_by_handle_at",
    "name_to_handle_at",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "sched_setaffinity",  # the cores the parent gave (kernelproof.host.cpus) cannot be widened
)
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
CLONE_NAMESPACE_FLAGS = (  # linux/sched.h
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)


@dataclass(frozen=True)
class Loaded:
    denied: tuple[str, ...]  # calls denied outright
    unknown: tuple[str, ...]  # calls this architecture or libseccomp does not know (nothing to deny)


def install(allow_sockets: bool = False) -> Loaded:
    """Load the filter on this process (and everything it starts). Raises ImportError without
    pyseccomp or libseccomp.so.2, OSError when the kernel refuses the filter."""
    import pyseccomp as sc

    f = sc.SyscallFilter(defaction=sc.ALLOW)
    denied, unknown = [], []
    for name in DENIED:
        try:
            f.add_rule(sc.ERRNO(errno.EPERM), name)
            denied.append(name)
        except (ValueError, OSError, RuntimeError):
            unknown.append(name)
    for flag in CLONE_NAMESPACE_FLAGS:
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    try:
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    except (ValueError, OSError, RuntimeError):
        unknown.append("clone3")
    f.add_rule(sc.ERRNO(errno.EPERM), "prctl", sc.Arg(0, sc.EQ, PR_SET_CHILD_SUBREAPER))
    if not allow_sockets:
        for call in ("socket", "socketpair"):
            f.add_rule(sc.ERRNO(errno.EPERM), call, sc.Arg(0, sc.NE, socket.AF_UNIX))
    f.load()
    return Loaded(tuple(denied), tuple(unknown))
