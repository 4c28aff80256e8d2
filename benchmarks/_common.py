"""Helpers shared by the benchmarks: suite discovery and small tables. Benchmarks never gate CI."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


PHASES = (  # the verdict's phase marks, in order, and what the time up to each one was spent on
    ("setup_s", "setup"),
    ("worker_ready_s", "worker"),
    ("correctness_done_s", "correctness"),
    ("settled_s", "settle"),  # waiting for workers still starting on the GPU, before timing
    ("timing_done_s", "timing"),
)


def phase_durations(verdict) -> dict[str, float]:
    """The verdict's phase marks (seconds since its start) as durations, by phase name."""
    phases = dict(verdict.environment.get("phases", {}))
    out, last = {}, 0.0
    for mark, name in PHASES:
        if mark in phases:
            out[name] = phases[mark] - last
            last = phases[mark]
    return out


def phase_parts(verdict) -> str:
    """The same as text: "setup 0.1, worker 0.0, ..."."""
    return ", ".join(f"{name} {s:.1f}" for name, s in phase_durations(verdict).items())


def suite_pairs(levels=("level1", "level2", "level3")) -> list[tuple[Path, Path]]:
    pairs = []
    for level in levels:
        for task in sorted((ROOT / "suite" / level).glob("*.py")):
            sol = ROOT / "examples" / level / task.name
            if sol.is_file():
                pairs.append((task, sol))
    return pairs


def reference_as_solution(task: Path, out_dir: Path) -> Path:
    """The task's own Model as a ModelNew: the A/A candidate (same code as the eager baseline)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    src = task.read_text()
    sol = out_dir / task.name
    sol.write_text(src + "\n\nModelNew = Model\n")
    return sol


def out_dir() -> Path:
    d = Path(os.environ.get("OUT") or "/tmp/kernelproof-bench")
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_json(name: str, doc) -> Path:
    p = out_dir() / name
    p.write_text(json.dumps(doc, indent=1))
    return p


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])
