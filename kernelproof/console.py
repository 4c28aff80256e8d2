"""Terminal rendering of verdicts: a compact summary a person (or an agent) can act on."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from kernelproof.verdict import Verdict

STYLE = {"pass": "bold green", "fail": "bold red", "error": "bold yellow"}


def fmt_speedup(s: Any) -> str:
    if s is None or s.median is None:
        return "-"
    if s.ci95 is None:
        return f"{s.median:.3g}x"
    return f"{s.median:.3g}x [{s.ci95[0]:.3g}, {s.ci95[1]:.3g}]"


def fmt_ms(ms: float | None) -> str:
    if ms is None or ms != ms:
        return "-"
    if ms < 0.1:
        return f"{ms * 1000:.1f} us"
    return f"{ms:.3f} ms"


def print_verdict(v: Verdict, console: Console | None = None) -> None:
    c = console or Console()
    c.print(
        f"[{STYLE[v.verdict.value]}]{v.verdict.value.upper()}[/]  {v.solution.path}  vs  {v.task.path}"
        f"  ({v.solution.backend or '?'} backend, {v.environment.get('device_name', v.environment.get('device'))})"
    )
    if v.stored is not None:
        c.print(f"  stored verdict from {v.stored.at} (--fresh re-runs)", highlight=False, markup=False)
    for r in v.reasons:
        c.print(f"  {r.code.value}: {r.message}", markup=False, highlight=False, style="red")
        if r.detail:
            for line in r.detail.splitlines()[:12]:
                c.print(f"      {line}", markup=False, highlight=False)
    if v.build is not None:
        b = v.build
        how = "cache hit" if b.cached else f"built in {b.build_s:.1f} s"
        extra = f", {b.strategy}" if b.strategy else ""
        extra += ", rebuilt after a refused cache entry" if b.rebuilt else ""
        c.print(f"  build: {how}{extra} (waited {b.wait_s:.1f} s)", highlight=False, markup=False)
    if v.correctness is not None:
        k = v.correctness
        kb = (
            ""
            if k.kernelbench_compatible is None
            else f"; KernelBench's rule: {'accept' if k.kernelbench_compatible else 'reject'}"
        )
        c.print(
            f"  cases: {k.cases_passed}/{k.cases_run} passed; worst rel. error {k.worst_rel_norm_err:.2e} "
            f"(contract {k.precision}){kb}",
            highlight=False,
        )
    if v.timing is not None:
        for sh in v.timing.shapes:
            line = f"  timing [{sh.regime}, {sh.shape}, {sh.clock}]: candidate {fmt_ms(sh.candidate.median_ms)} median"
            line += f" (mean {fmt_ms(sh.candidate.mean_ms)}, max {fmt_ms(sh.candidate.max_ms)}, n={sh.candidate.n})"
            c.print(line, highlight=False, markup=False)
            for name, st in sh.baselines.items():
                c.print(f"      {name}: {fmt_ms(st.median_ms)} median (n={st.n})", highlight=False)
            c.print(f"      rounds {sh.rounds}, stopped by {sh.stopped_by}", highlight=False)
    if v.speedup:
        parts = [f"{k} {fmt_speedup(s)}" for k, s in v.speedup.items()]
        c.print("  speedup (median, 95% CI): " + "; ".join(parts), highlight=False, markup=False)
    if v.roofline is not None and v.roofline.sol_fraction is not None:
        r = v.roofline
        c.print(
            f"  roofline: {r.achieved_tflops or 0:.2f} TFLOP/s, {r.achieved_tbps or 0:.3f} TB/s, "
            f"{r.sol_fraction:.1%} of speed of light (floor {fmt_ms(r.floor_ms)})",
            highlight=False,
        )
    if v.coverage is not None and v.coverage.custom_fraction is not None:
        c.print(
            f"  kernel coverage: {v.coverage.custom_fraction:.0%} of GPU time in the solution's kernels",
            highlight=False,
        )
    for f in v.flags:
        c.print(f"  flag: {f}", highlight=False, markup=False, style="dim")
    c.print(f"  reward {v.reward:.3f}; {v.elapsed_s:.1f} s; seed {v.settings.get('seed')}", highlight=False)


def bench_table(verdicts: list[Verdict]) -> Table:
    t = Table(title="kernelproof bench")
    for col in ("task", "verdict", "reasons", "candidate", "vs eager", "vs best", "SOL"):
        t.add_column(col)
    for v in sorted(verdicts, key=lambda x: x.task.path):
        shape = v.timing.shapes[0] if v.timing and v.timing.shapes else None
        t.add_row(
            v.task.path,
            f"[{STYLE[v.verdict.value]}]{v.verdict.value}[/]",
            ",".join(v.codes) or "-",
            fmt_ms(shape.candidate.median_ms) if shape else "-",
            fmt_speedup(v.speedup.get("eager")),
            fmt_speedup(v.speedup.get("best")),
            f"{v.roofline.sol_fraction:.0%}" if v.roofline and v.roofline.sol_fraction is not None else "-",
        )
    return t
