"""A tensor the harness reads carries no method of its own (I6; exploit class D4).

Why: a ``torch.Tensor`` object has an instance ``__dict__``, and a method of the class is a
non-data descriptor, so an attribute set on the object shadows it: after ``y.detach = f`` the
harness's own ``y.detach()`` (the fingerprint of a timed output, the copy to the parent) calls
``f``. The type is still exactly ``torch.Tensor`` and the class is unchanged, so neither the
output type check nor the watch on ``torch.Tensor``'s attributes (:mod:`.hooks`) sees it. An
output returned unwritten, with a ``detach`` that computed it, passed every case and every
fingerprint while its work ran after the window, and the steady batch, which never reads its
outputs, never paid it; an input given a ``to`` of its own answers the input check for itself.

So the harness looks at every tensor the solution has held (its outputs, the inputs it was
given) before it calls a method of one: an attribute whose name is one of ``torch.Tensor``'s is
``harness_hooked``. Other attributes (a tag a library hangs on a tensor) are left alone.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelproof.verdict import ReasonCode
from kernelproof.wire.replies import failure

_TENSOR_NAMES = frozenset(dir(torch.Tensor))  # bound at import, before any solution runs
_instance_dict = object.__getattribute__  # reads the object's own __dict__, not a shadow of it


def shadowed(t: Any) -> list[str]:
    """The names of ``torch.Tensor`` attributes that ``t``'s own ``__dict__`` shadows."""
    if not isinstance(t, torch.Tensor):
        return []
    try:
        own = _instance_dict(t, "__dict__")
    except AttributeError:
        return []
    if not issubclass(type(own), dict):
        return []
    keys = list(dict.__iter__(own))  # the stored keys, not a dict subclass's own __iter__
    return sorted(str(k) for k in keys if type(k) is str and k in _TENSOR_NAMES)


def check(tensors: list[Any], what: str) -> dict[str, Any] | None:
    """A failed reply for the first of ``tensors`` (``what`` names them) that shadows a method; else None."""
    for k, t in enumerate(tensors):
        names = shadowed(t)
        if names:
            where = f"{what} {k}" if len(tensors) > 1 else what
            return failure(
                ReasonCode.HARNESS_HOOKED,
                f"{where} carries its own {', '.join(names[:5])}: an attribute set on the tensor "
                "shadows torch.Tensor's method of that name",
                "the harness calls a tensor's methods (the fingerprint, the copy to the parent, the "
                "input check) after the timed window: one the solution set on the object runs its "
                "code there",
            )
    return None
