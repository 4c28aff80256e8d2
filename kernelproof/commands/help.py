"""The list of verbs in ``kernelproof --help``: a line each that fits 80 columns."""

from __future__ import annotations

import typer

# Each verb's line in ``kernelproof --help``, short enough for 80 columns (click cuts a longer
# first sentence with "..."); a verb's own --help has its whole text.
SUMMARIES = {
    "eval": "Evaluate one solution against its task: one verdict.",
    "bench": "Evaluate a folder of tasks with their solutions; fast_p.",
    "audit": "Run the negative controls on tasks: can they be scored?",
    "results": "List stored verdicts, newest first.",
    "compare": "Paired speedup of solution B over solution A.",
    "ceilings": "Measure the device's copy bandwidth and matmul peaks.",
    "report": "Write an HTML and/or Markdown report of verdicts.",
    "certify": "Run a solution several times; a signed certificate.",
    "verify": "Check a certificate's signature and claim; re-run it.",
    "keys": "Create your certificate signing key; show its public key.",
    "optimize": "Let an LLM write and improve kernels for a task.",
    "serve": "Serve verdicts, rewards and feedback over HTTP to RL trainers.",
    "cache": "The build cache: compiled solutions and torch headers.",
}


def summarise(app: typer.Typer) -> None:
    """Give each verb of ``app`` its line in the list (a verb that has one keeps it)."""
    for info in [*app.registered_commands, *app.registered_groups]:
        if info.name in SUMMARIES and not info.short_help:
            info.short_help = SUMMARIES[info.name]
