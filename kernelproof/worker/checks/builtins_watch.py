"""The builtins the harness calls are Python's own (D4).

Why: a name the harness's code does not define itself (``type``, ``isinstance``, ``issubclass``,
``len``, ``any``) is looked up in the module's globals and then in ``builtins`` every time the line
runs, and both are plain dicts the solution may write without an audit event. A solution that set
``builtins.issubclass`` had its code run at the harness's first look at each output, after the
timed window (d4_builtins_patch); one that set ``type`` on a harness module could answer the
output type check for itself. The identity check of the harness's references
(:mod:`kernelproof.worker.surface`) snapshots the names a module has, not names added later.

What is watched: every entry of ``builtins`` by identity, and no kernelproof module given a new
global under a builtin's name. Either is ``harness_hooked``. The quick check (after every timed
call) looks at the worker's own modules and :mod:`kernelproof.inputs`; the full one at every
kernelproof module.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Callable

QUICK_MODULES = ("kernelproof.worker", "kernelproof.inputs")  # what runs between a window and its fingerprint


def watch() -> Callable[[bool], list[str]]:
    """Snapshot ``builtins`` and the kernelproof modules' names now; the returned function names
    what was replaced or added since (``full``: every kernelproof module, else the quick ones)."""
    table = vars(builtins)
    snapshot = dict(table)
    names = frozenset(snapshot)
    harness = [(n, m) for n, m in list(sys.modules.items()) if n.startswith("kernelproof") and m is not None]
    known = {n: frozenset(vars(m)) for n, m in harness}
    quick = [(n, m) for n, m in harness if n.startswith(QUICK_MODULES)]

    def replaced(full: bool = True) -> list[str]:
        found = [f"a replaced builtin {k}" for k, v in snapshot.items() if table.get(k, table) is not v]
        for modname, module in harness if full else quick:
            added = (vars(module).keys() - known[modname]) & names
            found += [f"{modname}.{k} over the builtin" for k in sorted(added)]
        return found

    return replaced
