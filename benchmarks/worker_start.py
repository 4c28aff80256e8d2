"""What a worker's start costs: forked from the zygote, or an interpreter of its own.

Starts workers one after another on one device, each way (``KERNELPROOF_ZYGOTE`` on and off),
for a candidate (contained) and a baseline, and prints per way and role: the wall time from the
spawn to the worker's hello (torch imported, CUDA initialised on a GPU, the profiler's start-up
session done) and the CPU time the worker process had used by then (its /proc/<pid>/stat). The
first worker of each way is not counted: it starts the zygote, which a pool pays once.

    python benchmarks/worker_start.py --device cuda --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from _common import table

from kernelproof.host import zygote
from kernelproof.host.process import SpawnSpec, WorkerProcess

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User and system CPU seconds of process `pid` so far (its threads included)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def start_one(role: str, device: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    w = WorkerProcess(SpawnSpec(role, device))
    try:
        w.wait_ready()
        wall = time.perf_counter() - t0
        return wall, cpu_s(w.proc.pid)
    finally:
        w.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=5)
    ns = ap.parse_args()
    rows = []
    for way, switch in (("exec", "0"), ("zygote", "1")):
        os.environ[zygote.ENV_SWITCH] = switch
        for role in ("candidate", "baseline"):
            start_one(role, ns.device)  # the zygote's start, where there is one
            runs = [start_one(role, ns.device) for _ in range(ns.repeats)]
            walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
            rows.append(
                [
                    way,
                    role,
                    f"{statistics.median(walls):.2f} s",
                    f"{min(walls):.2f}-{max(walls):.2f} s",
                    f"{statistics.median(cpus):.2f} s",
                ]
            )
    print(f"worker start on {ns.device}, {ns.repeats} workers each, one at a time (median, range)")
    print(table(rows, ["way", "role", "spawn to hello", "range", "CPU by hello"]))
    print(f"zygotes: {zygote.status()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
