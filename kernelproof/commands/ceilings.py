"""``kernelproof ceilings``: the device's measured copy bandwidth and matmul peaks beside its
datasheet, registered by ``kernelproof.cli``. A thin layer over :func:`kernelproof.api.ceilings`."""

from __future__ import annotations

import contextlib
import sys
from typing import Annotated

import typer

from kernelproof.console import make_console, say


def ceilings_command(
    device: Annotated[str, typer.Option("--device", help="cuda | cuda:N")] = "cuda",
    refresh: Annotated[bool, typer.Option("--refresh", help="Measure again even if cached.")] = False,
) -> None:
    """Measure (once per device model) copy bandwidth and matmul peaks; show them beside the datasheet."""
    from kernelproof.api import ceilings

    console = make_console()
    with (
        console.status("measuring the device's ceilings...")
        if sys.stdout.isatty()
        else contextlib.nullcontext()
    ):
        found = ceilings(device, refresh=refresh)
    sheet = f" (datasheet {found.datasheet_tbps} TB/s)" if found.datasheet_tbps is not None else ""
    say(console, f"{found.name}: copy {found.copy_tbps:.2f} TB/s{sheet}")
    for unit, tflops in found.matmul_tflops.items():
        sheet = f" (datasheet {found.datasheet_tflops[unit]})" if unit in found.datasheet_tflops else ""
        say(console, f"  matmul {unit}: {tflops:.0f} TFLOP/s{sheet}")
    say(console, f"{'measured now, cached' if found.measured_now else 'cached'} at {found.cache_path}")
