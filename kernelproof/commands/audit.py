"""``kernelproof audit``: the negative controls run on a task or a folder of them, registered by
``kernelproof.cli``. A thin layer over :func:`kernelproof.api.audit` (docs/architecture.md, house
rule 10): a task the controls pass cannot be scored (exit 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kernelproof import cli_progress, exits
from kernelproof.commands.cli_options import Device, Seed, eval_options
from kernelproof.commands.output import out_console, write_json
from kernelproof.console import say
from kernelproof.preflight import require_writable


def audit_command(
    ctx: typer.Context,
    target: Annotated[Path, typer.Argument(help="A task file or a folder of them.")],
    device: Device = "auto",
    json_path: Annotated[
        str | None, typer.Option("--json", help="Write the audit as JSON ('-' for stdout).")
    ] = None,
    seed: Seed = None,
) -> None:
    """Run the negative controls on each task and shape: a task they pass cannot be scored (exit 1)."""
    require_writable(json_path)
    from kernelproof.api import audit, audit_targets
    from kernelproof.cli_progress import Progress
    from kernelproof.console import display_path
    from kernelproof.report.scores import plural

    out = out_console(json_path)
    audits = []
    targets = audit_targets(target)

    def kept() -> str:
        return f"{len(audits)} of {len(targets)} tasks audited (listed above; an audit stores nothing)"

    with Progress("audit", len(targets), console=out) as shown, cli_progress.keeping(kept):
        for a in audit(target, eval_options(ctx.params, db="")):
            audits.append(a)
            name = display_path(a.task)
            if a.error:
                shown.finished(("ERROR", "yellow"), f" {name}: {a.error}")
                continue
            shown.finished(("DEGENERATE", "red") if a.degenerate else ("ok", "green"), f" {name}")
            for r in a.shapes:
                if r.degenerate:
                    shown.note(f"    {r.variant}: {r.summary()}")
    docs = [a.to_json() for a in audits]
    write_json(json_path, docs if target.is_dir() else docs[0])
    degenerate = sum(a.degenerate for a in audits)
    broken = sum(bool(a.error) for a in audits)
    say(
        out,
        f"{plural(len(audits), 'task')} audited, {degenerate} degenerate"
        + (f", {broken} did not load" if broken else ""),
    )
    codes = [
        exits.EXIT_USAGE if a.error else exits.EXIT_REJECTED if a.degenerate else exits.EXIT_PASS
        for a in audits
    ]
    raise typer.Exit(exits.worst(codes))
