"""kernelproof: proves whether a GPU kernel is correct and how much faster it really is.

The public API, for RL trainers, agents and scripts::

    from kernelproof import EvalOptions, evaluate

    verdict = evaluate("task.py", "solution.py", EvalOptions(correctness_only=True))

Each name is imported on first use (PEP 562), so ``import kernelproof`` stays cheap: it does not
import torch, and a worker process that imports a kernelproof module does not load the API.
No module of kernelproof imports this package for a name: the version is in
:mod:`kernelproof._version`, and everything else in its own module.

``evaluate`` shares its name with the subpackage :mod:`kernelproof.evaluate` (the steps of one
evaluation). The package attribute is always the function; reach the subpackage by import
(``from kernelproof.evaluate import chain``, ``importlib.import_module``), never as
``kernelproof.evaluate.<module>`` or ``import kernelproof.evaluate.<module> as <name>``.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from kernelproof._version import __version__

_EXPORTS = {
    "evaluate": "kernelproof.api",
    "evaluate_many": "kernelproof.api",
    "aevaluate_many": "kernelproof.api",
    "compare": "kernelproof.api",
    "EvalOptions": "kernelproof.options",
    "Verdict": "kernelproof.verdict",
    "Outcome": "kernelproof.verdict",
    "ReasonCode": "kernelproof.verdict",
}

__all__ = [
    "EvalOptions",
    "Outcome",
    "ReasonCode",
    "Verdict",
    "__version__",
    "aevaluate_many",
    "compare",
    "evaluate",
    "evaluate_many",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kernelproof' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """This package's module type: ``evaluate`` is the API function, whatever gets imported.

    Importing the subpackage :mod:`kernelproof.evaluate` binds it as an attribute of its parent;
    with a plain module that would replace the function for everyone after the first such import
    (``from kernelproof import evaluate`` would then give a module). The binding is kept apart.
    """

    @property
    def evaluate(self) -> Any:
        return importlib.import_module("kernelproof.api").evaluate

    @evaluate.setter
    def evaluate(self, value: types.ModuleType) -> None:
        self.__dict__["_evaluate_package"] = value  # the import system binding the subpackage


sys.modules[__name__].__class__ = _Package
