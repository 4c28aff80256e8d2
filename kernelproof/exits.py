"""The command line's exit codes: one table for every verb, and how a result or an error maps to it.

Why one table: a script that runs ``kernelproof`` must tell "the candidate is wrong" (1) from "I
called it wrongly" (2) from "kernelproof broke" (3) whatever the verb, and a verb over many items
(``bench``, ``certify``, ``audit`` of a folder) reports the worst of them, so one bad item in a
hundred is not lost in a 0.
"""

from __future__ import annotations

from collections.abc import Iterable

from kernelproof.errors import EXIT_INTERNAL, EXIT_PROVIDER, EXIT_REJECTED, EXIT_USAGE, KernelproofError
from kernelproof.verdict import Verdict

EXIT_PASS = 0
EXIT_INTERRUPTED = 130  # the shell's convention for SIGINT; not a verdict of anything

# (code, meaning) in the order --help, the README and docs print them.
TABLE = (
    (EXIT_PASS, "pass: the candidate was accepted, the claim holds, the verb did what it was asked"),
    (EXIT_REJECTED, "rejected: the candidate failed, a task failed its audit, or a claim does not hold"),
    (EXIT_USAGE, "a bad task or usage: a missing file, a bad option, a task that does not load"),
    (EXIT_INTERNAL, "kernelproof's own failure (an internal_error verdict too): please report it"),
    (EXIT_PROVIDER, "optimize only: the LLM provider failed (its calls kept failing after their retries)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
)

# Error verdicts whose cause is the task (or the task on this device, or this machine), not kernelproof.
TASK_CODES = frozenset({"task_error", "degenerate_task", "too_large", "environment"})


def help_text() -> str:
    """The table as the epilog of --help (Typer keeps the line breaks of a block set off by \\b)."""
    rows = "\n".join(f"  {code:>3}  {meaning}" for code, meaning in TABLE)
    return f"\b\nExit codes (every verb; a verb over many items exits with the worst):\n{rows}"


def for_outcome(outcome: str, codes: Iterable[str]) -> int:
    """The exit code of one verdict, from its outcome and reason codes (as in the JSON document)."""
    if outcome == "pass":
        return EXIT_PASS
    if outcome == "fail":
        return EXIT_REJECTED
    codes = set(codes)
    if "internal_error" not in codes and codes & TASK_CODES:
        return EXIT_USAGE
    return EXIT_INTERNAL  # internal_error, or anything else that left no judgement (a lost Ray worker)


def of_verdict(verdict: Verdict) -> int:
    return for_outcome(verdict.verdict.value, verdict.codes)


def of_document(doc: dict) -> int:
    """The exit code of a verdict JSON document (certificates and stores hold these)."""
    return for_outcome(str(doc.get("verdict")), [str(r.get("code")) for r in doc.get("reasons") or ()])


def of_error(exc: BaseException) -> int:
    """The exit code of an exception that reached the command line: its class says (errors.py)."""
    return int(exc.exit_code) if isinstance(exc, KernelproofError) else EXIT_INTERNAL


def worst(codes: Iterable[int]) -> int:
    """The exit code of a verb over many items: the highest, so 3 (broken) outranks 2 and 1."""
    return max(codes, default=EXIT_PASS)
