"""The layer contract holds: a module imports only from the layers below its own (docs/architecture.md).

The contract is written once, in pyproject.toml's [tool.importlinter], and checked by import-linter
here, so that an upward import fails CI. A second test makes sure the contract names every module:
a new module must be given its place in the layers (or in the worker program, which nothing in the
parent may import) before it can land.
"""

from __future__ import annotations

import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kernelproof

ROOT = Path(__file__).resolve().parents[1]
# Modules with no layer on purpose: the root package (it re-exports the api lazily and imports
# nothing else), the wire's package (it names its modules, which have their layers, and imports
# nothing) and the entry points of the worker and the sandbox (a process of its own: python -m).
UNPLACED = {
    "kernelproof",
    "kernelproof.wire",
    "kernelproof.worker",
    "kernelproof.worker.__main__",
    "kernelproof.sandbox.__main__",
}


def _contracts() -> list[dict]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and newer
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_no_module_imports_a_layer_above_its_own():
    pytest.importorskip("importlinter")
    lint = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    done = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_contract_places_every_module():
    named: set[str] = set()
    for contract in _contracts():
        for layer in contract.get("layers", []):
            named |= {m.strip() for part in layer.split("|") for m in part.split(":")}
        named |= set(contract.get("forbidden_modules", []))
    modules = {"kernelproof"} | {
        m.name for m in pkgutil.walk_packages(kernelproof.__path__, "kernelproof.") if "tests" not in m.name
    }
    unplaced = sorted(
        m for m in modules - UNPLACED if not any(m == n or m.startswith(n + ".") for n in named)
    )
    assert not unplaced, f"give these modules a layer in pyproject.toml [tool.importlinter]: {unplaced}"
