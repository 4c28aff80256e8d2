"""Running one contained, killable command to its end: the builder's child (I8).

The same containment as a candidate worker (its own uid as root, Landlock, seccomp, process
limit), planned by the caller, applied by the child's entry point (kernelproof.sandbox.contain)
and reported back on a pipe. The command runs in its own session, so a timeout or its end kills
everything it started: compilers, daemons and grandchildren. A command that is one of a zygote's
entries (``python -m MODULE ARGS``) is forked from the zygote, as a worker is
(kernelproof.host.zygote): the same arguments, environment, descriptors and session, without
an interpreter's start and torch's import.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelproof.host import zygote
from kernelproof.sandbox import contain
from kernelproof.sandbox.plan import Layer, Plan

# Interpreter flags a zygote's children have as well: the zygote itself runs with -P.
SAFE_FLAGS = ("-P",)
GROUP_END_WAIT_S = 5.0  # how long a killed group may take to finish exiting


@dataclass(frozen=True)
class Finished:
    returncode: int  # the command's exit status (negative: killed by that signal)
    timed_out: bool  # killed at the timeout
    layers: tuple[Layer, ...]  # what its containment held, as its entry point reported


def run(
    cmd: Sequence[str],
    plan: Plan,
    plan_path: Path,
    env: dict[str, str],
    log_path: Path,
    timeout_s: float,
    cwd: Path | None = None,
    entry: str | None = None,
) -> Finished:
    """Run `cmd` (a Python entry point that calls contain.enter) under `plan`, output to `log_path`.

    `entry` names the zygote entry `cmd` is (``python -P -m MODULE ARGS`` with this interpreter):
    then it is forked from a zygote where one can serve, and started as `cmd` where none can.
    """
    plan_path.write_text(plan.to_json())
    report_r, report_w = os.pipe()
    flags = [contain.PLAN_FLAG, str(plan_path), contain.REPORT_FLAG]
    try:
        with open(log_path, "wb") as log:
            proc: subprocess.Popen | zygote.Forked | None = None
            args = _entry_args(cmd, entry)
            if args is not None:
                proc = zygote.spawn(
                    [*args, *flags, str(zygote.REPORT_FD)],
                    env,
                    cwd if cwd is not None else Path.cwd(),
                    (report_w, log.fileno()),
                    entry=entry,
                )
            if proc is None:
                proc = subprocess.Popen(
                    [*cmd, *flags, str(report_w)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=str(cwd) if cwd is not None else None,
                    pass_fds=(report_w,),
                    start_new_session=True,
                )
            os.close(report_w)
            report_w = -1
            timed_out = False
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                kill_group(proc.pid)
                proc.wait()
        report = _read_all(report_r)
    finally:
        if report_w >= 0:
            os.close(report_w)
        os.close(report_r)
    return Finished(proc.returncode, timed_out, tuple(contain.parse_report(report)))


def _entry_args(cmd: Sequence[str], entry: str | None) -> list[str] | None:
    """`cmd`'s arguments after ``-m MODULE`` where it is this interpreter running `entry`'s module."""
    if entry is None or not cmd or cmd[0] != sys.executable:
        return None
    cmd = list(cmd)
    module, _ = zygote.ENTRIES[entry]
    try:
        at = cmd.index("-m")
    except ValueError:
        return None
    if cmd[at + 1 : at + 2] != [module] or any(flag not in SAFE_FLAGS for flag in cmd[1:at]):
        return None
    return cmd[at + 2 :]


def kill_group(pgid: int, wait_s: float = GROUP_END_WAIT_S) -> None:
    """SIGKILL a whole process group (one already gone is fine), then wait up to ``wait_s`` until
    no member is still running: a killed process can spend a moment exiting (state D, freeing
    its memory), and "the build left nothing running" is claimed only once that is over."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + wait_s
    while _running_in_group(pgid) and time.monotonic() < deadline:
        time.sleep(0.005)


def _running_in_group(pgid: int) -> bool:
    """Whether a process of group ``pgid`` has neither ended nor become a zombie."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def _read_all(fd: int) -> str:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", errors="replace")
