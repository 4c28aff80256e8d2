"""The floor one device puts under a pass: evaluations too large to run beside each other.

An evaluation that reserves more than half of the memory the device admits cannot run beside
another such one, whatever the concurrency: their seconds on the device add up, one after
another. On an H200 more than half of the candidate set's evaluations were of that kind (level 1's
6.4 GB-a-tensor tasks reserve about 90 GB of the 138 admitted), so their own seconds, summed,
bound the whole pass from below however well the rest overlaps them. This module reads that floor
from a pass's rows (each verdict's reservation and steps) and the device's admitted memory (its
``/metrics`` gauges: _admission_timeline.py), and says what rate it leaves at best: the figure a
change must move for the set's rate to move, and the one a target above it cannot be met without.

An evaluation's own seconds here are its seconds less every wait that holds nothing the others
need (for memory, for the device to empty, for a build, for another's timing turn, for the
parent's torch state): what it did itself while it held its reservation. A wait nested in
another is counted once.
"""

from __future__ import annotations

from typing import Any

# The last part of a step's name that makes it a wait (kernelproof/evaluate: setup.py, chain.py,
# device_turns.py; kernelproof/api.py; kernelproof/verify/steps.py).
WAITS = frozenset(
    {"admission", "timing_admission", "alone_wait", "build_wait", "device_wait", "timing_wait", "lock_wait"}
)


def own_seconds(row: dict[str, Any]) -> float:
    """A row's seconds less its waits (a wait inside another wait counted once)."""
    steps = row.get("steps") or {}
    waited = 0.0
    for name, cost in steps.items():
        parts = name.split("/")
        if parts[-1] in WAITS and not any(p in WAITS for p in parts[:-1]):
            waited += float(cost.get("s", 0.0))
    return max(0.0, float(row.get("seconds") or 0.0) - waited)


def exclusive(row: dict[str, Any], capacity_bytes: float) -> bool:
    """Whether the row's evaluation reserved more than half of the admitted memory for its cases:
    two such never hold the device together."""
    return bool(row.get("reserved_bytes")) and 2 * float(row["reserved_bytes"]) > capacity_bytes


def floor(rows: list[dict[str, Any]], capacity_bytes: float | None, wall_s: float) -> dict[str, Any]:
    """The pass's floor: how many of its fresh evaluations were exclusive, their own seconds summed,
    that sum's share of the pass's wall, and the evaluations per GPU-hour it leaves at best (all the
    pass's answers over the floor: the rest overlapping it perfectly). Where the device admits
    memory without a count (the CPU, an unsized device) there is no floor, and it says why."""
    fresh = [r for r in rows if not r.get("stored")]
    if not capacity_bytes:
        return {"applies": False, "why": "the device's admitted memory is not counted (no memory gauge)"}
    mine = [r for r in fresh if exclusive(r, capacity_bytes)]
    floor_s = sum(own_seconds(r) for r in mine)
    return {
        "applies": True,
        "capacity_bytes": int(capacity_bytes),
        "exclusive": len(mine),
        "evaluations": len(fresh),
        "floor_s": round(floor_s, 1),
        "mean_own_s": round(floor_s / len(mine), 2) if mine else None,
        "floor_share_of_wall": round(floor_s / wall_s, 3) if wall_s > 0 else None,
        "ceiling_per_gpu_hour": round(len(fresh) / floor_s * 3600, 1) if floor_s > 0 else None,
    }


def line(summary: dict[str, Any]) -> str:
    """One line of the terminal report (80 columns)."""
    if not summary.get("applies"):
        return "device floor: none (the device's memory is not counted)"
    if not summary["exclusive"]:
        return f"device floor: none of {summary['evaluations']} needs over half the device"
    ceiling = summary["ceiling_per_gpu_hour"]
    share = summary["floor_share_of_wall"]
    return (
        f"floor: {summary['exclusive']}/{summary['evaluations']} need >1/2 device, "
        f"{summary['floor_s']:.0f} s own"
        + (f" ({100 * share:.0f}% of wall)" if share is not None else "")
        + (f": at best {ceiling:,.0f}/GPU-h" if ceiling is not None else "")
    )
