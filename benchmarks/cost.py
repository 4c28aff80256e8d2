"""Cost of an evaluation: wall time of a default `evaluate` of a level1 task (Triton: no build).

The first evaluation pays for cold workers and cold baselines; the next ones find a started
candidate worker and a started baseline worker waiting. Each row also gives the verdict's own
phase times, so the cost is read by part. Target (issue): <= 20 s with warm workers.

    python benchmarks/cost.py                 # on the GPU machine
    python benchmarks/cost.py --device cpu    # the same protocol on the CPU (interpreted Triton)
    python benchmarks/cost.py --profile       # and, for the last (warm) run, where the time went
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import time

from _common import ROOT, phase_parts, table, write_json
from _profile import Profile

from kernelproof.api import evaluate
from kernelproof.options import EvalOptions

LABELS = ("first (cold workers)", "second (warm workers)", "third (warm workers)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--task", default="level1/09_gelu.py", help="a suite task with an example solution")
    ap.add_argument("--profile", action="store_true", help="break the last run down by part")
    args = ap.parse_args()
    task = ROOT / "suite" / args.task
    sol = ROOT / "examples" / args.task
    options = EvalOptions(device=args.device, db="")  # the defaults, as `kernelproof eval` uses them
    rows, docs = [], []
    prof = None
    for label in LABELS:
        if args.profile and label == LABELS[-1]:
            prof = Profile()
        cprof = cProfile.Profile() if prof is not None else None
        t0 = time.perf_counter()
        with prof or contextlib.nullcontext(), cprof or contextlib.nullcontext():
            v = evaluate(task, sol, options)
        wall = time.perf_counter() - t0
        phases = dict(v.environment.get("phases", {}))
        rows.append([label, f"{wall:.1f}", v.verdict.value, str(v.correctness.cases_run), phase_parts(v)])
        docs.append({"run": label, "wall_s": wall, "verdict": v.verdict.value, "phases": phases})
        print("row:", "  ".join(rows[-1]), flush=True)
    print(table(rows, ["evaluation", "wall s", "verdict", "cases", "by phase (s)"]))
    if prof is not None:
        print(f"\n{LABELS[-1]}, by part (inclusive seconds; requests include the worker's work):")
        print(table(prof.rows(), ["part", "calls", "s", "MB on the wire"]))
        docs[-1]["profile"] = prof.as_dict()
        for shape in v.timing.shapes if v.timing else ():
            print(
                f"\ntiming harness per call, shape {shape.shape!r} ({shape.rounds} rounds; ms, median over batches):"
            )
            for program, parts in shape.overhead_ms.items():
                print(f"  {program:10s} " + ", ".join(f"{k} {x:.3f}" for k, x in parts.items()))
        print("\nthe parent's own time (cProfile, the evaluating thread; top 15 by own time):")
        pstats.Stats(cprof).sort_stats("tottime").print_stats(15)
    write_json("cost.json", docs)


if __name__ == "__main__":
    main()
