"""Where a verb's output goes: its consoles, made at each call, and its ``--json`` document.

Made at each call, not at import: a console takes its width (COLUMNS) and whether it is a terminal
when it is made, and a run in a process that ran others (a notebook, a test) must see its own."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernelproof.console import make_console
from kernelproof.errors import UsageError


def out_console(json_path: str | None):
    """Where the human-readable output goes: stdout, unless ``--json -`` gave stdout to the JSON."""
    return make_console(stderr=json_path == "-")


def write_json(path: str | None, doc: object) -> None:
    """Write ``doc`` to ``--json`` PATH ('-': stdout); nothing without one."""
    if not path:
        return
    text = json.dumps(doc, indent=2, allow_nan=False)
    if path == "-":
        sys.stdout.write(text + "\n")
        return
    try:
        Path(path).write_text(text + "\n")
    except OSError as exc:  # checked before the run (require_writable); this is what changed since
        raise UsageError(f"cannot write --json {path}: {exc.strerror or exc}") from None
