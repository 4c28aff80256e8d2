"""What a contained process can still do, tried from inside one (``python -m kernelproof.sandbox``).

Run as the child of :mod:`kernelproof.sandbox.__main__` under a candidate worker's plan: each
line is one attempt the layers should stop, and says whether it was stopped and by what error.
Nothing here trusts the report: it tries.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys

from kernelproof.sandbox.contain import enter


def attempts(parent: int, home: str) -> list[tuple[str, str]]:
    """(what was tried, "stopped: <error>" or "ALLOWED") for each attempt."""
    tries = {
        f"read /proc/{parent}/environ (the parent's)": lambda: open(f"/proc/{parent}/environ", "rb").read(1),
        f"list /proc/{parent}/fd": lambda: os.listdir(f"/proc/{parent}/fd"),
        f"signal the parent (pid {parent}, signal 0)": lambda: os.kill(parent, 0),
        f"write into {home}/.cache": lambda: open(os.path.join(home, ".cache", "kp-probe"), "w").close(),
        "write /etc/kp-probe": lambda: open("/etc/kp-probe", "w").close(),
        "open a TCP socket": lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(
            ("127.0.0.1", 9)
        ),
        "ptrace the parent": lambda: _ptrace(parent),
        "unshare a mount namespace": lambda: _unshare(),
    }
    out = []
    for what, fn in tries.items():
        try:
            fn()
            out.append((what, "ALLOWED"))
        except OSError as exc:
            out.append((what, f"stopped: {exc.strerror or exc}"))
    tmp_real = os.path.realpath("/tmp")
    try:
        path = "/tmp/kp-probe"
        with open(path, "w") as f:
            f.write("x")
        private = os.path.samefile("/tmp", os.environ.get("TMPDIR", "/nonexistent"))
        os.unlink(path)
        out.append(
            ("write /tmp/kp-probe", "lands in the private /tmp" if private else f"ALLOWED ({tmp_real})")
        )
    except OSError as exc:
        out.append(("write /tmp/kp-probe", f"stopped: {exc.strerror}"))
    return out


def _ptrace(pid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, pid, 0, 0) != 0:  # PTRACE_ATTACH
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH


def _unshare() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x00020000) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def main(argv: list[str]) -> int:
    rest = enter(argv)
    parent, home = int(rest[0]), rest[1]
    for what, result in attempts(parent, home):
        print(f"{what}: {result}")
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
