"""Where a KernelBench sweep's time goes, and what a speed-up saves, in one run.

Copies the KernelBench tasks asked for (default: level 1) into a scratch folder, with their
module-level size constants divided by ``--shrink`` (so the CPU can run them), pairs each with
the identity solution, and evaluates them as the sweep does (correctness only, one seed per
case, fresh store) under each setting of the comparisons' fast-path switch: ``before`` (every
slice through the NaN/Inf masks) and ``after`` (kernelproof/verify/fastpath.py). Both runs
are in this one process, so their ratio is measured on the same machine under the same load.
It writes the cost table of each run (benchmarks/_costs.py, rewritten after each verdict) and a
before/after summary. Each run starts with a fresh store and an empty audit cache; ``before`` runs
first, so the file cache is warmer for ``after`` (small next to the evaluations' own work).

    python benchmarks/sweep_costs.py --kernelbench .kernelbench --levels 1 --shrink 16 --limit 20
    # on the H200, at the published sizes (scripts/gpu-check sweep-costs):
    python benchmarks/sweep_costs.py --levels 1 --shrink 1 --device cuda --per-device 4 --only level1/3_
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from _common import ROOT, out_dir
from _costs import cost_table, markdown, row_steps

from kernelproof.report.scaled_tasks import scaled_source

IDENTITY = '\n\nclass ModelNew(Model):\n    """The identity solution: the task\'s own Model."""\n'


def scratch_pairs(kb: Path, levels: list[str], factor: int, limit: int, only: list[str], dest: Path):
    pairs = []
    for level in levels:
        tasks = sorted((kb / level).glob("*.py"), key=lambda p: (int(p.name.split("_", 1)[0]), p.name))
        tasks = [t for t in tasks if not only or any(o in f"{level}/{t.name}" for o in only)]
        for task in tasks[:limit] if limit else tasks:
            text = scaled_source(task.read_text(), factor)
            t = dest / "tasks" / level / task.name
            s = dest / "identity" / level / task.name
            t.parent.mkdir(parents=True, exist_ok=True)
            s.parent.mkdir(parents=True, exist_ok=True)
            t.write_text(text)
            s.write_text(text + IDENTITY)
            pairs.append((t, s))
    return pairs


def run(pairs, root: Path, ns, label: str, shared: bool) -> dict:
    from kernelproof.api import evaluate_many
    from kernelproof.options import EvalOptions
    from kernelproof.verify import audit, fastpath

    db = Path(tempfile.mkdtemp(prefix=f"sweep-costs-{label}-")) / "store.sqlite"  # a fresh store
    options = EvalOptions(
        device=ns.device,
        correctness_only=True,
        seeds_per_case=1,
        shape_variants="task",
        per_device=ns.per_device,
        db=str(db),
        timeout_s=ns.timeout,
    )
    rows, arrivals = [], {}
    fastpath.ENABLED = shared
    audit._CACHE.clear()  # each run audits afresh, as a fresh process would
    started = time.monotonic()
    try:
        for v in evaluate_many(pairs, options):
            name = str(Path(v.task.path).relative_to(root))
            rows.append(
                {
                    "task": name,
                    "outcome": v.verdict.value,
                    "codes": v.codes,
                    "seconds": round(v.elapsed_s, 2),
                    "stored": False,
                    "steps": row_steps(v.environment),
                }
            )
            arrivals[name] = round(time.monotonic() - started, 2)
            partial = cost_table(rows, time.monotonic() - started, arrivals)  # a run cut short keeps it
            (out_dir() / f"sweep-costs-{label}.md").write_text(
                markdown(partial, f"Sweep cost table: {label}")
            )
            print(
                f"{label:6s} {name:60s} {v.verdict.value:5s} {','.join(v.codes):18s} {v.elapsed_s:6.2f}s",
                flush=True,
            )
    finally:
        fastpath.ENABLED = True
    wall = time.monotonic() - started
    shutil.rmtree(db.parent, ignore_errors=True)
    return {"label": label, "rows": rows, "costs": cost_table(rows, wall, arrivals)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", type=Path, default=ROOT / ".kernelbench")
    ap.add_argument("--levels", default="1")
    ap.add_argument("--shrink", type=int, default=16, help="divide size constants by this (1: as published)")
    ap.add_argument("--limit", type=int, default=0, help="the first N tasks of each level (0: all)")
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--per-device", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--runs", default="before,after", help="which settings, in this order")
    ns = ap.parse_args()
    kb = (
        ns.kernelbench / "KernelBench"
        if (ns.kernelbench / "KernelBench" / "level1").is_dir()
        else ns.kernelbench
    )
    levels = [f"level{n.strip()}" for n in ns.levels.split(",") if n.strip()]
    scratch = Path(tempfile.mkdtemp(prefix="sweep-costs-"))
    pairs = scratch_pairs(kb, levels, ns.shrink, ns.limit, ns.only, scratch)
    out = out_dir()
    results = {}
    for label in [x.strip() for x in ns.runs.split(",") if x.strip()]:
        results[label] = run(pairs, scratch / "tasks", ns, label, shared=(label != "before"))
        costs = results[label]["costs"]
        (out / f"sweep-costs-{label}.md").write_text(markdown(costs, f"Sweep cost table: {label}"))
    summary = _summary(results)
    (out / "sweep-costs.json").write_text(
        json.dumps(
            {"settings": vars(ns) | {"kernelbench": str(kb)}, "runs": results, "summary": summary},
            indent=1,
            default=str,
        )
        + "\n"
    )
    (out / "sweep-costs.md").write_text(summary["markdown"])
    print("\n" + summary["markdown"])
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


def _summary(results: dict) -> dict:
    """Before and after side by side: wall time, evaluation time, each step's total, verdicts."""
    labels = list(results)
    lines = [
        "# Sweep costs, before and after",
        "",
        "| | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    costs = {k: r["costs"] for k, r in results.items()}
    lines.append("| wall s | " + " | ".join(str(c["wall_s"]) for c in costs.values()) + " |")
    lines.append(
        "| evaluation s (summed) | " + " | ".join(str(c["evaluation_s"]) for c in costs.values()) + " |"
    )
    outcomes = {
        k: sorted((r["task"], r["outcome"], tuple(r["codes"])) for r in res["rows"])
        for k, res in results.items()
    }
    same = len({json.dumps(o) for o in outcomes.values()}) <= 1
    lines.append(f"| same verdicts | {'yes' if same else 'NO'} |" + " |" * (len(labels) - 1))
    names = []
    for c in costs.values():
        names += [n for n in c["steps_total_s"] if n not in names and n.count("/") < 3]
    for n in names[:25]:
        lines.append(
            f"| {n} | " + " | ".join(str(c["steps_total_s"].get(n, 0.0)) for c in costs.values()) + " |"
        )
    ratio = None
    if len(labels) == 2 and costs[labels[1]]["evaluation_s"] > 0:
        ratio = round(costs[labels[0]]["evaluation_s"] / costs[labels[1]]["evaluation_s"], 2)
        lines += ["", f"{labels[0]} / {labels[1]} evaluation time: {ratio}x"]
    return {"same_verdicts": same, "ratio": ratio, "markdown": "\n".join(lines) + "\n"}


if __name__ == "__main__":
    raise SystemExit(main())
