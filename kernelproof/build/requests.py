"""The build request: a build the solution asks for while it runs, sent by its worker as data.

A ``load_inline``, ``cpp_extension.load`` or ``kernelproof.native`` build called at import, in
``__init__``, in a function, inside a ``try`` or on the first forward cannot build in the worker
(its extensions folder is read-only, and a compiler there would run in the candidate's process).
The worker sends the call's arguments instead, the parent checks them and the builder pool builds
them as it builds an import-time call (same containment, same cache), the artefact is copied into
the worker's read-only folder, and the worker loads it (kernelproof.build.inline).

The wire, two messages of their own kinds (in the middle of whatever request was running):

    worker -> parent  {"op": "build", "call": "load_inline", "args": {ARG: value, ...}}
    parent -> worker  {"op": "built", "ok": bool, "message": str}

``args`` holds exactly the keys of :data:`ARGS` (load_inline's arguments that decide the build;
``cpp_extension.load`` is sent as load_inline of its files' text). :func:`parse` is the schema,
checked in the parent before anything else reads the message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kernelproof.errors import ProtocolError

OP = "build"
REPLY_OP = "built"
CALLS = ("load_inline",)
MAX_BUILDS = 4  # distinct builds one evaluation may ask for
MAX_SOURCE_BYTES = 4 * 2**20  # sources of every build one evaluation asks for, together
_LISTS = (
    "cpp_sources",
    "cuda_sources",
    "extra_cflags",
    "extra_cuda_cflags",
    "extra_ldflags",
    "extra_include_paths",
)
_BOOLS = ("with_cuda", "is_python_module", "with_pytorch_error_handling", "no_implicit_headers")
ARGS = ("name", *_LISTS, "functions", *_BOOLS)


# A build message that breaks the schema: the worker's bytes, not a build failure.
RequestError = ProtocolError


@dataclass(frozen=True)
class BuildRequest:
    """One checked build request: load_inline's arguments, every one a plain value."""

    args: dict[str, Any]

    @property
    def source_bytes(self) -> int:
        return sum(len(s.encode()) for k in ("cpp_sources", "cuda_sources") for s in self.args[k])

    def key(self) -> str:
        return json.dumps(self.args, sort_keys=True)

    def source_text(self) -> str:
        """A Python file whose import makes exactly this call: what the builder pool builds."""
        return (
            '"""A build requested by a solution at run time (kernelproof.build.requests)."""\n'
            "from torch.utils.cpp_extension import load_inline\n\n"
            f"load_inline(**{self.args!r})\n"
        )


def message(args: dict[str, Any]) -> dict[str, Any]:
    """The worker's build message for load_inline's arguments."""
    return {"op": OP, "call": "load_inline", "args": {k: args.get(k) for k in ARGS}}


def reply(ok: bool, text: str = "") -> dict[str, Any]:
    return {"op": REPLY_OP, "ok": bool(ok), "message": str(text)[:8000]}


def parse(header: Any) -> BuildRequest:
    """The schema: RequestError unless `header` is a build message of plain values."""
    if not isinstance(header, dict) or header.get("op") != OP:
        raise RequestError("not a build message")
    if set(header) != {"op", "call", "args"} or header["call"] not in CALLS:
        raise RequestError(f"a build message has exactly op, call (one of {CALLS}) and args")
    raw = header["args"]
    if not isinstance(raw, dict) or set(raw) != set(ARGS):
        raise RequestError(f"a build message's args are exactly {ARGS}")
    args: dict[str, Any] = {}
    if not isinstance(raw["name"], str):
        raise RequestError("name must be a string")
    args["name"] = raw["name"]
    # Values pass unchanged (None stays None): both sides hash them into the build's digest.
    for key in _LISTS:
        value = raw[key]
        strings = isinstance(value, list) and all(isinstance(v, str) for v in value)
        if not (strings or (value is None and key not in ("cpp_sources", "cuda_sources"))):
            raise RequestError(f"{key} must be a list of strings")
        args[key] = value
    functions = raw["functions"]
    ok = (
        functions is None
        or isinstance(functions, str)
        or (isinstance(functions, list) and all(isinstance(f, str) for f in functions))
        or (
            isinstance(functions, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in functions.items())
        )
    )
    if not ok:
        raise RequestError("functions must be None, a list of names or a dict of names to docstrings")
    args["functions"] = functions
    for key in _BOOLS:
        if raw[key] is not None and not isinstance(raw[key], bool):
            raise RequestError(f"{key} must be true, false or null")
        args[key] = raw[key]
    return BuildRequest(args)
