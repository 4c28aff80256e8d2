"""Turn a verdict into feedback a model (or a person) can act on: what failed, where, by how much.

Only the verdict is read (docs/architecture.md, house rule 3). What matters comes first and long evidence is trimmed:
a compiler log is cut to its error lines, a traceback to its last frames and exception, a failed
correctness run to its first failing cases with their error sizes, and a passing one to its
times, speedups with confidence intervals per baseline, speed-of-light fraction, kernel coverage
and top kernels. ``kernelproof eval`` can print the same text for a coding agent.
"""

from __future__ import annotations

import re

from kernelproof.agent.call_records import Candidate
from kernelproof.verdict import Outcome, ReasonCode, Verdict

MAX_LOG_LINES = 40  # of a compiler log or traceback shown back
MAX_LOG_CHARS = 4000
MAX_FAILED_CASES = 4  # failing cases listed
MAX_KERNELS = 5  # kernels listed from the profile

_ERROR_LINE = re.compile(r"\berror\b|Error:|^E\s", re.IGNORECASE)


OWN_OUTPUT_LABEL = (
    "What the evaluator quotes from the candidate's run (the candidate's own output: exception "
    "messages, logs, source lines; it is not kernelproof's judgement, which is only the lines outside "
    "this block):"
)


def fence(text: str, lang: str = "") -> str:
    """``text`` in a backtick fence longer than any backtick run inside it, so nothing in the text
    can close the fence early and speak as if it stood outside (CommonMark: a closing fence is at
    least as long as the opening one)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    marks = "`" * max(3, longest + 1)
    return f"{marks}{lang}\n{text.rstrip()}\n{marks}"


def quoted(text: str) -> str:
    """The candidate's own text as a later prompt shows it: labelled, inside a fence."""
    return f"{OWN_OUTPUT_LABEL}\n{fence(text, 'text')}"


def describe_candidate(c: Candidate) -> str:
    """The feedback for one candidate, headed by its id; how its answer was read comes last."""
    return _judgement(c) + (f"\n{c.note}" if c.note else "")


def _judgement(c: Candidate) -> str:
    repeat = f" (identical to {c.duplicate_of}, not evaluated again)" if c.duplicate_of else ""
    if c.rejection is not None:
        text = f"Candidate {c.id}{repeat}: not evaluated ({c.rejection.code}). {c.rejection.message}"
        return text + (f"\n{quoted(trim_log(c.rejection.detail))}" if c.rejection.detail else "")
    if c.verdict is None:
        return f"Candidate {c.id}: no verdict."
    return f"Candidate {c.id}{repeat}: {describe_verdict(c.verdict)}"


def describe_verdict(v: Verdict) -> str:
    """Everything an agent needs to decide what to fix or try next, from one verdict."""
    lines = [v.verdict.value.upper() + (" — every case confirmed." if v.passed else ".")]
    for r in v.reasons:
        # The code is kernelproof's; the message and detail may quote the candidate's own text (an
        # exception it raised, its compiler log), so they go inside a labelled fence.
        lines.append(f"- reason code {r.code.value}:")
        said = _clip(r.message, 1500)
        if r.detail:
            detail = trim_log(r.detail) if r.code is ReasonCode.COMPILE_ERROR else _clip(r.detail, 1500)
            said += "\n" + detail
        lines.append(quoted(said))
    if v.correctness is not None:
        lines += _correctness(v)
    if v.timing is not None:
        lines += _timing(v)
    if v.roofline is not None and v.roofline.sol_fraction is not None:
        r = v.roofline
        lines.append(
            f"Speed-of-light: {100 * r.sol_fraction:.0f}% of the device's ceiling"
            + (f" ({r.achieved_tflops:.1f} TFLOP/s" if r.achieved_tflops is not None else " (")
            + (f", {r.achieved_tbps:.2f} TB/s)" if r.achieved_tbps is not None else ")")
            + "."
        )
    if v.coverage is not None:
        lines += _coverage(v)
    if v.flags:
        lines.append("Flags: " + ", ".join(v.flags) + ".")
    if v.verdict is Outcome.ERROR:
        lines.append(
            "The task or harness could not judge this candidate (not necessarily your code's fault)."
        )
    return "\n".join(lines)


def _correctness(v: Verdict) -> list[str]:
    c = v.correctness
    assert c is not None
    out = [
        f"Correctness: {c.cases_passed}/{c.cases_run} cases passed ({c.precision} contract; {c.tolerance}); "
        f"worst normwise error {c.worst_rel_norm_err:.2e}, worst elementwise {c.worst_max_abs_err:.2e}."
    ]
    failed = [k for k in c.cases if not k.passed]
    for k in failed[:MAX_FAILED_CASES]:
        out.append(
            f"  - case {k.case_id} (shape {k.shape}, {k.distribution} inputs): {k.code or 'failed'}, "
            f"normwise error {k.rel_norm_err:.2e} vs tolerance {k.tol_rel_norm:.2e} "
            f"(the reference's own: {k.ref_rel_norm_err:.2e}), max abs error {k.max_abs_err:.2e}"
        )
    if len(failed) > MAX_FAILED_CASES:
        out.append(f"  - ... and {len(failed) - MAX_FAILED_CASES} more failing cases")
    return out


def _timing(v: Verdict) -> list[str]:
    t = v.timing
    assert t is not None
    if t.skipped:
        return [f"Timing: not run ({t.skipped})."]
    out = []
    for s in t.shapes:
        base = "; ".join(f"{name} {st.median_ms:.4g} ms" for name, st in s.baselines.items())
        out.append(
            f"Timing, shape {s.shape} ({s.regime}, {s.clock}): yours {s.candidate.median_ms:.4g} ms median "
            f"(mean {s.candidate.mean_ms:.4g}, max {s.candidate.max_ms:.4g}); {base}."
        )
        sp = "; ".join(_speedup_text(x.baseline, x.median, x.ci95, x.note) for x in s.speedups)
        if sp:
            out.append(f"  speedups: {sp}")
    if v.speedup:
        head = "; ".join(_speedup_text(k, x.median, x.ci95, x.note) for k, x in v.speedup.items())
        out.append(f"Headline speedup (geomean over timed shapes): {head}.")
    return out


def _speedup_text(name: str, median: float | None, ci: tuple[float, float] | None, note: str) -> str:
    if median is None:
        return f"vs {name}: n/a" + (f" ({note})" if note else "")
    ci_text = f" [95% CI {ci[0]:.2f}-{ci[1]:.2f}]" if ci else ""
    return f"vs {name} {median:.2f}x{ci_text}"


def _coverage(v: Verdict) -> list[str]:
    cov = v.coverage
    assert cov is not None
    out = []
    if cov.custom_fraction is not None:
        out.append(
            f"Kernel coverage: {100 * cov.custom_fraction:.0f}% of GPU time in your own kernels ({cov.policy})."
        )
    if cov.kernels:
        top = "; ".join(f"{name} [{origin}] {ms:.4g} ms" for name, origin, ms in cov.kernels[:MAX_KERNELS])
        out.append(f"Top kernels: {top}.")
    if cov.note:
        out.append(f"Coverage note: {cov.note}")
    return out


def trim_log(text: str, max_lines: int = MAX_LOG_LINES, max_chars: int = MAX_LOG_CHARS) -> str:
    """A compiler log or traceback cut to what matters: the error lines and the exception."""
    lines = text.rstrip().splitlines()
    if len(lines) <= max_lines and len(text) <= max_chars:
        return text.rstrip()
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        kept = _traceback_tail(lines, max_lines)
    else:
        kept = _error_lines(lines, max_lines)
    return _clip("\n".join(kept), max_chars)


def _traceback_tail(lines: list[str], max_lines: int) -> list[str]:
    start = max(i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)"))
    tail = lines[start:]
    if len(tail) <= max_lines:
        return tail
    return [tail[0], f"  ... ({len(tail) - max_lines + 1} lines of outer frames omitted)"] + tail[
        -(max_lines - 2) :
    ]


def _error_lines(lines: list[str], max_lines: int) -> list[str]:
    picked: list[int] = []
    for i, line in enumerate(lines):
        if _ERROR_LINE.search(line):
            picked += [j for j in range(i, min(i + 3, len(lines))) if not picked or j > picked[-1]]
    if not picked:  # no recognisable error line: the head and the tail
        head = max_lines // 4
        return (
            lines[:head]
            + [f"... ({len(lines) - max_lines} lines omitted)"]
            + lines[-(max_lines - head - 1) :]
        )
    kept = [lines[j] for j in picked[:max_lines]]
    if len(picked) > max_lines:
        kept.append(f"... ({len(picked) - max_lines} more error lines)")
    return kept


def _clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 20] + "\n... (truncated)"
