"""Package data: device ceilings measured on real machines.

The physics stage and the reports place results against what a device can do. Measured ceilings
(copy bandwidth, large-GEMM throughput) are what a good kernel can reach; datasheet peaks are upper
bounds. Both ship as JSON files beside this module so nothing reads outside the package at run time.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

CEILINGS_SCHEMA = "kernelproof.ceilings/1"


def ceiling_names() -> list[str]:
    """Names of the shipped ceiling files (``h200`` for ``h200.json``)."""
    files = resources.files(__name__)
    return sorted(p.name[: -len(".json")] for p in files.iterdir() if p.name.endswith(".json"))


def load_ceilings(name: str) -> dict[str, Any]:
    """The ceilings document called ``name``; raises ``KeyError`` naming the known ones."""
    if name not in ceiling_names():
        raise KeyError(f"no ceilings named {name!r}; known: {', '.join(ceiling_names())}")
    doc = json.loads(resources.files(__name__).joinpath(f"{name}.json").read_text())
    if doc.get("schema") != CEILINGS_SCHEMA:
        raise ValueError(f"{name}.json is not a {CEILINGS_SCHEMA} document")
    return doc


def match_ceilings(device_text: str) -> dict[str, Any] | None:
    """The ceilings whose ``match`` strings occur in ``device_text`` (a device name), or None."""
    for name in ceiling_names():
        doc = load_ceilings(name)
        if any(m.lower() in device_text.lower() for m in doc.get("match", [])):
            return doc
    return None
