"""Running one contained, killable command to its end: the builder's child (I8).

The same containment as a candidate worker (its own uid as root, Landlock, seccomp, process
limit), planned by the caller, applied by the child's entry point (kernelproof.sandbox.contain)
and reported back on a pipe. The command runs in its own session, so a timeout or its end kills
everything it started: compilers, daemons and grandchildren.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelproof.sandbox import contain
from kernelproof.sandbox.plan import Layer, Plan


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
) -> Finished:
    """Run `cmd` (a Python entry point that calls contain.enter) under `plan`, output to `log_path`."""
    plan_path.write_text(plan.to_json())
    report_r, report_w = os.pipe()
    full = [*cmd, contain.PLAN_FLAG, str(plan_path), contain.REPORT_FLAG, str(report_w)]
    try:
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                full,
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


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group; one already gone is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


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
