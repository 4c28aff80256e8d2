"""Cost of an evaluation: wall time of a default `evaluate` of a level1 task (Triton: no build).

The first evaluation pays for cold workers and cold baselines; the next ones find a started
candidate worker and a started baseline worker waiting. Each row also gives the verdict's own
phase times, so the cost is read by part. Target (issue): <= 20 s with warm workers.

    python benchmarks/cost.py                 # on the GPU machine
    python benchmarks/cost.py --device cpu    # the same protocol on the CPU (interpreted Triton)
    python benchmarks/cost.py --profile       # and, for the last (warm) run, where the time went
    python benchmarks/cost.py --profile --profile-run first --before level1/09_gelu.py \
        --task level1/08_rms_norm.py          # a new task's first evaluation, workers already warm
    python benchmarks/cost.py --profile --task-file T.py --solution-file S.py   # any task and solution
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import time
from pathlib import Path

from _common import ROOT, phase_parts, table, write_json
from _profile import Profile

from kernelproof.api import evaluate
from kernelproof.options import EvalOptions

LABELS = ("first (cold workers)", "second (warm workers)", "third (warm workers)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--task", default="level1/09_gelu.py", help="a suite task with an example solution")
    ap.add_argument(
        "--task-file",
        help="any task file instead (with --solution-file): a KernelBench task at a size of your own",
    )
    ap.add_argument("--solution-file", help="the solution evaluated against --task-file")
    ap.add_argument("--profile", action="store_true", help="break one run down by part")
    ap.add_argument(
        "--profile-run", choices=("first", "last"), default="last", help="which run --profile breaks down"
    )
    ap.add_argument(
        "--before",
        help="a suite task evaluated first, not reported: the first run is then a new task's "
        "(its baselines cold) with the pool's workers warm, as in a batch over many tasks",
    )
    args = ap.parse_args()
    if bool(args.task_file) != bool(args.solution_file):
        ap.error("--task-file and --solution-file go together")
    task = Path(args.task_file) if args.task_file else ROOT / "suite" / args.task
    sol = Path(args.solution_file) if args.solution_file else ROOT / "examples" / args.task
    options = EvalOptions(device=args.device, db="")  # the defaults, as `kernelproof eval` uses them
    labels = LABELS
    if args.before:
        t0 = time.perf_counter()
        v = evaluate(ROOT / "suite" / args.before, ROOT / "examples" / args.before, options)
        print(f"before: {args.before} {v.verdict.value} in {time.perf_counter() - t0:.1f} s", flush=True)
        labels = ("first (new task, warm workers)", *LABELS[1:])
    profiled = labels[0] if args.profile_run == "first" else labels[-1]
    rows, docs = [], []
    prof = None
    for label in labels:
        prof = Profile() if args.profile and label == profiled else None
        cprof = cProfile.Profile() if prof is not None else None
        t0 = time.perf_counter()
        with prof or contextlib.nullcontext(), cprof or contextlib.nullcontext():
            v = evaluate(task, sol, options)
        wall = time.perf_counter() - t0
        phases = dict(v.environment.get("phases", {}))
        cases = v.correctness.cases_run if v.correctness else 0  # none where it stopped before its cases
        rows.append([label, f"{wall:.1f}", v.verdict.value, str(cases), phase_parts(v)])
        docs.append({"run": label, "wall_s": wall, "verdict": v.verdict.value, "phases": phases})
        for reason in v.reasons:
            print(f"   {reason.code.value}: {reason.message[:300]}", flush=True)
        print("row:", "  ".join(rows[-1]), flush=True)
        if prof is not None:
            report_profile(label, prof, cprof, v, docs[-1])
    print(table(rows, ["evaluation", "wall s", "verdict", "cases", "by phase (s)"]))
    write_json("cost.json", docs)


def report_profile(label: str, prof: Profile, cprof: cProfile.Profile, v, doc: dict) -> None:
    print(f"\n{label}, by part (inclusive seconds; requests include the worker's work):")
    print(table(prof.rows(), ["part", "calls", "s", "MB on the wire"]))
    doc["profile"] = prof.as_dict()
    for shape in v.timing.shapes if v.timing else ():
        print(
            f"\ntiming harness per call, shape {shape.shape!r} ({shape.rounds} rounds; ms, median over batches):"
        )
        for program, parts in shape.overhead_ms.items():
            print(f"  {program:10s} " + ", ".join(f"{k} {x:.3f}" for k, x in parts.items()))
    print("\nthe parent's own time (cProfile, the evaluating thread; top 15 by own time):")
    pstats.Stats(cprof).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
