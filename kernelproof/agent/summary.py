"""The run's summary: best speedup against candidates evaluated, and where time and tokens went.

Built from the candidates and the calls table only, so ``kernelproof report`` can rebuild it from
the store for any finished or interrupted run. Rendered as a Markdown table, a rich table for the
terminal and a PNG figure (matplotlib, the optional ``report`` extra; skipped when missing).
The names in it that come from outside (the task, the model, the run, an idea) go through
kernelproof.text: code spans in Markdown, inert plain text in the terminal; prose that may quote a
provider or a candidate (a warning, a provider's error, the stop detail) is Markdown-escaped, so
nothing in it renders (no image, link or HTML from an HTTP error body).

Every candidate is listed with its outcome, reason codes and flags; ``rejected`` counts the
candidates that did not pass (a failing or error verdict, or an answer never evaluated). On a CPU
the evaluation time is not GPU time, so the tables say "eval s" there.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from kernelproof.agent import ranking
from kernelproof.agent.call_records import Candidate
from kernelproof.text import markdown_code, markdown_text

PROSE_CHARS = 2000  # of one warning or stop detail in summary.md


def summarize(candidates: list[Candidate], calls: list[dict[str, Any]], **head: Any) -> dict[str, Any]:
    """A JSON-ready summary; ``head`` adds run-level fields (run id, stop reason, spend)."""
    best = ranking.best(candidates)
    progress, best_low = [], -math.inf
    for c in candidates:
        if not c.evaluated:
            continue
        s = ranking.score(c.verdict)
        if s is not None and s[0] > best_low:
            best_low = s[0]
        sp = ranking.best_speedup(c.verdict) if c.passed else None
        progress.append(
            {
                "n": len(progress) + 1,
                "id": c.id,
                "outcome": c.verdict.verdict.value if c.verdict else "",
                "speedup": sp.median if sp is not None else None,
                "best_low": best_low if best_low > -math.inf else None,
            }
        )
    speed_claims = [ranking.speed_claimed(c.verdict) for c in candidates if c.passed]
    return {
        **head,
        "best": None if best is None else _best(best),
        "candidates": len(candidates),
        "evaluated": len(progress),
        "verified": sum(c.passed for c in candidates),
        "rejected": sum(not c.passed for c in candidates),
        "ranking": "correctness alone: a verified candidate without a speed claim (the Triton interpreter's "
        "speed on a CPU says nothing about a kernel) ranks by correctness, the earliest first"
        if speed_claims and not all(speed_claims)
        else "lower 95% CI bound of the speedup over the best baseline",
        "candidate_list": [_listed(c) for c in candidates],
        "progress": progress,
        "turns": _turns(candidates, calls),
        "tokens_by_kind": _tokens_by_kind(calls),
        "gpu_seconds_by_outcome": _gpu_by_outcome(candidates),
        "rejected_before_eval": dict(_count(c.rejection.code for c in candidates if c.rejection is not None)),
    }


def _listed(c: Candidate) -> dict[str, Any]:
    """One candidate as the summary lists it: what happened to it and why."""
    v = c.verdict
    if c.rejection is not None:
        outcome, codes = "not evaluated", [c.rejection.code]
    elif v is None:
        outcome, codes = "no verdict", []
    else:
        outcome, codes = v.verdict.value, list(v.codes)
    barred = ranking.barred(c)
    return {
        "id": c.id,
        "turn": c.turn,
        "kind": c.kind,
        "outcome": outcome,
        "codes": codes,
        "flags": list(v.flags) if v is not None else [],
        "speedup": ranking.speedup_text(c) if c.passed else "",
        "repeat_of": c.duplicate_of,
        "never_chosen": list(barred),
        "idea": c.idea,
    }


def _best(c: Candidate) -> dict[str, Any]:
    v = c.verdict
    assert v is not None
    sp = ranking.best_speedup(v)
    return {
        "id": c.id,
        "flags": list(v.flags),
        "speedup": sp.median if sp else None,
        "ci95": list(sp.ci95) if sp and sp.ci95 else None,
        "sol_fraction": ranking.sol_fraction(c),
        "reward": v.reward,
    }


def _turns(candidates: list[Candidate], calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows: dict[int, dict[str, Any]] = defaultdict(
        lambda: dict(
            kind="",
            calls=0,
            failed_calls=0,
            input_tokens=0,
            output_tokens=0,
            dollars=0.0,
            llm_s=0.0,
            candidates=0,
            verified=0,
            rejected=0,
            gpu_s=0.0,
            best="",
        )
    )
    for r in calls:
        t = rows[r["turn"]]
        t["kind"] = r["kind"]
        t["calls"] += 1
        t["failed_calls"] += r["response"] is None
        t["input_tokens"] += r["input_tokens"]
        t["output_tokens"] += r["output_tokens"]
        t["dollars"] += r["cost_usd"] or 0.0
        t["llm_s"] += r["latency_s"]
    seen: list[Candidate] = []
    for c in candidates:
        t = rows[c.turn]
        t["kind"] = t["kind"] or c.kind
        t["candidates"] += 1
        t["verified"] += c.passed
        t["rejected"] += not c.passed
        t["gpu_s"] += c.gpu_s
        seen.append(c)
        best = ranking.best(seen)
        t["best"] = f"{best.id} {ranking.speedup_text(best)}" if best else "-"
    return [{"turn": k, **v} for k, v in sorted(rows.items())]


def _tokens_by_kind(calls: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = defaultdict(
        lambda: dict(calls=0, input=0, output=0, dollars=0.0, llm_s=0.0)
    )
    for r in calls:
        k = out[r["kind"]]
        k["calls"] += 1
        k["input"] += r["input_tokens"]
        k["output"] += r["output_tokens"]
        k["dollars"] += r["cost_usd"] or 0.0
        k["llm_s"] += r["latency_s"]
    return dict(out)


def _gpu_by_outcome(candidates: list[Candidate]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for c in candidates:
        if c.evaluated and c.verdict is not None:
            key = "pass" if c.passed else (c.verdict.codes[0] if c.verdict.codes else c.verdict.verdict.value)
            out[key] += c.gpu_s
    return dict(out)


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for i in items:
        out[i] += 1
    return out


def render_markdown(s: dict[str, Any]) -> str:
    best = s["best"]
    spend = s.get("spend", {})
    detail = s.get("stop_detail") or ""
    repeats = spend.get("repeats", 0)
    unit = _time_unit(s)
    lines = [
        f"# kernelproof optimize: {_md(s.get('task', ''))}",
        "",
        f"- run {_md(s.get('run_id', ''))}, model {_md(s.get('model', ''))}, "
        f"strategy {_md(s.get('strategy', ''))}",
        f"- device: {_md(s.get('device') or 'unknown')}",
        f"- stopped: {s.get('stop_reason', '')}" + (f" ({_prose(detail)})" if detail else ""),
        f"- candidates: {s['candidates']} ({s['evaluated']} evaluated, {s['verified']} verified, "
        f"{s.get('rejected', 0)} rejected"
        + (f", {repeats} repeats of an earlier answer" if repeats else "")
        + ")",
        "- best: "
        + ("none verified" if best is None else f"{best['id']}, {_speedup(best)}")
        + (f"; flags: {', '.join(best.get('flags') or [])}" if best and best.get("flags") else ""),
    ]
    if s.get("ranking"):
        lines.append(f"- ranked by {s['ranking']}")
    if spend:
        lines.append(
            f"- spent: {spend['input_tokens']} input + {spend['output_tokens']} output tokens, "
            + ("$? (no price known)" if s.get("price") is None else f"${spend['dollars']:.4f}")
            + f", {spend['gpu_seconds']:.1f} {unit}, {spend['live_calls']} live calls"
        )
    lines += _budget_lines(s)
    warnings = s.get("warnings") or []
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {_prose(w)}" for w in warnings]
    lines += [
        "",
        f"| turn | kind | calls | in tok | out tok | $ | LLM s | cands | verified | rejected | {unit} | best |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in s["turns"]:
        lines.append(
            f"| {t['turn']} | {t['kind']} | {t['calls']} | {t['input_tokens']} | {t['output_tokens']} | "
            f"{t['dollars']:.4f} | {t['llm_s']:.1f} | {t['candidates']} | {t['verified']} | {t['rejected']} | "
            f"{t['gpu_s']:.1f} | {t['best']} |"
        )
    lines += _candidate_lines(s)
    lines += ["", "| call kind | calls | in tok | out tok | $ | LLM s |", "|---|---|---|---|---|---|"]
    for kind, k in s["tokens_by_kind"].items():
        lines.append(
            f"| {kind} | {k['calls']} | {k['input']} | {k['output']} | {k['dollars']:.4f} | {k['llm_s']:.1f} |"
        )
    what = "Evaluation time" if unit != "GPU s" else "GPU time"
    lines += ["", f"| {what} by outcome | seconds |", "|---|---|"]
    lines += [f"| {k} | {v:.1f} |" for k, v in s["gpu_seconds_by_outcome"].items()]
    return "\n".join(lines) + "\n"


def _candidate_lines(s: dict[str, Any]) -> list[str]:
    """Every candidate: its outcome, reason codes and flags (ours), and its idea (the model's, inert)."""
    listed = s.get("candidate_list") or []
    if not listed:
        return []
    out = [
        "",
        "| candidate | kind | outcome | reason codes | flags | speedup | idea |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in listed:
        outcome = c["outcome"] + (f" (repeat of {c['repeat_of']})" if c.get("repeat_of") else "")
        if c.get("never_chosen"):
            outcome += " (never chosen)"
        out.append(
            f"| {c['id']} | {c['kind']} | {outcome} | {', '.join(c['codes']) or '-'} | "
            f"{', '.join(c['flags']) or '-'} | {c['speedup'] or '-'} | {markdown_code(c.get('idea', '')) or '-'} |"
        )
    return out


def _time_unit(s: dict[str, Any]) -> str:
    """The time column: GPU s where candidates were judged on a GPU, eval s on a CPU (not GPU time)."""
    return "eval s" if str(s.get("device_kind", "")) == "cpu" else "GPU s"


def _prose(text: Any) -> str:
    """Text that may quote a provider or a candidate, escaped so nothing in it renders."""
    return markdown_text(text, limit=PROSE_CHARS)


def _budget_lines(s: dict[str, Any]) -> list[str]:
    """Which budget was exceeded, by how much, and what made it happen (never a guessed cause)."""
    if s.get("budgets_held") is not False:
        return []
    exceeded = s.get("budgets_exceeded") or []
    causes = s.get("overrun_causes") or []
    lines = []
    for o in exceeded:
        lines.append(
            f"- **a budget was exceeded**: {o['limit']}: {_amount(o['limit'], o['spent'])} spent, "
            f"over the limit of {_amount(o['limit'], o['allowed'])}"
        )
    if not exceeded:
        lines.append("- **a budget was exceeded**")
    lines += [f"  - why: {_prose(c)}" for c in causes]
    return lines


def _amount(limit: str, value: float) -> str:
    if limit == "max_dollars":
        return f"${value:.4f}"
    if limit == "max_gpu_seconds":
        return f"{value:.1f} GPU s"
    unit = {"max_tokens": "tokens", "max_calls": "calls", "max_candidates": "candidates"}.get(limit, "")
    return f"{value:.0f} {unit}".strip()


def _md(text: Any) -> str:
    """A name as a code span outside a table (a heading or a list item)."""
    return markdown_code(text, table=False)


def _speedup(best: dict[str, Any]) -> str:
    if best["speedup"] is None:
        return "verified (not timed)"
    ci = best["ci95"]
    return f"{best['speedup']:.2f}x" + (f" [95% CI {ci[0]:.2f}-{ci[1]:.2f}]" if ci else "")


def rich_table(s: dict[str, Any]) -> Any:
    from rich.table import Table

    from kernelproof.console import line

    title = (
        f"{s.get('task', '')}: {s.get('strategy', '')} with {s.get('model', '')} on {s.get('device', '?')}"
    )
    table = Table(title=line(title))
    unit = _time_unit(s)
    # A figure is never split over lines (an 80-column terminal once showed one over three): the
    # numbers keep their width under short headers, and only the two text columns wrap, at words.
    for col in ("turn", "kind", "calls", "tokens", "$", "cands", "ok", "rej", unit, "best so far"):
        if col in ("kind", "best so far"):
            table.add_column(col, justify="left", overflow="fold", ratio=1)
        else:
            table.add_column(col, justify="right", no_wrap=True)
    for t in s["turns"]:
        table.add_row(
            str(t["turn"]),
            line(t["kind"]),
            str(t["calls"]),
            str(t["input_tokens"] + t["output_tokens"]),
            f"{t['dollars']:.4f}",
            str(t["candidates"]),
            str(t["verified"]),
            str(t["rejected"]),
            f"{t['gpu_s']:.1f}",
            line(t["best"]),
        )
    return table


def plot(s: dict[str, Any], path: str | Path) -> Path | None:
    """Best verified speedup against candidates evaluated, and tokens and GPU time per turn."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    fig = Figure(figsize=(10, 4), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax, ax2 = fig.subplots(1, 2)
    prog = s["progress"]
    xs = [p["n"] for p in prog]
    passed = [(p["n"], p["speedup"]) for p in prog if p["speedup"] is not None]
    if passed:
        ax.scatter(*zip(*passed), s=14, color="#1b9e4b", label="verified candidate (median)")
    steps = [(p["n"], p["best_low"]) for p in prog if p["best_low"] is not None]
    if steps:
        ax.step(*zip(*steps), where="post", color="#333333", label="best (lower 95% CI bound)")
    failed = [p["n"] for p in prog if p["speedup"] is None]
    if failed:
        ax.scatter(failed, [0] * len(failed), marker="x", s=14, color="#d1495b", label="rejected")
    ax.axhline(1.0, color="#999999", lw=0.8, ls="--")
    ax.set_xlabel("candidates evaluated")
    ax.set_ylabel("speedup over the best baseline")
    ax.set_xlim(0, max(xs, default=0) + 1)
    if prog:
        ax.legend(fontsize=8, loc="upper left")
    turns = s["turns"]
    tx = [t["turn"] for t in turns]
    ax2.bar(tx, [t["input_tokens"] + t["output_tokens"] for t in turns], color="#4c72b0", label="tokens")
    ax2.set_xlabel("turn")
    ax2.set_ylabel("tokens")
    ax3 = ax2.twinx()
    unit = _time_unit(s)
    ax3.plot(tx, [t["gpu_s"] for t in turns], color="#dd8452", marker="o", label=unit)
    ax3.set_ylabel("GPU seconds" if unit == "GPU s" else "evaluation seconds (CPU)")
    ax3.set_ylim(bottom=0)
    ax2.set_title(f"where tokens and {'GPU' if unit == 'GPU s' else 'evaluation'} time went", fontsize=9)
    out = Path(path)
    fig.savefig(out, format="png", metadata={"Software": None})
    return out
