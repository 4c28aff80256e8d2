"""Terminal rendering of verdicts: a compact summary a person (or an agent) can act on.

Everything a verdict holds may come from the candidate (paths, reason messages and details,
flags, backend and device names read back from a store), so every string goes through
:func:`kernelproof.text.terminal` and reaches Rich as plain :class:`~rich.text.Text`: no escape
sequence, Rich markup or emoji code in it is interpreted (kernelproof/text.py says why).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kernelproof.text import terminal
from kernelproof.verdict import Verdict

STYLE = {"pass": "bold green", "fail": "bold red", "error": "bold yellow"}
DETAIL_LINES = 12  # lines of a reason's detail shown; the JSON verdict has all of them

Part = str | tuple[str, str]  # text, or (text, Rich style); the text is always made inert


def make_console(*, stderr: bool = False) -> Console:
    """A console that never turns ``:name:`` in printed text into an emoji."""
    return Console(stderr=stderr, emoji=False)


def line(*parts: Part) -> Text:
    """One line of our words and candidate text: every part made inert, styles applied as given."""
    out = Text()
    for part in parts:
        text, style = (part, "") if isinstance(part, str) else part
        out.append(terminal(text), style=style)
    return out


def say(console: Console, *parts: Part, style: str = "") -> None:
    """Print :func:`line` ``(*parts)`` with no markup, highlighting or emoji read into it."""
    console.print(line(*parts), style=style, highlight=False)


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
    c = console or make_console()
    device = v.environment.get("device_name", v.environment.get("device"))
    say(
        c,
        (v.verdict.value.upper(), STYLE.get(v.verdict.value, "")),
        f"  {v.solution.path}  vs  {v.task.path}  ({v.solution.backend or '?'} backend, {device})",
    )
    if v.stored is not None:
        c.print(f"  stored verdict from {v.stored.at} (--fresh re-runs)", highlight=False, markup=False)
    for r in v.reasons:
        say(c, f"  {r.code.value}: {r.message}", style="red")
        if r.detail:
            detail = terminal(r.detail, multiline=True, max_lines=DETAIL_LINES)
            for text in detail.splitlines():
                c.print(Text(f"      {text}"), highlight=False)
    missing = [n for n, x in (v.environment.get("sandbox") or {}).items() if not x.get("active")]
    if missing:
        say(
            c,
            f"  sandbox: {', '.join(missing)} not active (python -m kernelproof.sandbox says why)",
            style="yellow",
        )
    if v.build is not None:
        b = v.build
        how = "cache hit" if b.cached else f"built in {b.build_s:.1f} s"
        extra = f", {b.strategy}" if b.strategy else ""
        extra += ", rebuilt after a refused cache entry" if b.rebuilt else ""
        say(c, f"  build: {how}{extra} (waited {b.wait_s:.1f} s)")
    if v.correctness is not None:
        k = v.correctness
        kb = (
            ""
            if k.kernelbench_compatible is None
            else f"; KernelBench's rule: {'accept' if k.kernelbench_compatible else 'reject'}"
        )
        say(
            c,
            f"  cases: {k.cases_passed}/{k.cases_run} passed; worst rel. error {k.worst_rel_norm_err:.2e} "
            f"(contract {k.precision}){kb}",
        )
    if v.timing is not None:
        for sh in v.timing.shapes:
            cand = sh.candidate
            say(
                c,
                f"  timing [{sh.regime}, {sh.shape}, {sh.clock}]: candidate {fmt_ms(cand.median_ms)} median"
                f" (mean {fmt_ms(cand.mean_ms)}, max {fmt_ms(cand.max_ms)}, n={cand.n})",
            )
            for name, st in sh.baselines.items():
                say(c, f"      {name}: {fmt_ms(st.median_ms)} median (n={st.n})")
            say(c, f"      rounds {sh.rounds}, stopped by {sh.stopped_by}")
    if v.speedup:
        parts = [f"{k} {fmt_speedup(s)}" for k, s in v.speedup.items()]
        say(c, "  speedup (median, 95% CI): " + "; ".join(parts))
    if v.roofline is not None and v.roofline.sol_fraction is not None:
        r = v.roofline
        say(
            c,
            f"  roofline: {r.achieved_tflops or 0:.2f} TFLOP/s, {r.achieved_tbps or 0:.3f} TB/s, "
            f"{r.sol_fraction:.1%} of speed of light (floor {fmt_ms(r.floor_ms)})",
        )
    if v.coverage is not None and v.coverage.custom_fraction is not None:
        say(c, f"  kernel coverage: {v.coverage.custom_fraction:.0%} of GPU time in the solution's kernels")
    for f in v.flags:
        say(c, f"  flag: {f}", style="dim")
    say(c, f"  reward {v.reward:.3f}; {v.elapsed_s:.1f} s; seed {v.settings.get('seed')}")


def bench_table(verdicts: list[Verdict]) -> Table:
    t = Table(title="kernelproof bench")
    for col in ("task", "verdict", "reasons", "candidate", "vs eager", "vs best", "SOL"):
        t.add_column(col)
    for v in sorted(verdicts, key=lambda x: x.task.path):
        shape = v.timing.shapes[0] if v.timing and v.timing.shapes else None
        t.add_row(
            line(v.task.path),
            line((v.verdict.value, STYLE.get(v.verdict.value, ""))),
            line(",".join(v.codes) or "-"),
            fmt_ms(shape.candidate.median_ms) if shape else "-",
            fmt_speedup(v.speedup.get("eager")),
            fmt_speedup(v.speedup.get("best")),
            f"{v.roofline.sol_fraction:.0%}" if v.roofline and v.roofline.sol_fraction is not None else "-",
        )
    return t
