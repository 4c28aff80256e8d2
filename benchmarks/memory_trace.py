"""Where one evaluation's GPU memory goes, step by step: the parent's allocator and the whole device.

For each task (the identity solution, correctness only, each task in its own process) this runs the
whole evaluation and prints, at the end of every step of kernelproof/verify/steps.py, the parent's
allocated and reserved bytes (the caching allocator keeps freed blocks reserved: another process,
the candidate's worker, cannot use them) and the parent's peak so far; a sampler reads the device's
used memory and each process's through NVML every 50 ms, so the worker's share shows too. Then the
verdict. What it is for: a task at KernelBench's published sizes that ends ``too_large`` or a
worker's out-of-memory on a device that should hold it (issue on level 1's memory).

    python benchmarks/memory_trace.py .kernelbench/level1/5_Matrix_scalar_multiplication.py
    python benchmarks/memory_trace.py .kernelbench/level1 --largest 5 --json trace.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from _common import ROOT

IDENTITY = '\n\nclass ModelNew(Model):\n    """The identity solution: the task\'s own Model."""\n'
GB = 1e9


class DeviceSampler:
    """The device's used memory and each process's, through NVML, every `period_s` (max kept)."""

    def __init__(self, index: int = 0, period_s: float = 0.05) -> None:
        import pynvml

        pynvml.nvmlInit()
        self.nvml = pynvml
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.period_s = period_s
        self.max_used = 0
        self.max_by_pid: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def used(self) -> int:
        return int(self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.max_used = max(self.max_used, self.used())
                for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle):
                    mem = int(p.usedGpuMemory or 0)
                    self.max_by_pid[p.pid] = max(self.max_by_pid.get(p.pid, 0), mem)
            except self.nvml.NVMLError:
                pass
            self._stop.wait(self.period_s)

    def __enter__(self) -> DeviceSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def trace(task: str, device: str) -> dict:
    """One task's evaluation in this process, with the parent's memory at each step's end."""
    import torch

    from kernelproof.api import evaluate
    from kernelproof.options import EvalOptions
    from kernelproof.verify import steps

    rows: list[dict] = []
    original = steps.step

    @contextmanager
    def step(name: str):
        clock = steps._clock.get()
        full = "/".join([*(clock._stack if clock else []), name])
        with original(name):
            yield
        rows.append(
            {
                "step": full,
                "allocated_gb": round(torch.cuda.memory_allocated(device) / GB, 2),
                "reserved_gb": round(torch.cuda.memory_reserved(device) / GB, 2),
                "peak_gb": round(torch.cuda.max_memory_allocated(device) / GB, 2),
            }
        )

    steps.step = step
    sol = Path("/tmp") / f"kp-identity-{Path(task).stem}.py"
    sol.write_text(Path(task).read_text() + IDENTITY)
    options = EvalOptions(device=device, db="", correctness_only=True, seeds_per_case=1)
    torch.cuda.init()
    with DeviceSampler(torch.device(device).index or 0) as sampler:
        idle = sampler.used()
        t0 = time.monotonic()
        v = evaluate(task, str(sol), options)
        seconds = time.monotonic() - t0
    me = os.getpid()
    return {
        "task": task,
        "verdict": v.verdict.value,
        "codes": list(v.codes),
        "message": v.reasons[0].message if v.reasons else "",
        "detail": v.reasons[0].detail if v.reasons else "",
        "seconds": round(seconds, 1),
        "footprint_gb": round(((v.environment.get("memory") or {}).get("footprint_bytes") or 0) / GB, 1),
        "device_idle_gb": round(idle / GB, 1),
        "device_max_used_gb": round(sampler.max_used / GB, 1),
        "parent_max_gb": round(sampler.max_by_pid.get(me, 0) / GB, 1),
        "others_max_gb": {str(p): round(b / GB, 1) for p, b in sampler.max_by_pid.items() if p != me},
        "steps": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="+", help="task files or folders of them")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--largest", type=int, default=0, help="only the N tasks with the largest estimate")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print("ROW " + json.dumps(trace(args.one, args.device)))
        return
    tasks = [
        str(f) for t in args.targets for f in (sorted(Path(t).glob("*.py")) if Path(t).is_dir() else [t])
    ]
    if args.largest:
        from setup_memory import estimate

        tasks = sorted(tasks, key=lambda t: estimate(t, "cpu"), reverse=True)[: args.largest]
    rows = []
    for task in tasks:
        out = subprocess.run(
            [sys.executable, __file__, "--device", args.device, "--one", task, "x"],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        found = [ln[4:] for ln in out.stdout.splitlines() if ln.startswith("ROW ")]
        row = (
            json.loads(found[-1])
            if found
            else {"task": task, "verdict": "failed", "stderr": out.stderr[-800:]}
        )
        rows.append(row)
        print(
            f"== {Path(task).name}: {row.get('verdict')} {row.get('codes', '')} in {row.get('seconds', '?')} s"
        )
        if "steps" not in row:
            print(row.get("stderr", ""))
            continue
        print(
            f"   footprint {row['footprint_gb']} GB; device idle {row['device_idle_gb']} GB, max used "
            f"{row['device_max_used_gb']} GB; parent max {row['parent_max_gb']} GB; others {row['others_max_gb']}"
        )
        if row["message"]:
            print(f"   {row['message']}")
            if row.get("detail"):
                print("   " + row["detail"][-1500:].replace("\n", "\n   "))
        for s in row["steps"]:
            print(
                f"   {s['step']:34} alloc {s['allocated_gb']:7.2f}  reserved {s['reserved_gb']:7.2f}  peak {s['peak_gb']:7.2f}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
