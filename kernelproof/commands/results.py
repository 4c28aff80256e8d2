"""``kernelproof results``: the stored verdicts, newest first, registered by ``kernelproof.cli``.
A thin layer over :func:`kernelproof.api.results` (docs/architecture.md, house rule 10)."""

from __future__ import annotations

from typing import Annotated

import typer

from kernelproof.commands.cli_options import Db
from kernelproof.commands.output import out_console, write_json
from kernelproof.console import WHOLE_LINE_CHARS, say
from kernelproof.preflight import require_writable


def results_command(
    task: Annotated[str | None, typer.Option("--task", help="Filter: substring of the task path.")] = None,
    solution: Annotated[
        str | None, typer.Option("--solution", help="Filter: substring of the solution path.")
    ] = None,
    outcome: Annotated[str | None, typer.Option("--verdict", help="Filter: pass | fail | error.")] = None,
    code: Annotated[
        str | None, typer.Option("--code", help="Filter: a reason code (docs/verdict.md).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="Show at most this many.")] = 50,
    db: Db = None,
    json_path: Annotated[
        str | None, typer.Option("--json", help="Write the matching verdicts as JSON ('-' for stdout).")
    ] = None,
) -> None:
    """List stored verdicts, newest first."""
    require_writable(json_path)
    from kernelproof.api import results
    from kernelproof.console import display_path, results_table
    from kernelproof.verdict import from_json

    found = results(task=task, solution=solution, outcome=outcome, code=code, limit=limit, db=db)
    write_json(json_path, list(found.documents))
    out = out_console(json_path)
    if json_path is None:
        out.print(results_table([from_json(d) for d in found.documents], width=out.width))
    # how many shown of how many stored, then one line per row that does not verify
    for text in found.note.replace(found.path, display_path(found.path)).splitlines():
        say(out, text, limit=WHOLE_LINE_CHARS)
