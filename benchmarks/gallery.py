"""The gallery: each honest kernel of the candidate set measured alone, its figures written into its docstring.

The honest Triton and CUDA kernels under benchmarks/candidates/ are the start of a gallery (issue
48): each says in its docstring what kernelproof found of it, as measured, never as hoped. This
runs each one alone on the device (one evaluation in flight, nothing beside it), timed against
eager PyTorch and ``torch.compile`` with every check on, and prints a line per kernel: the verdict,
each speedup's median and 95 % confidence interval, the candidate's median time, the device and the
code that judged it. With ``--write`` the line replaces the docstring's ``Measured:`` paragraph
(on a GPU) or its ``CPU (...)`` line (on the CPU: correctness only, at the task's ``cpu_sizes``,
Triton's interpreter; CUDA kernels are not built there).

    python benchmarks/gallery.py --kernelbench .kernelbench --device cuda [--only 88_MinGPT] [--write]
    python benchmarks/gallery.py --smoke [--write]          # the smoke set's honest kernels, on the CPU
    python benchmarks/gallery.py --apply out/gallery.rows.jsonl  # write a device run's rows here

Each verdict is appended to ``gallery.rows.jsonl`` under ``--out`` as it is decided (a run cut
short keeps what it measured); exit 1 when an honest kernel did not pass.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from _common import ROOT
from candidate_set import Candidate, load, scaled_task, smoke_pairs

HONEST = ("honest_triton", "honest_cuda")
BASELINES = ("eager", "compile")
WIDTH = 100  # the docstring's lines are wrapped here
# the paragraph runs to the CPU line (a Triton kernel's "CPU (...)", a CUDA kernel's "CPU: its
# kernels compile..."), the docstring's end or a blank line, whatever it holds
GPU_PARAGRAPH = re.compile(r'^Measured\b.*?(?=^CPU\b|^"""|^$)', re.MULTILINE | re.DOTALL)
CPU_LINE = re.compile(r'^CPU \(.*?(?=^Measured\b|^"""|^$)', re.MULTILINE | re.DOTALL)


def honest(candidates: list[Candidate], only: list[str]) -> list[Candidate]:
    """The honest kernels, those whose id contains one of `only` (all when it is empty)."""
    return [c for c in candidates if c.kind in HONEST and (not only or any(o in c.id for o in only))]


def pairs_for(ns, doc: dict, candidates: list[Candidate], scratch: Path) -> list[tuple[Path, Candidate]]:
    """(task file, candidate) for each honest kernel measured in this run."""
    chosen = honest(candidates, ns.only)
    if ns.smoke:
        return [(t, c) for t, c in smoke_pairs(doc, candidates) if c in chosen and c.backend != "cuda"]
    if ns.device == "cpu":  # the task at its CPU sizes; CUDA kernels need a GPU to be built
        return [
            (scaled_task(ns.kernelbench / c.task, doc["tasks"][c.task]["cpu_sizes"], scratch / c.task), c)
            for c in chosen
            if c.backend != "cuda"
        ]
    return [(ns.kernelbench / c.task, c) for c in chosen]


def measure(task: Path, c: Candidate, device: str, time_budget_s: float):
    """The candidate's verdict, alone on the device: timed against eager and torch.compile on a GPU,
    correctness only on the CPU (the interpreter's speed is no claim there)."""
    from kernelproof import api
    from kernelproof.options import EvalOptions

    cpu = device == "cpu"
    options = EvalOptions(
        device=device,
        db="",
        fresh=True,
        per_device=1,
        correctness_only=cpu,
        shape_variants="task" if cpu else "probe",
        baselines=BASELINES,
        time_budget_s=time_budget_s,
    )
    return api.evaluate(str(task), str(c.file), options)


def figures(v) -> dict[str, Any]:
    """What the gallery keeps of a verdict: its outcome, codes, speedups and where it was measured."""
    env = v.environment
    worker = env.get("worker") or {}
    speedups = {}
    for name, s in (v.speedup or {}).items():
        if name == "best" or s.median is None:
            continue
        speedups[name.split(":")[0]] = {"median": s.median, "ci95": list(s.ci95) if s.ci95 else None}
    shapes = v.timing.shapes if v.timing else ()
    first = next((s for s in shapes if s.regime == "cold"), None)
    return {
        "verdict": v.verdict.value,
        "codes": list(v.codes),
        "first_reason": v.reasons[0].message[:200] if v.reasons else "",
        "speedups": speedups,
        "withheld": v.claims.speed_withheld if getattr(v, "claims", None) else "",
        "shape": first.shape if first else "",
        "candidate_ms": first.candidate.median_ms if first else None,
        "rounds": first.rounds if first else None,
        "device": env.get("device_name") or env.get("device", ""),
        "torch": env.get("torch", ""),
        "triton": worker.get("triton", ""),
        "source": (env.get("kernelproof_source_sha256") or "")[:12],
        "date": dt.date.today().isoformat(),
        "cases": f"{v.correctness.cases_passed} of {v.correctness.cases_run}" if v.correctness else "",
        # how the evaluation counted its memory (footprint, cases', handoff buffers, admission wait):
        # what decides too_large or crash near a device's edge, kept for the run's reader
        "memory": env.get("memory") or {},
    }


def gpu_text(f: dict[str, Any]) -> str:
    """The docstring's ``Measured:`` paragraph for a GPU verdict."""
    where = f"{f['device']}, torch {f['torch']}" + (f", Triton {f['triton']}" if f["triton"] else "")
    head = f"Measured ({where}; kernelproof source {f['source']}, {f['date']}, alone on the device): "
    if f["verdict"] != "pass":
        return head + f"{f['verdict']} {', '.join(f['codes'])}: {f['first_reason']}"
    parts = []
    for name in BASELINES:
        s = f["speedups"].get(name)
        if s is None:
            parts.append(f"no figure against {name}")
            continue
        ci = f" (95 % CI {s['ci95'][0]:.2f}-{s['ci95'][1]:.2f})" if s["ci95"] else ""
        parts.append(f"{s['median']:.2f}x {name}{ci}")
    speed = "; ".join(parts)
    if f["withheld"]:
        speed = f"speed withheld ({f['withheld']})"
    timed = (
        f"; the kernel {f['candidate_ms']:.4g} ms at the {f['shape']!r} shape (median, cold, "
        f"{f['rounds']} interleaved rounds)"
        if f["candidate_ms"] is not None
        else ""
    )
    return head + f"pass, {f['cases']} cases; {speed}{timed}."


def cpu_text(f: dict[str, Any], smoke: bool = False) -> str:
    """The docstring's ``CPU (...)`` line for a correctness-only CPU verdict."""
    got = f["verdict"] + (f" ({', '.join(f['codes'])})" if f["codes"] else "")
    sizes = "the smoke task's shapes (candidates/tasks)" if smoke else "the task's cpu_sizes in manifest.json"
    return (
        f"CPU (Triton's interpreter, correctness only, at {sizes}): {got}, {f['cases']} cases, {f['date']}."
    )


def rewrite(source: str, text: str, cpu: bool) -> str:
    """`source` with its docstring's Measured paragraph (or CPU line) replaced by `text`, wrapped.
    A verdict's words (a compiler's message) may hold backslashes or quotes: escaped, so that the
    docstring stays one and warns of no invalid escape."""
    safe = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    wrapped = textwrap.fill(safe, WIDTH, break_on_hyphens=False, break_long_words=False) + "\n"
    pattern = CPU_LINE if cpu else GPU_PARAGRAPH
    if not pattern.search(source):
        raise ValueError("its docstring has no " + ("'CPU (' line" if cpu else "'Measured:' paragraph"))
    return pattern.sub(lambda _: wrapped, source, count=1)


def apply(rows_path: Path) -> int:
    """Write the figures of a run's rows (a device's ``gallery.rows.jsonl``) into this checkout's
    kernels: the last row of each kernel and device kind wins."""
    last: dict[tuple[str, bool], dict[str, Any]] = {}
    for line in rows_path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            last[(row["file"], row["on"] == "cpu")] = row
    for (file, cpu), row in sorted(last.items()):
        text = cpu_text(row, row.get("smoke", False)) if cpu else gpu_text(row)
        path = ROOT / file
        path.write_text(rewrite(path.read_text(), text, cpu))
        print(f"{file}\n  {text}")
    print(f"{len(last)} docstrings written from {rows_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", type=Path, help="a KernelBench checkout (its tasks at published sizes)")
    ap.add_argument("--smoke", action="store_true", help="the smoke set's honest kernels on the CPU")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--only", action="append", default=[], help="candidate ids containing this text")
    ap.add_argument("--time-budget", type=float, default=20.0, help="seconds of timing per timed shape")
    ap.add_argument("--write", action="store_true", help="write each figure into its kernel's docstring")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    ap.add_argument("--apply", type=Path, help="write the figures of a run's rows (no measuring)")
    ap.add_argument(
        "--deadline-s",
        type=float,
        default=None,
        help="start no kernel past this many seconds (rows so far kept)",
    )
    ns = ap.parse_args(argv)
    if ns.apply:
        return apply(ns.apply)
    if ns.smoke:
        ns.device = "cpu"
    elif ns.kernelbench is None:
        ap.error("--kernelbench DIR (or --smoke) is required")
    doc, candidates = load()
    ns.out.mkdir(parents=True, exist_ok=True)
    rows_path = ns.out / "gallery.rows.jsonl"
    failed = measured = 0
    with tempfile.TemporaryDirectory(prefix="gallery-") as scratch:
        pairs = pairs_for(ns, doc, candidates, Path(scratch))
        print(f"{len(pairs)} honest kernels on {ns.device}, one at a time", flush=True)
        started = time.monotonic()
        for task, c in pairs:
            if ns.deadline_s is not None and time.monotonic() - started > ns.deadline_s:
                print(f"deadline: {ns.deadline_s:g} s passed, {c.id} and the rest not measured", flush=True)
                break
            f = figures(measure(task, c, ns.device, ns.time_budget))
            measured += 1
            text = cpu_text(f, ns.smoke) if ns.device == "cpu" else gpu_text(f)
            failed += f["verdict"] != "pass"
            row = {"id": c.id, "file": str(c.file.relative_to(ROOT)), "on": ns.device, "smoke": ns.smoke, **f}
            with rows_path.open("a") as rows:
                rows.write(json.dumps(row) + "\n")
            print(f"{c.id}\n  {text}", flush=True)
            if ns.write:
                c.file.write_text(rewrite(c.file.read_text(), text, ns.device == "cpu"))
    print(f"{measured} of {len(pairs)} measured, {failed} did not pass; rows in {rows_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
