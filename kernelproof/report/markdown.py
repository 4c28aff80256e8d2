"""The report as GitHub-flavoured Markdown, for READMEs and pull requests.

Tables only (no images), so it pastes anywhere. Every string read from a verdict (paths, reason
messages, flags, codes, baseline and device names) may come from an untrusted candidate: it is
written as a code span (kernelproof.text.markdown_code), so no link, image, emphasis, autolink or
HTML in it renders, and a pipe or newline in it cannot break the table. The title is ours, and
escaped as prose.
"""

from __future__ import annotations

from pathlib import Path

from kernelproof.report.scores import (
    STANDARD_P,
    Result,
    Summary,
    fast_p_note,
    format_fraction,
    format_ratio,
    format_speedup,
    plural,
    task_label,
)
from kernelproof.text import markdown_code, markdown_text


def render_markdown(summary: Summary) -> str:
    """The report as one Markdown document (a string)."""
    s = summary
    counts = {v: sum(1 for r in s.results if r.verdict == v) for v in ("pass", "fail", "error")}
    lines = [
        f"# {markdown_text(s.title)}",
        "",
        f"{plural(len(s.results), 'result')} on {plural(len(s.tasks), 'task')} "
        f"({len(s.degenerate)} degenerate, not scored): "
        f"{counts['pass']} pass, {counts['fail']} fail, {counts['error']} error. "
        f"Measured on {', '.join(markdown_code(d) for d in s.devices) or 'unknown device'}.",
        "",
        "## Scores",
        "",
        "| baseline | tasks | correct | " + " | ".join(f"fast_{p:g}" for p in STANDARD_P) + " | geomean |",
        "|---|---:|---:|" + "---:|" * len(STANDARD_P) + "---:|",
    ]
    for sc in s.scores:
        cells = " | ".join("—" if v is None else f"{100 * v:.1f} %" for _, v in sc.fast_p)
        geo = "—" if sc.geomean is None else f"{format_ratio(sc.geomean)}x"
        lines.append(f"| {markdown_code(sc.baseline)} | {sc.tasks} | {sc.correct} | {cells} | {geo} |")
    if not s.scores:
        lines.append("| (no timed results) | | | " + "| " * len(STANDARD_P) + "|")
    lines += [
        "",
        "fast_p: share of scored tasks whose solution is correct and faster than the baseline by a factor "
        "strictly above p (KernelBench's definition; best solution per task)."
        + (f" {note}." if (note := fast_p_note(s.results)) else ""),
        "",
        "## Leaderboard per task",
    ]
    best = "best" in s.baselines  # a column against the best baseline only beside two or more
    if any(s.roots):
        lines += ["", "Paths are relative to the folder the tasks share and the one the solutions share."]
    for key, results in s.tasks.items():
        mark = " — degenerate task, not scored" if key in s.degenerate else ""
        lines += [
            "",
            f"### {markdown_code(task_label(s, key), table=False)}{mark}",
            "",
            "| # | solution | verdict | reasons | vs eager (95% CI) | "
            + ("vs best (95% CI) | " if best else "")
            + "SOL | coverage |",
            "|---:|---|---|---|---:|" + ("---:|" if best else "") + "---:|---:|",
        ]
        lines += [_row(rank, r, best) for rank, r in enumerate(results, 1)]
    return "\n".join(lines) + "\n"


def write_markdown(summary: Summary, path: str | Path) -> Path:
    out = Path(path)
    out.write_text(render_markdown(summary), encoding="utf-8")
    return out


def _row(rank: int, r: Result, best: bool) -> str:
    reasons = "; ".join(f"{markdown_code(code)}: {markdown_code(msg)}" for code, msg in r.reasons)
    flags = "; ".join(f"flag {markdown_code(f)}" for f in r.flags)
    verdict = {"pass": "**pass**", "fail": "fail", "error": "error"}.get(r.verdict, markdown_code(r.verdict))
    return (
        f"| {rank} | {markdown_code(r.solution)} | {verdict} | {'; '.join(x for x in (reasons, flags) if x)} | "
        f"{format_speedup(r.speedups.get('eager'))} | "
        + (f"{format_speedup(r.speedups.get('best'))} | " if best else "")
        + f"{format_fraction(r.sol_fraction)} | {format_fraction(r.custom_fraction)} |"
    )
