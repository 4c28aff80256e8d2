"""The cost table of a sweep: where each evaluation's time went, step by step.

Each verdict carries its steps (``environment["steps"]``, kernelproof/verify/steps.py): a
slash-separated name, its total seconds and how many times it ran. The table shows the slowest
dozen tasks and the median one with seconds per step, the steps that cost most over the whole
sweep, and the wall time per level and in total. Served verdicts (from the store) cost nothing
now and carry an earlier run's steps: they are listed apart and left out of the ranking.
"""

from __future__ import annotations

import statistics
from typing import Any

SLOWEST = 12  # tasks shown by name, slowest first
COLUMNS = 12  # step columns in the Markdown table: those that cost most over the shown tasks
DEPTH = 3  # the Markdown's step columns go this many names deep (the JSON holds every step)


def row_steps(environment) -> dict[str, dict[str, float]]:
    """A verdict's steps as {name: {"s": seconds, "n": count}} (empty for an older verdict)."""
    from kernelproof.verify.steps import costs_of

    return {c.name: {"s": c.seconds, "n": c.count} for c in costs_of(environment)}


def cost_table(rows: list[dict[str, Any]], wall_s: float, arrivals: dict[str, float]) -> dict[str, Any]:
    """The cost table of a sweep's rows (each with "task", "seconds", "stored", "steps").

    `arrivals`: each task's verdict time in seconds since the sweep began. A level's `in_flight_s`
    is the time during which at least one of its evaluations in this run was under way (from its
    verdict less its seconds to its verdict, waits for memory included). The sweep's order mixes
    the levels (large tasks spread among the others), so these overlap: they add up to more than
    the sweep's wall time, and no level's share of it can be read off its verdicts' times."""
    fresh = [r for r in rows if not r.get("stored")]
    ranked = sorted(fresh, key=lambda r: -r["seconds"])
    median = None
    if ranked:
        by_time = sorted(fresh, key=lambda r: r["seconds"])
        median = by_time[(len(by_time) - 1) // 2]
    shown = ranked[:SLOWEST]
    if median is not None and median not in shown:
        shown = shown + [median]
    totals: dict[str, float] = {}
    for r in fresh:
        for name, c in r.get("steps", {}).items():
            totals[name] = totals.get(name, 0.0) + c["s"]
    evaluated_s = sum(r["seconds"] for r in fresh)
    # what no step explains: each evaluation's seconds beyond its outermost steps' (0 where the
    # steps cover it); a large share means a wait or a stretch the evaluation does not record yet
    in_no_step = sum(
        max(0.0, r["seconds"] - sum(c["s"] for n, c in r.get("steps", {}).items() if "/" not in n))
        for r in fresh
    )
    levels: dict[str, dict[str, Any]] = {}
    for level in sorted({_level(r["task"]) for r in rows}):
        mine = [r for r in rows if _level(r["task"]) == level]
        ran = [r for r in mine if not r.get("stored") and r["task"] in arrivals]
        secs = [r["seconds"] for r in mine if not r.get("stored")]
        levels[level] = {
            "tasks": len(mine),
            "served": sum(1 for r in mine if r.get("stored")),
            "in_flight_s": round(
                _union([(arrivals[r["task"]] - r["seconds"], arrivals[r["task"]]) for r in ran]), 1
            ),
            "evaluation_s": round(sum(secs), 1),
            "median_s": round(statistics.median(secs), 1) if secs else 0.0,
        }
    return {
        "wall_s": round(wall_s, 1),
        "tasks": len(rows),
        "evaluated": len(fresh),
        "evaluation_s": round(evaluated_s, 1),
        "levels": levels,
        "slowest": [_shown(r) for r in ranked[:SLOWEST]],
        "median": _shown(median) if median is not None else None,
        "steps_total_s": {k: round(v, 2) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])},
        "in_no_step_s": round(in_no_step, 2),
    }


def _union(spans: list[tuple[float, float]]) -> float:
    """The length of the union of [start, end] spans."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _shown(r: dict[str, Any]) -> dict[str, Any]:
    return {"task": r["task"], "seconds": r["seconds"], "outcome": r.get("outcome", ""), "steps": r["steps"]}


def _level(task: str) -> str:
    return task.split("/", 1)[0] if "/" in task else ""


def markdown(doc: dict[str, Any], title: str = "Sweep cost table") -> str:
    """The table as Markdown: per level, the steps that cost most, then the slowest tasks by step."""
    out = [
        f"# {title}",
        "",
        f"Wall time {doc['wall_s']} s for {doc['tasks']} tasks ({doc['evaluated']} evaluated, "
        f"{doc['evaluation_s']} s of evaluation time summed)"
        + (f", after {doc['order_s']} s listing and ordering the tasks." if doc.get("order_s") else "."),
        "",
    ]
    out += [
        "| level | tasks | served | s with one of its evaluations under way | evaluation s | median s |",
        "|---|---|---|---|---|---|",
    ]
    for level, lv in doc["levels"].items():
        out.append(
            f"| {level} | {lv['tasks']} | {lv['served']} | {lv['in_flight_s']} | {lv['evaluation_s']} | "
            f"{lv['median_s']} |"
        )
    out += [
        "",
        "The order mixes the levels, so their seconds under way overlap and add up to more than the "
        "wall time.",
    ]
    out += ["", "## Steps over all evaluated tasks (nested steps are part of their parent's)", ""]
    out += ["| step | s | share of evaluation time |", "|---|---|---|"]
    whole = max(doc["evaluation_s"], 1e-9)
    for name, s in list(doc["steps_total_s"].items())[:30]:
        out.append(f"| {name} | {s} | {100 * s / whole:.0f}% |")
    if "in_no_step_s" in doc:
        s = doc["in_no_step_s"]
        out.append(f"| (in no step) | {s} | {100 * s / whole:.0f}% |")
    shown = doc["slowest"] + (
        [doc["median"]] if doc["median"] and doc["median"] not in doc["slowest"] else []
    )
    columns = _columns(shown)
    out += ["", "## The slowest tasks and the median one: seconds per step", ""]
    out.append("| task | s | " + " | ".join(columns) + " |")
    out.append("|---|---|" + "---|" * len(columns))
    for r in shown:
        tag = " (median)" if r is doc["median"] or r == doc["median"] else ""
        cells = [_cell(r["steps"].get(c)) for c in columns]
        out.append(f"| {r['task']}{tag} | {r['seconds']} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def _columns(shown: list[dict[str, Any]]) -> list[str]:
    totals: dict[str, float] = {}
    for r in shown:
        for name, c in r["steps"].items():
            if name.count("/") < DEPTH:
                totals[name] = totals.get(name, 0.0) + c["s"]
    return [k for k, _ in sorted(totals.items(), key=lambda kv: -kv[1])[:COLUMNS]]


def _cell(c: dict[str, float] | None) -> str:
    if not c:
        return ""
    return f"{c['s']:.2f}" + (f" ×{c['n']}" if c["n"] > 1 else "")
