"""One JSON encoding for the numbers JSON cannot hold: inf, -inf and nan travel as strings.

JSON (RFC 8259) has no infinity and no NaN, yet kernelproof measures them honestly: the error
of an output full of Inf is infinite, a degenerate task's control can have an error of 0/0.
Python's ``json`` either writes ``Infinity`` (which other parsers refuse) or raises, and writing
``null`` instead loses the figure (an infinite error read back as null then crashed whatever
formatted it). So every document kernelproof writes (verdicts, audit reports, certificates, the
store, the agent's records) encodes them the same way::

    float("inf")  -> "inf"
    float("-inf") -> "-inf"
    float("nan")  -> "nan"

and a reader turns them back into floats with :func:`number`, only in fields that its schema
says hold numbers: a task path or a message that happens to read "nan" stays a string.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Callable
from typing import Any

__all__ = ["NONFINITE", "dumps", "encode", "number"]

# The three spellings, and the floats they stand for.
NONFINITE: dict[str, float] = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def encode(obj: Any) -> Any:
    """``obj`` as plain JSON data, with every non-finite float replaced by its string.

    Walks dicts (keys become strings), lists, tuples and dataclass instances (as dicts of their
    fields); an enum becomes its value. Anything else is returned unchanged, for ``json`` to
    accept or refuse.
    """
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, enum.Enum):
        return encode(obj.value)
    if isinstance(obj, dict):
        return {str(k.value if isinstance(k, enum.Enum) else k): encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`encode` (obj): never raises on a non-finite float.

    Keyword arguments go to ``json.dumps``. ``allow_nan`` is always False, so nothing but the
    strings above can stand for a non-finite number; a ``default`` hook's results are encoded too.
    """
    kwargs.pop("allow_nan", None)
    hook: Callable[[Any], Any] | None = kwargs.pop("default", None)
    if hook is not None:
        kwargs["default"] = lambda o: encode(hook(o))
    return json.dumps(encode(obj), allow_nan=False, **kwargs)


def number(x: Any) -> float | None:
    """A JSON value that the schema says is a number, as a float (None stays None).

    Accepts ints, floats and the three strings of :data:`NONFINITE`. Anything else (another
    string, a bool, a list) is not a number and raises ``ValueError``: a malformed document is
    reported, never read as some number.
    """
    if x is None:
        return None
    if isinstance(x, bool):
        raise ValueError(f"expected a number, found {x!r}")
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, str) and x in NONFINITE:
        return NONFINITE[x]
    raise ValueError(f"expected a number, found {x!r}"[:200])
