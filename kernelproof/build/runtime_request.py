"""The build request: a build the solution asks for while it runs, sent by its worker as data.

A ``load_inline``, ``cpp_extension.load`` or ``kernelproof.native`` build called at import, in
``__init__``, in a function, inside a ``try`` or on the first forward cannot build in the worker
(its extensions folder is read-only, and a compiler there would run in the candidate's process).
The worker sends the call's arguments instead, the parent checks them and the builder pool builds
them as it builds an import-time call (same containment, same cache), the artefact is copied into
the worker's read-only folder, and the worker loads it (kernelproof.build.inline).

The wire, two messages of their own kinds (in the middle of whatever request was running):

    worker -> parent  {"op": "build", "call": CALL, "args": {ARG: value, ...}}
    parent -> worker  {"op": "built", "ok": bool, "message": str}

``args`` holds exactly the keys :data:`CALL_ARGS` gives for its call:

- ``load_inline``: load_inline's arguments that decide the build (:data:`ARGS`);
- ``load``: cpp_extension.load's (:data:`LOAD_ARGS`), its ``sources`` as paths the worker names.
  The parent reads those files itself, from the worker's own scratch folder only
  (kernelproof.build.sources), and builds them as load_inline of their text;
- ``load_cuda``: a kernelproof.native compile (:data:`NATIVE_ARGS`: the source, nvcc options and the
  architecture the worker resolved, which decide the cubin's hash).

:func:`parse` is the schema, checked in the parent before anything else reads the message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kernelproof.errors import ProtocolError

OP = "build"
REPLY_OP = "built"
CALLS = ("load_inline", "load", "load_cuda")
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
_LOAD_LISTS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths")
_LOAD_BOOLS = ("with_cuda", "is_python_module")
LOAD_ARGS = ("name", "sources", *_LOAD_LISTS, *_LOAD_BOOLS)
NATIVE_ARGS = ("source", "options", "arch")
CALL_ARGS = {"load_inline": ARGS, "load": LOAD_ARGS, "load_cuda": NATIVE_ARGS}


# A build message that breaks the schema: the worker's bytes, not a build failure.
RequestError = ProtocolError


@dataclass(frozen=True)
class BuildRequest:
    """One checked build request: its call and that call's arguments, every one a plain value.
    A ``load`` request is resolved into a ``load_inline`` one once the parent has read its files."""

    args: dict[str, Any]
    call: str = "load_inline"

    @property
    def source_bytes(self) -> int:
        if self.call == "load_cuda":
            return len(self.args["source"].encode())
        if self.call == "load":
            return 0  # paths: the parent counts the files' text once it has read them
        return sum(len(s.encode()) for k in ("cpp_sources", "cuda_sources") for s in self.args[k])

    def key(self) -> str:
        return json.dumps({"call": self.call, "args": self.args}, sort_keys=True)

    def source_text(self) -> str:
        """A Python file whose import makes exactly this call: what the builder pool builds."""
        head = '"""A build requested by a solution at run time (kernelproof.build.runtime_request)."""\n'
        if self.call == "load_cuda":
            # compile_cubin is load_cuda's build: the kernels' names decide nothing in it
            return (
                head + "from kernelproof.native import compile_cubin\n\n"
                f"compile_cubin({self.args['source']!r}, {self.args['arch']!r}, {self.args['options']!r})\n"
            )
        if self.call != "load_inline":
            raise ValueError(f"a {self.call} request is built once resolved into load_inline")
        return head + f"from torch.utils.cpp_extension import load_inline\n\nload_inline(**{self.args!r})\n"


def message(args: dict[str, Any], call: str = "load_inline") -> dict[str, Any]:
    """The worker's build message for `call` with these arguments (the keys its schema names)."""
    return {"op": OP, "call": call, "args": {k: args.get(k) for k in CALL_ARGS[call]}}


def reply(ok: bool, text: str = "") -> dict[str, Any]:
    return {"op": REPLY_OP, "ok": bool(ok), "message": str(text)[:8000]}


def parse(header: Any) -> BuildRequest:
    """The schema: RequestError unless `header` is a build message of plain values."""
    if not isinstance(header, dict) or header.get("op") != OP:
        raise RequestError("not a build message")
    if set(header) != {"op", "call", "args"} or header["call"] not in CALLS:
        raise RequestError(f"a build message has exactly op, call (one of {CALLS}) and args")
    call, raw = header["call"], header["args"]
    if not isinstance(raw, dict) or set(raw) != set(CALL_ARGS[call]):
        raise RequestError(f"a {call} build message's args are exactly {CALL_ARGS[call]}")
    if call == "load_cuda":
        return BuildRequest(_native_args(raw), call)
    if not isinstance(raw["name"], str):
        raise RequestError("name must be a string")
    args: dict[str, Any] = {"name": raw["name"]}
    if call == "load":
        args["sources"] = _strings(raw, "sources", allow_none=False)
    # Values pass unchanged (None stays None): both sides hash them into the build's digest.
    for key in _LISTS if call == "load_inline" else _LOAD_LISTS:
        args[key] = _strings(raw, key, allow_none=key not in ("cpp_sources", "cuda_sources"))
    if call == "load_inline":
        args["functions"] = _functions(raw["functions"])
    for key in _BOOLS if call == "load_inline" else _LOAD_BOOLS:
        if raw[key] is not None and not isinstance(raw[key], bool):
            raise RequestError(f"{key} must be true, false or null")
        args[key] = raw[key]
    return BuildRequest(args, call)


def _strings(raw: dict[str, Any], key: str, allow_none: bool) -> list[str] | None:
    value = raw[key]
    if not (
        (isinstance(value, list) and all(isinstance(v, str) for v in value)) or (value is None and allow_none)
    ):
        raise RequestError(f"{key} must be a list of strings")
    return value


def _functions(functions: Any) -> Any:
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
    return functions


def _native_args(raw: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(raw["source"], str):
        raise RequestError("source must be a string")
    if not isinstance(raw["arch"], str):
        raise RequestError("arch must be a string (the architecture the worker resolved)")
    return {
        "source": raw["source"],
        "options": _strings(raw, "options", allow_none=False),
        "arch": raw["arch"],
    }
