"""Each verdict of a bench run as one row: outcome, speedup with its interval, coverage raw and deciding.

Why: the coverage that decides a GPU verdict is the share of device time in the solution's own
kernels after the launch floor is subtracted from each kernel; the raw share keeps whole durations.
A reviewer of a launch-bound example needs both side by side, with the clock checks the parent
applied (the flags that name its gap check and back-to-back bound), for every built-in example.

    kernelproof bench suite --solutions examples --device cuda --json bench.json --exit-zero
    python benchmarks/coverage_table.py bench.json
    python benchmarks/coverage_table.py results.sqlite native.json   # a store, and one eval's JSON

A results store serves where a run was cut before its JSON was written: every verdict is stored as
it is decided.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import table


def _fraction(value) -> str:
    return "-" if value is None else f"{100 * value:.0f} %"


def _speedup(speedup: dict) -> str:
    eager = speedup.get("eager") or {}
    median, ci = eager.get("median"), eager.get("ci95")
    if median is None:
        return eager.get("note", "-")[:40] or "-"
    return f"{median:.3g}x [{ci[0]:.3g}, {ci[1]:.3g}]" if ci else f"{median:.3g}x"


def _clock(flags: list[str]) -> str:
    """Which of the parent's clock checks the verdict's flags say applied, or why not."""
    said = [f for f in flags if "parent" in f or "back-to-back" in f or "timing_" in f]
    return "; ".join(s[:90] for s in said) or "gap + back-to-back (no note)"


def rows(verdicts: list[dict]) -> list[list[str]]:
    out = []
    for v in verdicts:
        cov = v.get("coverage") or {}
        codes = ",".join(r["code"] for r in v.get("reasons", [])) or "-"
        out.append(
            [
                Path(v["task"]["path"]).parent.name + "/" + Path(v["task"]["path"]).name,
                v["verdict"],
                codes[:40],
                _speedup(v.get("speedup") or {}),
                _fraction(cov.get("custom_fraction_raw")),
                _fraction(cov.get("custom_fraction")),
                cov.get("policy", "-"),
                "-" if cov.get("floor_us") is None else f"{cov['floor_us']:.2f}",
                _clock(list(v.get("flags", []))),
            ]
        )
    return out


def load(path: Path) -> list[dict]:
    """Verdicts from a bench run's JSON list, one eval's JSON object, or a results store."""
    if path.suffix in (".sqlite", ".db"):
        import sqlite3

        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return [json.loads(doc) for (doc,) in db.execute("SELECT doc FROM verdicts ORDER BY task_path")]
    doc = json.loads(path.read_text())
    return doc if isinstance(doc, list) else [doc]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", type=Path, nargs="+", help="bench JSON, eval JSON or results.sqlite")
    args = parser.parse_args()
    verdicts = [v for path in args.sources for v in load(path)]
    header = ["task", "verdict", "codes", "speedup (eager)", "raw", "deciding", "policy", "floor us", "clock"]
    print(table(rows(verdicts), header))


if __name__ == "__main__":
    main()
