"""What a solution may leave active in the harness's own torch calls, found before each harness step.

Why: the worker's harness (drawing inputs, fingerprints, the checks, the copy to the parent) runs
in the solution's process, through the same torch. A ``TorchFunctionMode`` entered at import and
never left sees every later torch call, the harness's included, so the solution's code runs
inside a fingerprint after the timed window has closed: a matmul that returned an empty tensor
inside the window, and computed its product when the harness first touched the output, passed at
4.5x over eager on an idle H200 (issue 15). An aten kernel registered through ``torch.library``
does the same below Python, and a replaced ``torch.Tensor`` method or a trace hook likewise.

What is watched, against a snapshot taken before the solution is imported (:func:`watch`):

- function and dispatch modes (the mode stacks, the pre-dispatch stack, the infra modes);
- kernels registered through ``torch.library`` for an aten operator the harness's steps call
  (:data:`HARNESS_OPS`), recorded as they are registered, and the dispatcher entries of those
  operators compared with the snapshot (which also shows a kernel a native extension registered
  when it was loaded);
- the dispatch keys included or excluded for this thread (the Python dispatcher among them);
- every ``torch.Tensor`` attribute (one set there also shadows ``TensorBase``'s);
- trace and profile hooks (``sys``, ``threading``, ``sys.monitoring`` on 3.12) and ``gc.callbacks``;
- signal handlers (:mod:`.signals`), the ``sys.modules`` entries the harness imports from
  (:mod:`.modules`) and the builtins it calls (:mod:`.builtins_watch`).

A solution that leaves one of them active fails with ``harness_hooked``, naming it. The harness's
steps also run inside :func:`quiet`, with torch functions and dispatch modes disabled and the
cyclic collector off (so that no finaliser of the solution's garbage runs inside a step): one of
``DisableTorchFunction`` and ``_disable_current_modes`` alone does not silence both kinds of mode.

The checks call functions bound here at import, before any solution runs, and keep the snapshot in
a closure: rebinding ``torch._C._len_torch_function_stack`` does not blind them. Native code can
still do anything in this process, and only the OS layers stop it (docs/threat-model.md, I8).
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
from collections.abc import Callable, Iterator

import torch
from torch.utils import _python_dispatch

from kernelproof.worker.checks import builtins_watch, modules, signals

# Every aten operator the harness's own steps call, by exact overload: drawing inputs
# (kernelproof.inputs.draw, timed_inputs, case_inputs), fingerprints, checksums, the input check
# (same_bits), the copy to the parent (protocol), the handoff, poisoning, the L2 flush and the
# reused-address inputs, the copies kept of reused outputs, a batch's fingerprints and the chunked
# paths of large tensors. tests/worker/test_harness_hooks.py
# runs each of those steps under torch's profiler and a recording dispatch mode, and fails when
# one calls an operator missing here (operators called inside another's kernel are listed with
# every overload). Overloads this torch does not register are skipped at the snapshot.
HARNESS_OPS = (
    "aten::_local_scalar_dense",
    "aten::_to_copy",
    "aten::abs",
    "aten::abs_",
    "aten::add.Tensor",
    "aten::add_.Tensor",
    "aten::addmv_",
    "aten::all",
    "aten::all.dim",
    "aten::all.dims",
    "aten::as_strided",
    "aten::cat",
    "aten::cat.names",
    "aten::clamp",
    "aten::clamp_",
    "aten::clamp_min_",
    "aten::clone",
    "aten::copy_",
    "aten::detach",
    "aten::dot",
    "aten::empty.memory_format",
    "aten::empty_like",
    "aten::empty_strided",
    "aten::eq.Tensor",
    "aten::equal",
    "aten::fill_.Scalar",
    "aten::full_like",
    "aten::is_same_size",
    "aten::isfinite",
    "aten::item",
    "aten::linalg_vector_norm",
    "aten::lt.Scalar",
    "aten::matmul",
    "aten::mul.Tensor",
    "aten::mul_.Tensor",
    "aten::mv",
    "aten::narrow",
    "aten::ne.Scalar",
    "aten::normal_",
    "aten::pow.Tensor_Scalar",
    "aten::pow_.Scalar",
    "aten::rand.generator",
    "aten::randint.low_generator",
    "aten::randn.generator",
    "aten::random_",
    "aten::random_.from",
    "aten::random_.to",
    "aten::reshape",
    "aten::resize_",
    "aten::resolve_conj",
    "aten::resolve_neg",
    "aten::result_type.Scalar",
    "aten::result_type.Scalar_Scalar",
    "aten::result_type.Scalar_Tensor",
    "aten::result_type.Tensor",
    "aten::scalar_tensor",
    "aten::scatter_.reduce",
    "aten::scatter_.src",
    "aten::scatter_.value",
    "aten::scatter_.value_reduce",
    "aten::scatter_reduce_.two",
    "aten::select.int",
    "aten::sign",
    "aten::slice.Tensor",
    "aten::split.Tensor",
    "aten::sqrt",
    "aten::square",
    "aten::stack",
    "aten::sub.Tensor",
    "aten::sub_.Tensor",
    "aten::sum",
    "aten::to.device",
    "aten::to.dtype",
    "aten::to.other",
    "aten::uniform_",
    "aten::view",
    "aten::view.dtype",
    "aten::where.self",
    "aten::zero_",
    "aten::zeros",
)

# Bound at import, before any solution runs (the worker imports this module at start-up).
_dump = torch._C._dispatch_dump
_all_ops = torch._C._dispatch_get_all_op_names
_function_stack = torch._C._len_torch_function_stack
_dispatch_stack = torch._C._len_torch_dispatch_stack
_include_set = torch._C._dispatch_tls_local_include_set
_exclude_set = torch._C._dispatch_tls_local_exclude_set
_DisableTorchFunction = torch._C.DisableTorchFunction
_disable_current_modes = _python_dispatch._disable_current_modes
try:  # torch 2.2 and later: modes pushed below autograd, for export and compile
    from torch._ops import _len_torch_dispatch_stack_pre_dispatch as _pre_dispatch_stack
except ImportError:  # pragma: no cover - older torch has no such stack
    _pre_dispatch_stack = None
_infra_mode = getattr(torch._C, "_get_dispatch_mode", None)
_INFRA_KEYS = (
    tuple(getattr(torch._C, "_TorchDispatchModeKey", {}).__members__.values()) if _infra_mode else ()
)
_TENSOR = torch.Tensor
# Attributes Python itself caches on a class: copyreg stores __slotnames__ the first time an
# instance is pickled (torch.save of a tensor), which is no replaced method.
PYTHON_CACHES = frozenset({"__slotnames__"})
_monitoring = getattr(sys, "monitoring", None)  # Python 3.12


def watch(ops: tuple[str, ...] = HARNESS_OPS, imported: tuple[str, ...] = ()) -> Callable[[bool], list[str]]:
    """Snapshot what the harness's torch calls rely on now, and start recording ``torch.library``
    kernels registered for those operators; the returned function names what has changed since
    (an empty list when nothing has).

    Call it once, before the solution is imported. Called with ``full=False`` it skips the
    comparison of the dispatcher's tables (about 20 us an operator: after every timed call that
    would cost more than the checks it protects); the recorded registrations still show there,
    at no cost. The snapshot lives in the returned closure, out of the solution's reach without
    frame walking (which the audit hook forbids).
    """
    known = set(_all_ops())
    tables = {op: _dump(op) for op in ops if op in known}
    registered = _record_registrations(frozenset(op.split(".")[0] for op in ops))
    keys = (str(_include_set()), str(_exclude_set()))
    methods = dict(vars(_TENSOR))  # a method set on torch.Tensor also shadows TensorBase's
    hooks = _hook_state()
    callbacks = list(gc.callbacks)
    handlers = signals.watch()
    replaced_modules = modules.watch(imported)
    replaced_builtins = builtins_watch.watch()

    def left_active(full: bool = True) -> list[str]:
        found = _modes() + list(registered)
        if full:
            found += [f"an override of {op}" for op, table in tables.items() if _dump(op) != table]
        if (str(_include_set()), str(_exclude_set())) != keys:
            found.append("a change to the dispatch keys included or excluded for this thread")
        attrs = vars(_TENSOR)
        if attrs != methods:  # one comparison in C; the names only when something differs
            changed = {n for n in set(attrs) | set(methods) if attrs.get(n) is not methods.get(n)}
            if changed <= PYTHON_CACHES and all(n in attrs for n in changed):
                methods.update((n, attrs[n]) for n in changed)  # Python's own cache: seen, not a hook
            found += [f"a replaced torch.Tensor.{n}" for n in sorted(changed - PYTHON_CACHES)]
        found += [f"a {name} hook" for name, now in _hook_state().items() if now != hooks[name]]
        if len(gc.callbacks) != len(callbacks) or any(a is not b for a, b in zip(gc.callbacks, callbacks)):
            found.append("a gc callback")
        found += handlers() + replaced_modules(full) + replaced_builtins(full)
        return list(dict.fromkeys(found))

    return left_active


# Dispatch keys whose kernels run for the harness's dense CPU and CUDA tensors outside any mode.
# A kernel for Meta, Python, Functionalize, an autocast key (off unless the thread's excluded keys
# change, which is checked) or another backend never runs in a harness step.
_EAGER_KEYS = ("CPU", "CUDA", "Autograd", "Composite", "ADInplaceOrView", "BackendSelect")


def _reaches_eager(key: object) -> bool:
    name = str(getattr(key, "name", key) or "")
    return name == "" or name.startswith(_EAGER_KEYS) or name.endswith(("CPU", "CUDA"))


_REGISTERING = ("impl", "impl_with_aoti_compile")  # _DispatchModule methods that put a kernel on an operator


def _record_registrations(watched: frozenset[str]) -> list[str]:
    """Record, from now on, every kernel registered for a watched operator at a key the harness's
    tensors reach; returns the (growing) list of what was registered.

    Every registration from Python goes through ``torch._C._dispatch_library`` and a method of the
    ``_DispatchModule`` it returns (``torch.library.Library.impl`` included), so both are wrapped
    here, before the solution runs; the originals are kept only in this closure. The record is
    made when the kernel is registered, so a kernel that removes itself after running inside a
    harness step is still named at the next check, before any other step runs.
    """
    seen: list[str] = []
    namespaces: dict[int, str] = {}  # id(module) -> its namespace, for modules made from now on
    make_library = torch._C._dispatch_library
    module = torch._C._DispatchModule

    def dispatch_library(kind, ns, *args, **kwargs):
        made = make_library(kind, ns, *args, **kwargs)
        namespaces[id(made)] = str(ns)
        return made

    def note(lib: object, name: object, key: object) -> None:
        if not isinstance(name, str) or not _reaches_eager(key):
            return
        # A module made before the snapshot (torch's own aten libraries) has an unknown namespace:
        # an unqualified name is taken to be aten's.
        qualified = name if "::" in name else f"{namespaces.get(id(lib), 'aten')}::{name}"
        if qualified.split(".")[0] in watched:
            seen.append(f"a torch.library kernel for {qualified} ({getattr(key, 'name', key)})")

    def wrap(original):
        def registering(self, *args, **kwargs):
            note(
                self,
                args[0] if args else kwargs.get("name"),
                args[1] if len(args) > 1 else kwargs.get("dispatch"),
            )
            return original(self, *args, **kwargs)

        return registering

    for attr in _REGISTERING:
        if attr in vars(module):
            setattr(module, attr, wrap(vars(module)[attr]))
    torch._C._dispatch_library = dispatch_library
    return seen


def guarded() -> list[tuple[object, str]]:
    """The attributes :func:`watch` replaced, for the identity check of the harness's functions."""
    module = torch._C._DispatchModule
    return (
        [(torch._C, "_dispatch_library")]
        + [(module, a) for a in _REGISTERING if a in vars(module)]
        + signals.guarded()
    )


def _modes() -> list[str]:
    """The torch modes active now (the harness itself runs none outside :func:`quiet`)."""
    found = []
    if _function_stack():
        found.append(f"{_function_stack()} torch function mode(s)")
    if _dispatch_stack():
        found.append(f"{_dispatch_stack()} torch dispatch mode(s)")
    if _pre_dispatch_stack is not None and _pre_dispatch_stack():
        found.append(f"{_pre_dispatch_stack()} pre-dispatch mode(s)")
    found += [f"a {key.name.lower()} infra mode" for key in _INFRA_KEYS if _infra_mode(key) is not None]
    return found


def _hook_state() -> dict[str, object]:
    """Every trace or profile hook Python offers, by name (None where none is set)."""
    state: dict[str, object] = {
        "sys.settrace": sys.gettrace(),
        "sys.setprofile": sys.getprofile(),
        "threading.settrace": getattr(threading, "_trace_hook", None),
        "threading.setprofile": getattr(threading, "_profile_hook", None),
    }
    if _monitoring is not None:
        for tool in range(6):  # sys.monitoring's tool ids
            state[f"sys.monitoring tool {tool}"] = _monitoring.get_tool(tool)
    return state


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """A harness step: torch function and dispatch modes off, the cyclic collector off."""
    with collector_off(), _DisableTorchFunction(), _disable_current_modes():
        yield


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """The cyclic collector off, and back as it was at the end.

    Why: a collection runs in whatever code allocates, and the finaliser of a collected object of
    the solution's runs there: after ``gc.set_threshold(3)`` the harness's first allocations after
    a timed window (its checks, its message to the parent) ran a ``__del__`` that computed the
    call's output before its fingerprint (d4_gc_finaliser_deferral). A timed batch runs with the
    collector off from its start to its reply; :func:`kernelproof.worker.calls.call` puts back the
    state it found, so a solution's ``gc.enable()`` ends with its call.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
