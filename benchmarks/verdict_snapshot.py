"""What kernelproof decides on its own material, as data: for comparing two versions of its code.

Evaluates, with fixed seeds on the CPU, every built-in example against its suite task, every CPU
row of the exploit zoo (tests/exploits/zoo.py) and every CPU row of the legit zoo
(tests/legit/test_legit.py), each with the options its test uses, and writes one line per pair:
the outcome, the reason codes, each case's id and pass or fail, the cases planned on probed
shapes beyond the contract, and the ``shape_specialized`` flags (a probed shape that failed).
Timings are not recorded.

    python benchmarks/verdict_snapshot.py --out before.json
    python benchmarks/verdict_snapshot.py --compare before.json after.json

``--shape-variants task|probe|auto`` evaluates every pair under that setting instead of its
test's own (the default, ``probe`` where the test names none): two snapshots of one version of
the code, one with ``task`` and one without, show what probing the perturbed shapes changes.

A refactoring that must not change behaviour is checked by comparing two snapshots; a defence in
the timing rounds can flip between runs on a busy machine, so take the "before" side twice and
read a difference that also appears between the two "before" runs as noise, not as a change.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def pairs() -> list[tuple[str, str, str, dict]]:
    """(label, task, solution, EvalOptions fields) for every pair, in a fixed order."""
    sys.path[:0] = [str(REPO / "tests" / "exploits"), str(REPO / "tests" / "legit")]
    import test_legit
    from zoo import ZOO

    out = []
    for sol in sorted((REPO / "examples").glob("**/*.py")):
        rel = sol.relative_to(REPO / "examples")
        task = REPO / "suite" / rel
        if task.is_file():
            fields = dict(device="cpu", seed=test_legit.SEED, correctness_only=True, seeds_per_case=1)
            out.append((f"example {rel}", str(task), str(sol), fields))
    for e in ZOO:
        if e.device != "cpu":
            continue
        fields = dict(
            device="cpu",
            seed=20260514,
            correctness_only=not e.timing,
            seeds_per_case=1,
            time_budget_s=1.0,
            min_rounds=2,
            max_rounds=4,
            timeout_s=180.0,
        )
        out.append((f"exploit {e.id}", str(e.task_path), str(e.solution_path), fields))
    for c in test_legit.CASES:
        if c.device != "cpu":
            continue
        fields = dict(
            device="cpu",
            seed=test_legit.SEED,
            correctness_only=not c.timing,
            seeds_per_case=1,
            time_budget_s=2.0,
            min_rounds=2,
            max_rounds=6,
        )
        sol = test_legit.SOLUTIONS / f"{c.solution}.py"
        out.append((f"legit {c.id}", str(c.task), str(sol), fields))
    return out


def snapshot(out_path: str, shape_variants: str | None = None) -> None:
    from kernelproof.api import evaluate
    from kernelproof.options import EvalOptions

    rows = {}
    for label, task, sol, fields in pairs():
        if shape_variants is not None:
            fields = {**fields, "shape_variants": shape_variants}
        v = evaluate(os.path.relpath(task), os.path.relpath(sol), EvalOptions(db="", **fields))
        cases = [[c.case_id, c.passed, c.code] for c in (v.correctness.cases if v.correctness else ())]
        shape_flags = sorted(f for f in v.flags if f.startswith("shape_specialized"))
        judged = {c[0] for c in cases}
        rows[label] = {
            "outcome": v.verdict.value,
            "codes": sorted(v.codes),
            "cases": cases,
            "shape_flags": shape_flags,
            # planned beyond the contract: the probed shapes' cases (run once the contract passed)
            "probed": sorted(c for c in v.settings.get("cases", []) if c not in judged),
        }
        print(f"{label:60s} {v.verdict.value:5s} {','.join(sorted(v.codes))}", flush=True)
    Path(out_path).write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")


def compare(a_path: str, b_path: str) -> int:
    """Print every pair that differs, then how many differ in each field (outcome, codes, ...)."""
    a, b = json.loads(Path(a_path).read_text()), json.loads(Path(b_path).read_text())
    differ = 0
    by_field: dict[str, int] = {}
    for label in sorted(set(a) | set(b)):
        if a.get(label) != b.get(label):
            differ += 1
            print(f"{label}\n  {a_path}: {a.get(label)}\n  {b_path}: {b.get(label)}")
            x, y = a.get(label) or {}, b.get(label) or {}
            for key in sorted(set(x) | set(y)):
                if x.get(key) != y.get(key):
                    by_field[key] = by_field.get(key, 0) + 1
    fields = ", ".join(f"{k} {n}" for k, n in sorted(by_field.items()))
    print(f"{len(set(a) | set(b))} pairs, {differ} differ" + (f" ({fields})" if fields else ""))
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="write a snapshot here")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two snapshots")
    ap.add_argument(
        "--shape-variants",
        choices=("task", "probe", "auto"),
        help="evaluate every pair with this EvalOptions.shape_variants (default: each test's own)",
    )
    ns = ap.parse_args()
    if ns.compare:
        return compare(*ns.compare)
    if not ns.out:
        ap.error("--out or --compare")
    snapshot(ns.out, ns.shape_variants)
    return 0


if __name__ == "__main__":
    sys.exit(main())
