"""Every KernelBench task as published, paired with the identity solution: does each reach a verdict?

KernelBench's upstream level1-3 folders (250 tasks) run unchanged, each with the identity solution
(the task's own ``Model`` as ``ModelNew``), correctness only, one seed per case. The identity
solution is right by construction, so every verdict other than ``pass`` is either a property of
the task (``degenerate_task``: its outputs barely depend on its inputs; ``task_error``: its
reference raises on its own inputs) or kernelproof's own failure. The run prints one line per
task and a summary by reason code, and writes the table as Markdown and JSON, with its cost
table beside it (``kernelbench-sweep-costs-<levels>.md``/``.json``, benchmarks/_costs.py): the
slowest dozen tasks and the median one with seconds per step (setup's reference runs, float64
oracle, audit controls, shape probes; the worker's start, the handoff, each correctness case and
its comparison), the steps that cost most overall, and the wall time per level and in total.

It is resumable: verdicts go to a store (``--db``), so a rerun serves what is done and evaluates
the rest (an ``internal_error`` is evaluated again; ``too_large`` is never stored), and
``--time-limit`` stops submitting new tasks in time for a 10-minute call. Run it level by level.
A rerun at another ``--per-device`` is served every stored verdict but a crash or timeout reached
with more evaluations sharing the GPU (docs/verdict.md, the store).

KernelBench is never committed here: ``--prepare DIR`` exports the pinned commit's level folders
from a local clone (``--from``) into DIR, an ignored folder, with the commit written beside them,
and the sweep refuses a checkout at any other commit. ``kernelproof kernelbench RUN --kernelbench DIR``
takes the same folder (it holds level1-3 directly) as it takes a KernelBench checkout.

    python benchmarks/kernelbench_sweep.py --prepare .kernelbench --from /path/to/KernelBench
    python benchmarks/kernelbench_sweep.py .kernelbench --levels 1 --per-device 2 --db kb.sqlite
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from _common import ROOT
from _costs import cost_table, markdown, row_steps

PINNED_COMMIT = "423217d9fda91e0c2d67e4a43bf62f96f6d104f1"  # KernelBench main, 2026-03-05 (#143)
LEVELS = ("level1", "level2", "level3")
COMMIT_FILE = "KERNELBENCH_COMMIT"
IDENTITY = '\n\nclass ModelNew(Model):\n    """The identity solution: the task\'s own Model."""\n'


def prepare(dest: Path, clone: Path) -> None:
    """Export the pinned commit's KernelBench/level1-3 into `dest`, with the commit beside them."""
    dest.mkdir(parents=True, exist_ok=True)
    for level in LEVELS:
        archive = subprocess.run(
            ["git", f"--git-dir={_git_dir(clone)}", "archive", PINNED_COMMIT, f"KernelBench/{level}"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest), "--strip-components=1"], input=archive, check=True)
    (dest / COMMIT_FILE).write_text(PINNED_COMMIT + "\n")
    print(f"KernelBench {PINNED_COMMIT[:12]}: {sum(1 for _ in dest.glob('level*/*.py'))} tasks in {dest}")


def _git_dir(clone: Path) -> Path:
    return clone / ".git" if (clone / ".git").exists() else clone


def checked_root(path: Path) -> Path:
    """The folder that holds level1-3, after checking that it is the pinned commit."""
    root = path / "KernelBench" if (path / "KernelBench" / "level1").is_dir() else path
    recorded = (path / COMMIT_FILE).read_text().strip() if (path / COMMIT_FILE).is_file() else None
    if recorded is None:
        try:
            recorded = subprocess.run(
                ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            recorded = None
    if recorded != PINNED_COMMIT:
        sys.exit(
            f"{path} is KernelBench at {recorded or 'an unknown commit'}, not the pinned {PINNED_COMMIT}"
        )
    return root


def identity_solutions(root: Path, levels: list[str], out: Path, only: list[str]) -> list[tuple[Path, Path]]:
    """(task, identity solution) pairs, the solutions written into `out` (re-written only when changed)."""
    pairs = []
    for level in levels:
        for task in sorted((root / level).glob("*.py"), key=lambda p: (_number(p), p.name)):
            if only and not any(o in f"{level}/{task.name}" for o in only):
                continue
            sol = out / level / task.name
            text = task.read_text() + IDENTITY
            if not sol.is_file() or sol.read_text() != text:
                sol.parent.mkdir(parents=True, exist_ok=True)
                sol.write_text(text)
            pairs.append((task, sol))
    return pairs


def _number(p: Path) -> int:
    head = p.name.split("_", 1)[0]
    return int(head) if head.isdigit() else 10**6


HELP_WIDTH = 79  # --help fits 80 columns, as every verb's does


def _description(doc: str) -> str:
    """The module's docstring as --help shows it: each paragraph refilled to HELP_WIDTH, and each
    indented command line continued with a backslash where it is longer (still one command to paste)."""
    import textwrap

    out = []
    for block in doc.strip().split("\n\n"):
        if block.startswith("    "):
            lines = [
                " \\\n        ".join(textwrap.wrap(ln.strip(), HELP_WIDTH - 10, break_on_hyphens=False))
                for ln in block.splitlines()
            ]
            out.append("\n".join("    " + ln for ln in lines))
        else:
            out.append(textwrap.fill(" ".join(block.split()), HELP_WIDTH, break_on_hyphens=False))
    return "\n\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=_description(__doc__ or ""),
        formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(prog, width=HELP_WIDTH),
    )
    ap.add_argument("kernelbench", nargs="?", type=Path, help="the prepared folder (or a clone at the pin)")
    ap.add_argument("--prepare", type=Path, help="export the pinned level folders into this folder")
    ap.add_argument("--from", dest="clone", type=Path, help="a local KernelBench clone or bare git dir")
    ap.add_argument("--levels", default="1,2,3", help="which levels, e.g. 1 or 2,3 (default: 1,2,3)")
    ap.add_argument(
        "--only",
        action="append",
        default=[],
        help="only tasks whose level/file name contains this (repeatable)",
    )
    ap.add_argument("--device", default="auto", help="auto | cuda | cuda:N | cpu (default: auto)")
    ap.add_argument(
        "--per-device",
        type=int,
        default=2,
        help="evaluations in flight per GPU: their untimed work overlaps (default: 2)",
    )
    ap.add_argument("--db", default=str(ROOT / ".kernelbench" / "sweep.sqlite"), help="the resumable store")
    ap.add_argument("--time-limit", type=float, default=0, help="stop submitting after this many seconds")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per worker phase (default: 300)")
    ap.add_argument("--out", type=Path, default=None, help="folder for the table (default: $OUT or /tmp)")
    ap.add_argument(
        "--order",
        choices=("spread", "listed"),
        default="spread",
        help="spread: on a GPU, the tasks too large to share the device (by the meta device's sizes) "
        "spread among the others, largest first, so that small tasks run beside a large one instead "
        "of behind a run of them; listed: level and number order",
    )
    ap.add_argument(
        "--heartbeat",
        type=float,
        default=60,
        help="every this many seconds, the evaluations in flight, their steps and the memory (0: never)",
    )
    ns = ap.parse_args()
    if ns.prepare:
        if not ns.clone:
            ap.error("--prepare needs --from CLONE")
        prepare(ns.prepare, ns.clone)
        return 0
    if ns.kernelbench is None:
        ap.error("the prepared KernelBench folder is required")
    begun = time.monotonic()
    root = checked_root(ns.kernelbench)
    levels = [f"level{n.strip()}" for n in ns.levels.split(",") if n.strip()]
    pairs = identity_solutions(root, levels, ns.kernelbench / "identity", ns.only)
    if ns.order == "spread":
        pairs = spread_large(pairs, ns.device, ns.per_device)
    ns.order_s = time.monotonic() - begun  # part of the sweep's wall time, before its first evaluation
    print(f"listed and ordered {len(pairs)} tasks in {ns.order_s:.1f} s", flush=True)
    return sweep(pairs, root, ns)


def spread_large(pairs: list[tuple[Path, Path]], device: str, per_device: int) -> list[tuple[Path, Path]]:
    """The pairs reordered so that no run of large tasks keeps the device to one at a time.

    A task is large when what its evaluation is expected to hold (the meta device's sizes,
    kernelproof/verify/footprint.py ``evaluation_bytes``) is more than the device's admitted memory
    shared among ``per_device`` evaluations. Level 1 has dozens of them next to each other (19_-39_
    at 4-9 GB a tensor), and the device's memory admission runs them one or two at a time: in the
    listed order every slot then waits behind them. Spread out, largest first, each large task
    runs beside small ones. Only on a GPU (the CPU has no admission by memory); the order of the
    verdicts changes, not which tasks run or how."""
    capacity = _admitted_bytes(device)
    if capacity is None or per_device < 2 or len(pairs) < 2:
        return pairs
    sizes = _sizes([task for task, _ in pairs])
    share = capacity / per_device
    large = sorted((p for p in pairs if sizes[p[0]] > share), key=lambda p: -sizes[p[0]])
    small = [p for p in pairs if sizes[p[0]] <= share]
    print(
        f"order: {len(large)} of {len(pairs)} tasks hold more than {share / 1e9:.1f} GB "
        f"(the admitted {capacity / 1e9:.1f} GB over {per_device} in flight): spread among the rest",
        flush=True,
    )
    return interleave(large, small)


def interleave(large: list, small: list) -> list:
    """Each of `large` followed by an even share of `small` (the remainder spread from the front)."""
    if not large:
        return list(small)
    out: list = []
    per, extra = divmod(len(small), len(large))
    at = 0
    for i, item in enumerate(large):
        take = per + (1 if i < extra else 0)
        out += [item, *small[at : at + take]]
        at += take
    return out


def _admitted_bytes(device: str) -> float | None:
    """What the device's memory admission allows in all (None: the CPU, no admission)."""
    import torch

    from kernelproof.executors.device_memory import for_device

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return getattr(for_device(device), "capacity_bytes", None)


def _sizes(tasks: list[Path]) -> dict[Path, int]:
    """Each task's :func:`_evaluation_bytes`, several processes at once (a second per task or so
    for level 3's models, on one core). Spawned, not forked: the parent may hold a CUDA context."""
    import concurrent.futures
    import multiprocessing

    workers = max(1, min(8, (os.cpu_count() or 2) - 1))
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=spawn) as pool:
        return dict(zip(tasks, pool.map(_evaluation_bytes, tasks, chunksize=8), strict=True))


def _evaluation_bytes(task: Path) -> int:
    """The meta device's estimate of what an evaluation of `task` holds on a GPU (0: none)."""
    from kernelproof.task import load_task, variants_for
    from kernelproof.verify.footprint import case_need

    try:
        loaded = load_task(str(task))
    except Exception:  # noqa: BLE001 - a task that does not load is the evaluation's to report
        return 0
    return case_need(loaded, variants_for(loaded, "cuda"), "meta").evaluation_bytes or 0


def sweep(pairs: list[tuple[Path, Path]], root: Path, ns) -> int:
    from kernelproof.api import evaluate_many
    from kernelproof.options import EvalOptions

    options = EvalOptions(
        device=ns.device,
        correctness_only=True,
        seeds_per_case=1,
        # the identity solution is general by construction: probing perturbed shapes would only
        # double the reference's work at KernelBench's sizes
        shape_variants="task",
        per_device=ns.per_device,
        db=ns.db,
        timeout_s=ns.timeout,
    )
    order_s = round(getattr(ns, "order_s", 0.0), 1)  # listing and ordering, before `started`
    started = time.monotonic()
    rows: list[dict] = []
    arrivals: dict[str, float] = {}  # seconds since the start at which each task's verdict came
    out = ns.out or Path(os.environ.get("OUT") or "/tmp/kernelproof-bench")
    out.mkdir(parents=True, exist_ok=True)
    # named after the levels asked for, not those reached: a resumed run rewrites the same files
    tag = "-".join(sorted({pair[0].relative_to(root).parts[0] for pair in pairs})) or "none"
    results = evaluate_many(pairs, options)
    stop_beat = threading.Event()
    if ns.heartbeat > 0:
        threading.Thread(target=_heartbeat, args=(ns.heartbeat, started, stop_beat), daemon=True).start()
    for v in results:
        name = str(Path(v.task.path).relative_to(root))
        first = v.reasons[0].message if v.reasons else ""
        stored = bool(getattr(v, "stored", None))
        arrivals[name] = round(time.monotonic() - started, 2)
        rows.append(
            {
                "task": name,
                "outcome": v.verdict.value,
                "codes": v.codes,
                "seconds": round(v.elapsed_s, 1),
                "arrived_s": arrivals[name],  # on the sweep's clock: spans can be rebuilt from the JSON
                "stored": stored,
                "message": first,  # whole: an error's cause must survive the run (the table cuts it)
                "detail": v.reasons[0].detail if v.reasons else "",
                "flags": [f.split(":", 1)[0] for f in v.flags if not f.startswith("triage ")],
                "steps": row_steps(v.environment),
            }
        )
        codes = ",".join(v.codes) or "-"
        print(f"{name:58s} {v.verdict.value:5s} {codes:22s} {v.elapsed_s:6.1f}s {first[:90]}", flush=True)
        # after every verdict: a run cut short by its caller's timeout still leaves its table
        _write(out, tag, rows, len(pairs), time.monotonic() - started, arrivals, order_s)
        if ns.time_limit and time.monotonic() - started > ns.time_limit:
            print(f"time limit {ns.time_limit:.0f} s reached: the rest waits for the next run", flush=True)
            results.close()  # evaluations in flight finish and are stored; nothing new starts
            break
    stop_beat.set()
    wall = time.monotonic() - started
    _write(out, tag, rows, len(pairs), wall, arrivals, order_s)
    summary = collections.Counter(r["codes"][0] if r["codes"] else r["outcome"] for r in rows)
    print(f"\n{len(rows)} of {len(pairs)} tasks reached a verdict in {wall:.0f} s:")
    for code, n in summary.most_common():
        print(f"  {code:24s} {n}")
    return 0


def _heartbeat(every_s: float, started: float, stop: threading.Event) -> None:
    """Lines starting ``..`` every `every_s`: each evaluation in flight with the step it is in, the
    device admissions' reservations, and the device's memory as the driver sees it. A sweep that
    goes minutes without a verdict shows where its evaluations wait."""
    from kernelproof.executors.device_memory import admissions
    from kernelproof.verify.steps import live

    while not stop.wait(every_s):
        at = time.monotonic() - started
        for o in live():
            print(
                f".. {at:5.0f}s  {Path(o.label).name:50s} {o.elapsed_s:6.0f}s in; {o.step or '-'} "
                f"for {o.step_s:.0f}s",
                flush=True,
            )
        for a in admissions():
            print(f".. {at:5.0f}s  {a.describe()}", flush=True)
        device = _device_memory()
        if device:
            print(f".. {at:5.0f}s  {device}", flush=True)


def _device_memory() -> str:
    """The driver's view of the first GPU, and this process's share ("" without one)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return ""
        free, total = torch.cuda.mem_get_info(0)
        mine = torch.cuda.memory_reserved(0)
    except Exception:  # noqa: BLE001 - a heartbeat never stops the sweep
        return ""
    return f"cuda:0 in use {(total - free) / 1e9:.1f} of {total / 1e9:.1f} GB; this process's allocator {mine / 1e9:.1f} GB"


def _write(
    out: Path,
    tag: str,
    rows: list[dict],
    tasks: int,
    wall: float,
    arrivals: dict[str, float],
    order_s: float = 0.0,
) -> None:
    """The table so far, as JSON and Markdown, and its cost table (benchmarks/_costs.py) beside it
    (rewritten whole: each write is a complete table). `wall`: from the first evaluation's start;
    `order_s`: the listing and ordering before it, part of what a user waits for."""
    doc = {
        "kernelbench": PINNED_COMMIT,
        "wall_s": round(wall, 1),
        "order_s": order_s,
        "tasks": tasks,
        "rows": rows,
    }
    (out / f"kernelbench-sweep-{tag}.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / f"kernelbench-sweep-{tag}.md").write_text(_markdown(rows))
    costs = cost_table(rows, wall, arrivals)
    costs["kernelbench"] = PINNED_COMMIT
    costs["order_s"] = order_s
    (out / f"kernelbench-sweep-costs-{tag}.json").write_text(json.dumps(costs, indent=1) + "\n")
    title = f"KernelBench sweep cost table ({tag}, {tasks} tasks)"
    (out / f"kernelbench-sweep-costs-{tag}.md").write_text(markdown(costs, title))


def _markdown(rows: list[dict]) -> str:
    lines = ["| task | verdict | codes | s | flags | first reason |", "|---|---|---|---|---|---|"]
    for r in rows:
        msg = r["message"].replace("|", "\\|")[:160]
        lines.append(
            f"| {r['task']} | {r['outcome']} | {','.join(r['codes'])} | {r['seconds']} | "
            f"{','.join(r['flags'])} | {msg} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
