"""Every module-level name the worker's own code reaches, so that replacing one is caught.

Python raises no audit event when a module attribute is assigned. Solution code could therefore
rebind ``torch.where`` or ``kernelproof.inputs.torch`` and run its own code inside the harness:
inside the fingerprint of a timed output, say, after the timed window has closed, where it could
compute the real result of a call that did no work inside the window. The harness's functions are
already checked by identity after every request; this widens that check to what they call.

The names are read from the harness's source, not listed by hand: for every kernelproof module
loaded in the worker, its own globals that are modules, classes, functions or dtypes, and every
attribute chain its code reads from a module (``torch.cuda.synchronize``, ``np.frombuffer``) or
imports inside a function (``from torch.profiler import profile``). Plain data (flags, counters,
caches) is left out: it may change, and the flags have their own check.

What it cannot see: a replacement that restores the original before the request ends. The check
runs after each request, as for the harness's own functions; against that, the parent's hidden
full re-check of timed outputs and its wall clock remain (docs/threat-model.md).
"""

from __future__ import annotations

import ast
import inspect
import sys
import time
import types

import torch

# Functions outside kernelproof whose identity the worker's judgement rests on: the clocks, and the
# torch calls around a timed call. Most are also read by name in the harness's source.
EXTERNAL_FUNCTIONS = (
    (time, "perf_counter"),
    (time, "perf_counter_ns"),
    (time, "monotonic"),
    (time, "time"),
    (torch, "equal"),
    (torch, "no_grad"),
    (torch.cuda, "synchronize"),
    (torch.cuda, "Event"),
    (torch.cuda, "_sleep"),
)


def harness_references(prefix: str = "kernelproof") -> list[tuple[object, str]]:
    """(owner, attribute) pairs to snapshot, from the loaded modules whose name starts with ``prefix``."""
    seen: set[tuple[int, str]] = set()
    out: list[tuple[object, str]] = []

    def add(owner: object, name: str) -> None:
        key = (id(owner), name)
        if key in seen or not _worth_checking(getattr(owner, name, None)):
            return
        seen.add(key)
        out.append((owner, name))

    for modname, module in sorted(sys.modules.items()):
        if module is None or not (modname == prefix or modname.startswith(prefix + ".")):
            continue
        for name in vars(module):
            if not name.startswith("__"):
                add(module, name)
        for owner, name in _read_from_modules(module):
            add(owner, name)
    return out


def harness_imports(prefix: str = "kernelproof") -> list[str]:
    """The modules named by an import statement anywhere in the loaded modules whose name starts
    with ``prefix``: the names the harness looks up in ``sys.modules`` when such a line runs inside
    a function (kernelproof.worker.checks.modules watches them)."""
    names: list[str] = []
    for modname, module in sorted(sys.modules.items()):
        if module is None or not (modname == prefix or modname.startswith(prefix + ".")):
            continue
        names += [name for name, _ in _source_reads(module)[1]]
    return list(dict.fromkeys(names))


def harness_functions(prefix: str = "kernelproof.worker") -> list[tuple[object, str]]:
    """The methods of the worker's own classes and :data:`EXTERNAL_FUNCTIONS`, to snapshot by identity.

    A method is reached through its class at call time, so replacing ``WorkerState.thread_state``
    or ``CudaClock.run`` would put solution code in the harness; module attributes are covered by
    :func:`harness_references`.
    """
    pairs: list[tuple[object, str]] = list(EXTERNAL_FUNCTIONS)
    try:
        import torch.profiler as tprof

        pairs += [(tprof, "profile"), (tprof, "record_function")]
    except ImportError:  # pragma: no cover - torch without the profiler
        pass
    for modname, module in sorted(sys.modules.items()):
        if module is None or not (modname == prefix or modname.startswith(prefix + ".")):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == modname:
                pairs += [(value, name) for name, attr in vars(value).items() if callable(attr)]
    return pairs


def _worth_checking(value: object) -> bool:
    return isinstance(value, (types.ModuleType, type, torch.dtype)) or callable(value)


def _read_from_modules(module: types.ModuleType) -> list[tuple[object, str]]:
    """Attribute chains the module's source reads from modules: ``a.b.c`` gives (a.b, "c") and (a, "b")."""
    chains, imports = _source_reads(module)
    names = vars(module)
    found: list[tuple[object, str]] = []
    for chain in chains:
        owner: object = names.get(chain[0])
        if not isinstance(owner, types.ModuleType):
            continue
        for part in chain[1:]:
            if not isinstance(owner, types.ModuleType) or not hasattr(owner, part):
                break
            found.append((owner, part))
            owner = getattr(owner, part)
    for modname, attrs in imports:
        source = sys.modules.get(modname)
        if source is not None:
            found += [(source, a) for a in attrs if hasattr(source, a)]
    return found


_PARSED: dict[str, tuple[list[tuple[str, ...]], list[tuple[str, tuple[str, ...]]]]] = {}


def _source_reads(
    module: types.ModuleType,
) -> tuple[list[tuple[str, ...]], list[tuple[str, tuple[str, ...]]]]:
    """The module's name chains and ``from X import ...`` lines, parsed once per process.

    Only the parse is kept (a worker warms it before it says hello, off the evaluation's path);
    the chains are resolved against the live modules at every call.
    """
    key = getattr(module, "__file__", None) or module.__name__
    if key in _PARSED:
        return _PARSED[key]
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        _PARSED[key] = ([], [])
        return _PARSED[key]
    # ``alias = mod.attr`` at module level is read once, at import: rebinding mod.attr later does
    # not reach the harness (that is why it binds aliases), and the alias itself is a checked global.
    aliases = {
        id(sub)
        for stmt in tree.body
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Attribute)
        for sub in ast.walk(stmt.value)
    }
    chains: list[tuple[str, ...]] = []
    imports: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in aliases:
            chain = _chain(node)
            if chain:
                chains.append(tuple(chain))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imports.append((node.module, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            imports += [(a.name, ()) for a in node.names]
    _PARSED[key] = (list(dict.fromkeys(chains)), imports)
    return _PARSED[key]


def _chain(node: ast.Attribute) -> list[str] | None:
    """``torch.cuda.synchronize`` -> ["torch", "cuda", "synchronize"]; None for anything not a name chain."""
    parts = []
    cur: ast.AST = node
    while isinstance(cur, ast.Attribute):
        parts.append(cur.attr)
        cur = cur.value
    if not isinstance(cur, ast.Name):
        return None
    parts.append(cur.id)
    return parts[::-1]
