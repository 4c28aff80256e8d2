"""Launches of the solution's own kernels on the CPU, marked for the profiler and counted by the harness.

Why: on a GPU, launch accounting reads the device's kernels (CUPTI); on the CPU there are none.
Triton's interpreter (TRITON_INTERPRET=1) runs a kernel as Python over NumPy, with ATen ops of its
own on every launch (argument copies), and calls no launch hooks. Without a mark, a try/except
that falls back to PyTorch passed on the CPU with a triage flag only (tests/exploits, E2).

So, before the solution is imported (:func:`install`, from :func:`kernelproof.worker.loading.arm`),
every launch path is wrapped at a stable public point:

- ``InterpretedFunction.run``: what ``kernel[grid](...)`` calls in interpreter mode, for plain,
  autotuned and heuristics-wrapped kernels alike (Triton 3.x: ``KernelInterface.__getitem__``
  returns ``lambda *a, **k: self.run(grid=grid, warmup=False, *a, **k)``);
- ``torch.utils.cpp_extension.load_inline`` and ``load``: the module they return has each of its
  functions wrapped, so a call of a compiled extension function on the CPU is a launch too
  (``kernelproof.native`` launches CUDA cubins only, and never runs on the CPU). The custom
  operators the build registered (``TORCH_LIBRARY``: a library loaded with ``is_python_module=False``,
  or a module that registers ops besides its bindings) are called through ``torch.ops.<ns>.<op>``,
  never through the module: each new operator's packet in ``torch.ops`` is wrapped the same way
  (:class:`CountedOp`), its overloads (``.default``) too.

Each launch runs inside a ``record_function`` range named ``kernelproof.launch:<kind>:<name>``,
so the ATen ops an interpreted launch runs can be told apart from the forward's own; and the
harness counts every launch in a list of its own. The profile request compares the two: a range
with that prefix that the harness did not open (a solution naming its own range so) fails. Only a
launch that returned counts as one (a launch that raises ran nothing: the E2 fallback's call).

If a wrap cannot be installed (no Triton, a Triton without ``InterpretedFunction.run``), the
reason is kept and the parent decides nothing from the profile: the coverage record says why.
The wrapped entry points are snapshotted by identity with the rest of the harness
(:func:`entry_points`), so a solution that restores or replaces one is caught after that request.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch.autograd.profiler import record_function

PREFIX = "kernelproof.launch:"  # every launch range's name starts so: <kind>:<kernel name> follows
TRITON = "triton"  # an interpreted Triton launch
EXTENSION = "extension"  # a call of a compiled extension function (load_inline / load)


@dataclass
class Launches:
    """The wraps this worker installed, and the launches seen while recording."""

    installed: tuple[str, ...] = ()  # entry points wrapped, e.g. "InterpretedFunction.run"
    missing: str = ""  # why launches cannot be marked here ("" when the Triton wrap is in place)
    recording: list[bool] = field(default_factory=lambda: [False])
    # [kind:name, returned] per launch while recording; every launch, returned or not, opened a range
    seen: list[list[Any]] = field(default_factory=list)

    def start(self) -> None:
        self.seen.clear()
        self.recording[0] = True

    def stop(self) -> list[tuple[str, bool]]:
        """The launches since :meth:`start`: (kind:name, whether it returned)."""
        self.recording[0] = False
        out = [(str(name), bool(returned)) for name, returned in self.seen]
        self.seen.clear()
        return out


def install() -> Launches:
    """Wrap every launch path this process has; call before any solution code runs."""
    marks = Launches()
    installed: list[str] = []
    missing = ""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except Exception as exc:  # noqa: BLE001 - no Triton, or one without an interpreter
        missing = f"Triton's interpreter cannot be imported ({type(exc).__name__}: {exc})"
    else:
        run = vars(InterpretedFunction).get("run")  # its own launcher, not KernelInterface's stub
        if callable(run):
            InterpretedFunction.run = _marked_launch(run, marks)
            installed.append("InterpretedFunction.run")
        else:
            missing = "this Triton's InterpretedFunction has no run method to wrap"
    try:
        from torch.utils import cpp_extension as ce

        for name in ("load_inline", "load"):
            setattr(ce, name, _marked_loader(getattr(ce, name), marks))
            installed.append(f"cpp_extension.{name}")
    except Exception:  # noqa: BLE001 - no extensions can be built here: nothing to mark
        pass
    marks.installed = tuple(installed)
    marks.missing = missing
    return marks


def entry_points() -> list[tuple[object, str]]:
    """(owner, attribute) of every wrapped entry point, for the worker's identity snapshot."""
    pairs: list[tuple[object, str]] = []
    try:
        from triton.runtime.interpreter import InterpretedFunction

        pairs.append((InterpretedFunction, "run"))
    except Exception:  # noqa: BLE001
        pass
    try:
        from torch.utils import cpp_extension as ce

        pairs += [(ce, "load_inline"), (ce, "load")]
    except Exception:  # noqa: BLE001
        pass
    return pairs


def _marked_launch(run: Callable[..., Any], marks: Launches) -> Callable[..., Any]:
    """``InterpretedFunction.run`` inside a launch range, counted once it returns."""

    @functools.wraps(run)
    def marked_run(self, *args, **kwargs):
        name = f"{TRITON}:{getattr(getattr(self, 'fn', None), '__name__', '?')}"
        return _counted(marks, name, run, (self, *args), kwargs)

    return marked_run


def _marked_loader(load: Callable[..., Any], marks: Launches) -> Callable[..., Any]:
    """load_inline / load whose returned module's functions are launches."""

    @functools.wraps(load)
    def marked_load(*args, **kwargs):
        before = _operator_names()
        module = load(*args, **kwargs)
        if isinstance(module, types.ModuleType):
            for attr, value in list(vars(module).items()):
                if not attr.startswith("_") and isinstance(value, types.BuiltinFunctionType):
                    setattr(module, attr, _marked_function(value, attr, marks))
        for qualified in sorted(_operator_names() - before):
            _mark_operator(qualified, marks)
        return module

    return marked_load


# Namespaces of torch's own operators: a build that defines an operator there is not marked (the
# harness calls them; an override of one is harness_hooked, kernelproof.worker.checks.hooks).
TORCH_NAMESPACES = frozenset({"aten", "prim", "prims", "_c10d_functional", "c10d"})


def _operator_names() -> set[str]:
    """Every operator the dispatcher knows now, as ``ns::name`` (overload names dropped)."""
    import torch

    try:
        names = torch._C._dispatch_get_all_op_names()
    except Exception:  # noqa: BLE001 - a torch without it: custom operators go unmarked
        return set()
    return {str(n).split(".", 1)[0] for n in names}


def _mark_operator(qualified: str, marks: Launches) -> None:
    """Put a counted packet for the new operator ``ns::name`` where ``torch.ops.ns.name`` finds it."""
    import torch

    ns, _, name = qualified.partition("::")
    if not ns or not name or ns in TORCH_NAMESPACES:
        return
    try:
        namespace = getattr(torch.ops, ns)
        packet = getattr(namespace, name)
    except (AttributeError, RuntimeError):
        return
    if not isinstance(packet, CountedOp):
        setattr(namespace, name, CountedOp(packet, f"{EXTENSION}:{qualified}", marks))


class CountedOp:
    """A custom operator of the solution's build, called through ``torch.ops``: each call is a launch.

    Stands in for the operator's packet in its ``torch.ops`` namespace (where torch caches packets);
    attribute reads go to the packet, and an overload read from it (``.default``) is counted too.
    """

    def __init__(self, op: Any, label: str, marks: Launches) -> None:
        self._op, self._label, self._marks = op, label, marks

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _counted(self._marks, self._label, self._op, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        import torch

        attr = getattr(self._op, name)
        if isinstance(attr, torch._ops.OpOverload):
            return CountedOp(attr, self._label, self._marks)
        return attr

    def __repr__(self) -> str:
        return repr(self._op)


def _marked_function(fn: Callable[..., Any], name: str, marks: Launches) -> Callable[..., Any]:
    label = f"{EXTENSION}:{name}"

    @functools.wraps(fn)
    def marked(*args, **kwargs):
        return _counted(marks, label, fn, args, kwargs)

    return marked


def _counted(marks: Launches, label: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """One launch: while recording, inside a ``PREFIX + label`` range and counted, returned or not."""
    if not marks.recording[0]:
        return fn(*args, **kwargs)
    entry: list[Any] = [label, False]
    marks.seen.append(entry)
    with record_function(PREFIX + label):
        out = fn(*args, **kwargs)
    entry[1] = True
    return out
