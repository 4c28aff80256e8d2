"""Peak memory of one evaluation's setup (references, float64 oracle, audit, case plan) per task.

Setup runs in the trusted parent before any candidate code: at KernelBench's published sizes it is
where a 6.4 GB-per-tensor task took an H200 to too_large. This prints, for each task, the meta
device's estimate of one case (kernelproof/verify/footprint.py, nothing allocated), the peak GPU
memory the parent allocated during setup (torch.cuda.max_memory_allocated; on the CPU the process's
peak resident size less its peak before setup began), setup's wall time and its outcome. Each task runs in its own process, so one
task's peak is not another's. ``--largest N`` keeps the N tasks with the largest estimate.

    python benchmarks/setup_memory.py .kernelbench/level1 --largest 5 --device cuda
    python benchmarks/setup_memory.py suite/level1/09_gelu.py --device cpu

``--chunk-elements N`` sets the slices the comparisons and the run-to-run spread work in
(kernelproof/verify/slices.py): a stand-in of a large task, shrunk k times, keeps the
large task's ratio of temporaries to tensors when N is its default divided by k (on the CPU
machine, a 67 MB stand-in of level1/5_Matrix_scalar_multiplication with ``--chunk-elements 262144``).

Run it at two commits (a ``git worktree`` of each) for a before/after table. The audit's
cross-run cache is not used (no store), so every run audits. ``--root DIR`` imports kernelproof
from another tree (``git archive COMMIT kernelproof | tar -x -C DIR``), for the "before" column.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

from _common import ROOT

IDENTITY = '\n\nclass ModelNew(Model):\n    """The identity solution: the task\'s own Model."""\n'


def measure(task: str, device: str, chunk_elements: int = 0) -> dict:
    """Setup of one task, in this process: its peak memory, time and outcome."""
    import resource

    import torch

    import kernelproof
    from kernelproof.evaluate.setup import prepare, read
    from kernelproof.evaluate.step_records import Stopped
    from kernelproof.options import EvalOptions
    from kernelproof.task import load_task, variants_for

    class Gate:
        def shared(self):
            return nullcontext()

    class Workers:  # setup needs a gate, and a builder only for CUDA solutions (the identity has none)
        def gate(self, device):
            return Gate()

    if chunk_elements:
        try:
            from kernelproof.verify import slices

            slices.CHUNK_ELEMENTS = chunk_elements
        except ImportError:  # a tree from before the slices were shared (--root): the comparisons' own
            from kernelproof.verify import oracle_compare

            oracle_compare.CHUNK_ELEMENTS = chunk_elements
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t = load_task(task)
    try:  # a tree from before the estimate existed (--root) has none
        from kernelproof.verify import footprint

        need = footprint.case_need(t, variants_for(t, torch.device(device).type), device)
        case_bytes, available = need.case_bytes, need.available_bytes
    except ImportError:
        case_bytes = available = None
    sol = Path("/tmp") / f"kp-identity-{Path(task).stem}.py"
    sol.write_text(Path(task).read_text() + IDENTITY)
    options = EvalOptions(device=device, db="", correctness_only=True, seeds_per_case=1)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.monotonic()
    try:
        setup = prepare(task, read(str(sol)), options, 1, device, Workers())  # type: ignore[arg-type]
        outcome = setup.reason.code.value if isinstance(setup, Stopped) else "ready"
    except torch.OutOfMemoryError as exc:
        outcome = f"out of memory: {str(exc).splitlines()[0][:80]}"
    seconds = time.monotonic() - t0
    peak = (
        torch.cuda.max_memory_allocated(device)
        if device.startswith("cuda")
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    )
    return {
        "task": task,
        "kernelproof": str(Path(kernelproof.__file__).parent),
        "estimate_case_bytes": case_bytes,
        "available_bytes": available,
        "peak_bytes": peak,
        "before_bytes": 0 if device.startswith("cuda") else before,  # the CPU's peak before setup
        "setup_s": round(seconds, 1),
        "outcome": outcome,
    }


def estimate(task: str, device: str) -> int:
    import torch

    from kernelproof.task import load_task, variants_for
    from kernelproof.verify import footprint

    t = load_task(task)
    return footprint.case_need(t, variants_for(t, torch.device(device).type), device).case_bytes or 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="+", help="task files or folders of them")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--largest", type=int, default=0, help="only the N tasks with the largest estimate")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--root", help="import kernelproof from this tree (another commit's, for a before/after)")
    ap.add_argument("--chunk-elements", type=int, default=0, help="the comparisons' slice size (see above)")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # the child: measure this task, print its row
    args = ap.parse_args()
    if args.root:
        sys.path.insert(0, str(Path(args.root).resolve()))
    if args.one:
        print(json.dumps(measure(args.one, args.device, args.chunk_elements)))
        return
    tasks = [
        str(f) for t in args.targets for f in (sorted(Path(t).glob("*.py")) if Path(t).is_dir() else [t])
    ]
    if args.largest:
        tasks = sorted(tasks, key=lambda t: estimate(t, args.device), reverse=True)[: args.largest]
    rows = []
    print(f"{'task':48} {'estimate GB':>11} {'peak GB':>8} {'setup s':>8}  outcome")
    for task in tasks:
        cmd = [sys.executable, __file__, "--device", args.device, "--one", task, "x"]
        cmd += ["--chunk-elements", str(args.chunk_elements)] if args.chunk_elements else []
        cmd += ["--root", args.root] if args.root else []
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        try:
            row = json.loads(out.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            row = {"task": task, "outcome": f"failed: {out.stderr.strip().splitlines()[-1:]}"}
        rows.append(row)
        est = row.get("estimate_case_bytes") or 0
        peak = (row.get("peak_bytes") or 0) - (row.get("before_bytes") or 0)
        print(
            f"{Path(task).name[:48]:48} {est / 1e9:11.1f} {peak / 1e9:8.1f} {row.get('setup_s', 0):8}  {row['outcome']}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
