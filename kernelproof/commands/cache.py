"""``kernelproof cache info|clear``: the build cache, from the command line (exit codes as in cli.py)."""

from __future__ import annotations

import datetime
import json
from typing import Annotated

import typer

from kernelproof import exits
from kernelproof.build import cache_clear, cache_info, default_cache_root

cache_app = typer.Typer(
    help="The build cache: compiled solutions and precompiled torch headers.",
    no_args_is_help=True,
    rich_markup_mode=None,  # click's help, as every verb's (kernelproof/cli.py says why)
)

_Root = Annotated[
    str | None,
    typer.Option(
        "--root", help="Cache root (default: $KERNELPROOF_CACHE_DIR or ~/.cache/kernelproof/builds)."
    ),
]


@cache_app.command("info", short_help="Entries, sizes and precompiled headers.", epilog=exits.help_text())
def info_command(
    root: _Root = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
) -> None:
    """Entries, sizes and precompiled headers in the build cache."""
    doc = cache_info(root or default_cache_root())
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    typer.echo(f"root         {doc['root']}")
    typer.echo(f"entries      {doc['entries']} ({_mib(doc['entry_bytes'])})")
    typer.echo(f"pch          {_mib(doc['pch_bytes'])}")
    if doc["entries"]:
        backends = ", ".join(f"{k or '?'} {v}" for k, v in sorted(doc["backends"].items()))
        typer.echo(f"backends     {backends}")
        typer.echo(f"oldest       {_when(doc['oldest'])}")
        typer.echo(f"newest       {_when(doc['newest'])}")


@cache_app.command("clear", short_help="Remove every entry and header.", epilog=exits.help_text())
def clear_command(root: _Root = None) -> None:
    """Remove every entry and precompiled header (the next builds start cold)."""
    where = root or default_cache_root()
    n = cache_clear(where)
    typer.echo(f"removed {n} entries from {where}")


def _mib(n: object) -> str:
    return f"{int(n or 0) / 2**20:.1f} MiB"


def _when(t: object) -> str:
    if t is None:
        return "-"
    return datetime.datetime.fromtimestamp(float(t)).isoformat(timespec="seconds")
