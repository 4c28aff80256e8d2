"""Cost of an evaluation: wall time of `evaluate` for a level1 task, first (baselines cold) and
then with warm baselines and a pre-spawned worker (build excluded: Triton examples). Target <= 20 s.
"""

from __future__ import annotations

import time

from _common import ROOT, table, write_json

from kernelproof.api import evaluate
from kernelproof.options import EvalOptions


def main() -> None:
    task = ROOT / "suite" / "level1" / "09_gelu.py"
    sol = ROOT / "examples" / "level1" / "09_gelu.py"
    rows, docs = [], []
    for label in ("first (cold baselines, cold worker)", "second (warm baselines)", "third (warm)"):
        t0 = time.perf_counter()
        v = evaluate(task, sol, EvalOptions(device="cuda", db="", time_budget_s=5))
        wall = time.perf_counter() - t0
        rows.append([label, f"{wall:.1f}", v.verdict.value, str(v.correctness.cases_run)])
        docs.append({"run": label, "wall_s": wall, "verdict": v.verdict.value})
    print(table(rows, ["evaluation", "wall s", "verdict", "cases"]))
    write_json("cost.json", docs)


if __name__ == "__main__":
    main()
