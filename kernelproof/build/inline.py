"""A drop-in load_inline that builds faster and loads prebuilt extensions, for unchanged solutions.

The builder process and the worker both call :func:`install` before importing a solution; the
solution's own ``from torch.utils.cpp_extension import load_inline`` then gets this function.

- **Where it builds.** Into ``$TORCH_EXTENSIONS_DIR/<tag>/kp-<name>-<digest>`` (the digest covers
  every argument that changes the build), whatever ``build_directory`` the solution asked for:
  the build stays inside the private staging directory the parent gave the builder.
- **Loading prebuilt.** When that directory already holds ``<name>.so`` with a stamp of the same
  digest (the worker's private copy of a cache entry), the module is imported without running
  ninja or a compiler. torch's own path would rebuild there, since its ninja file records the
  builder's absolute paths.
- **Building faster.** CUDA sources are split (kernelproof.build.split) so nvcc never sees torch's
  headers, and the C++ files use a precompiled torch header when the parent provided one. Any
  refusal or failure of that path falls back to torch's own load_inline with the same arguments,
  so a solution that builds with torch builds here, and its errors read the same.
- **What reaches a compiler.** Every flag, include path and the extension's name are checked
  against kernelproof.compiler_flags before anything is built, here and in ``cpp_extension.load``
  (a refused one raises RefusedFlagError, which the builder turns into the solution's
  compile_error). The fast path runs each compiler from an argument list, never through a shell;
  torch's own path (ninja, which runs its command lines through ``/bin/sh``) only ever sees flags
  that passed the check. Both run with the environment pinned before the solution was imported
  (kernelproof.build.toolenv), so a solution cannot choose the compiler through ``CXX`` or
  ``PYTORCH_NVCC``.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kernelproof import compiler_flags
from kernelproof.build import cuda as _cuda
from kernelproof.build import pch as _pch
from kernelproof.build import sources as _sources
from kernelproof.build import toolenv
from kernelproof.build.split import split_cuda_source
from kernelproof.errors import BuildRequestError, CudaUnavailableError  # defined in the one tree, raised here

STAMP = "kp_inline.json"  # written beside <name>.so after a successful build
_ARG_KEYS = (
    "name",
    "cpp_sources",
    "cuda_sources",
    "functions",
    "extra_cflags",
    "extra_cuda_cflags",
    "extra_ldflags",
    "extra_include_paths",
    "with_cuda",
    "is_python_module",
    "with_pytorch_error_handling",
    "no_implicit_headers",
)
_NO_FAST_CUDA_FLAGS = re.compile(r"^(-rdc|--relocatable-device-code|-dc$|-dlink|--device-link|-lto|-dlto)")

_FLAG_ARGS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths")

_state: dict[str, Any] = {
    "original": None,
    "original_load": None,
    "pch_dir": None,
    "fast": True,
    "records": [],
    "requester": None,  # in a worker: sends a build request to the parent (kernelproof.build.runtime_request)
}
MAX_SOURCE_FILE_BYTES = _sources.MAX_SOURCE_FILE_BYTES  # one source file cpp_extension.load names


def set_requester(requester: Any) -> None:
    """In a worker: builds the solution asks for become requests to the parent (never built here).
    `requester(call, args)` sends one build message (kernelproof.build.runtime_request) and returns the reply."""
    _state["requester"] = requester


def requester() -> Any:
    """This process's requester, or None outside a worker (kernelproof.native asks through it too)."""
    return _state["requester"]


def ask(requester: Any, call: str, args: dict[str, Any], name: str) -> None:
    """Ask the parent for one build; BuildRequestError with its message when it will not."""
    try:
        reply = requester(call, args)
    except Exception as exc:  # noqa: BLE001 - the wire broke: the request failed
        raise BuildRequestError(f"the build request for {name!r} got no answer: {exc}") from None
    if not isinstance(reply, dict) or reply.get("op") != "built":
        raise BuildRequestError("the parent answered a build request with something else")
    if not reply.get("ok"):
        raise BuildRequestError(str(reply.get("message") or "the build was refused")[:4000])


class _NoFast(Exception):
    """The fast path does not apply or failed; the reason goes into the build record."""


def install(pch_dir: str | None = None, fast: bool = True, staging: str | None = None) -> None:
    """Make torch.utils.cpp_extension.load_inline (and load) this module's (idempotent).

    `pch_dir` holds this process's private copies of precompiled headers, one folder per
    identity (kernelproof.build.pch); `staging` is the directory include paths may point into.
    Call before the solution is imported: it also pins the compilers' environment.
    """
    from torch.utils import cpp_extension as ce

    if _state["original"] is None:
        _state["original"] = ce.load_inline
    if _state["original_load"] is None:
        _state["original_load"] = ce.load
    _state["pch_dir"] = pch_dir
    _state["fast"] = fast
    toolenv.pin(staging)
    ce.load_inline = load_inline
    ce.load = load


def uninstall() -> None:
    from torch.utils import cpp_extension as ce

    if _state["original"] is not None:
        ce.load_inline = _state["original"]
        _state["original"] = None
    if _state["original_load"] is not None:
        ce.load = _state["original_load"]
        _state["original_load"] = None
    toolenv.unpin()


def records() -> list[dict[str, Any]]:
    """One record per load_inline call in this process: strategy, seconds, why the fast path was not
    used, and for a call whose flags were refused, ``refused`` (the message naming the flag)."""
    return list(_state["records"])


def _refuse_unless_allowed(a: dict[str, Any], paths: dict[str, Any] | None = None) -> None:
    """RefusedFlagError (recorded) when the name, a flag or an include path is not allowed."""
    try:
        compiler_flags.check_name(a.get("name"))
        for key in _FLAG_ARGS:
            compiler_flags.check(key, a.get(key), toolenv.staging())
        for key, value in (paths or {}).items():
            compiler_flags.check_paths(key, value)
    except compiler_flags.RefusedFlagError as e:
        _state["records"].append(
            {"name": str(a.get("name"))[:64], "strategy": "refused", "refused": str(e), "seconds": 0.0}
        )
        raise


def load(*args: Any, **kwargs: Any) -> Any:
    """torch.utils.cpp_extension.load with its flags checked, built as load_inline of its files.

    The files' text goes into one load_inline call (kernelproof.build.sources: C++ files into its
    C++ sources, CUDA files into its CUDA sources, in their order, no implicit headers, no generated
    bindings): built under TORCH_EXTENSIONS_DIR (the staging directory) whatever ``build_directory``
    was asked for, published like any load_inline build. In a worker the request names the files'
    paths and the parent reads them itself; the worker reads them only to know the build's digest.
    Files that include each other by relative path, or define the same static name twice, do not
    build this way.
    """
    from torch.utils import cpp_extension as ce

    original = _state["original_load"] or ce.load
    bound = inspect.signature(original).bind(*args, **kwargs)
    bound.apply_defaults()
    a = dict(bound.arguments)
    _refuse_unless_allowed(a, {"sources": a.get("sources")})
    paths = [os.path.abspath(p) for p in _sources.source_paths(a.get("sources"))]
    files = _sources.inline_arguments(a, [(p, _sources.read_own(p)) for p in paths])
    original_inline = _state["original"] or ce.load_inline
    inline_args = _inline_call(original_inline, (), files)  # exactly what load_inline(**files) binds
    with toolenv.pinned():
        return _load_checked(inline_args, original_inline, ("load", {**a, "sources": paths}))


def load_inline(*args: Any, **kwargs: Any) -> Any:
    """torch.utils.cpp_extension.load_inline, same arguments and result (see the module docstring)."""
    from torch.utils import cpp_extension as ce

    original = _state["original"] or ce.load_inline
    a = _inline_call(original, args, kwargs)
    _refuse_unless_allowed(a)
    with toolenv.pinned():
        return _load_checked(a, original, ("load_inline", request_arguments(a)))


def _inline_call(original: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """load_inline's arguments as bound, defaults applied, its sources as lists."""
    bound = inspect.signature(original).bind(*args, **kwargs)
    bound.apply_defaults()
    a = dict(bound.arguments)
    for key in ("cpp_sources", "cuda_sources"):
        if isinstance(a.get(key), str):
            a[key] = [a[key]]
        a[key] = list(a.get(key) or [])
    return a


def _load_checked(a: dict[str, Any], original: Any, request: tuple[str, dict[str, Any]]) -> Any:
    """Load (or in the builder, build) load_inline's arguments `a`; in a worker whose folder lacks
    the build, `request` (a call and its arguments: kernelproof.build.runtime_request) goes to the parent."""
    from torch.utils import cpp_extension as ce

    digest = _digest(a)
    dirname = f"kp-{a['name']}-{digest[:16]}"
    requester = _state["requester"]
    if requester is not None and os.environ.get("TORCH_EXTENSIONS_DIR"):
        build_dir = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], dirname)  # read-only here: no mkdir
    else:
        build_dir = ce._get_build_directory(dirname, False)
    started = time.perf_counter()
    record: dict[str, Any] = {"name": a["name"], "digest": digest, "build_dir": build_dir}
    record["cuda"] = _cuda.asks_for_cuda(a)  # a CUDA build was asked for: the parent's environment fact
    stamp = Path(build_dir) / STAMP
    so = Path(build_dir) / f"{a['name']}.so"
    if not (so.is_file() and _stamp_digest(stamp) == digest) and requester is not None:
        ask(requester, request[0], request[1], a["name"])  # the parent builds it into this read-only folder
        record["strategy"] = "requested"
    if so.is_file() and _stamp_digest(stamp) == digest:
        record.update(strategy=record.get("strategy") or "prebuilt", seconds=time.perf_counter() - started)
        _state["records"].append(record)
        # a library of custom operators (TORCH_LIBRARY, is_python_module=False) through torch.ops.load_library
        return ce._import_module_from_library(a["name"], build_dir, bool(a["is_python_module"]))
    if requester is not None:
        raise BuildRequestError(f"the build of {a['name']!r} the parent provided is not where it belongs")
    lacking = _cuda.lacks([_cuda.LOAD_INLINE]) if record["cuda"] else ()
    if lacking:  # asked for, and impossible here: nothing is compiled (kernelproof/build/cuda.py)
        record.update(strategy="unavailable", unavailable="; ".join(lacking), seconds=0.0)
        _state["records"].append(record)
        raise CudaUnavailableError(
            f"load_inline {a['name']!r} asks for a CUDA build and this machine cannot build it: "
            f"{'; '.join(lacking)}"
        )

    try:
        with open(Path(build_dir) / "kp.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two processes sharing a build directory build once
            if so.is_file() and _stamp_digest(stamp) == digest:
                record["strategy"] = "prebuilt"
                return ce._import_module_from_library(a["name"], build_dir, bool(a["is_python_module"]))
            module = _build_and_import(a, build_dir, original, record)
    finally:
        record["seconds"] = time.perf_counter() - started
        _state["records"].append(record)
    _write_stamp(build_dir, record)
    return module


def _build_and_import(a: dict[str, Any], build_dir: str, original: Any, record: dict[str, Any]) -> Any:
    from torch.utils import cpp_extension as ce

    if _state["fast"]:
        try:
            strategy, pch_used = _fast_build(a, build_dir)
        except _NoFast as e:
            record["fast_refused"] = str(e)[-2000:]
        else:
            record.update(strategy=strategy, pch_used=pch_used)
            _write_stamp(build_dir, record)  # built: a worker may load it even if this import fails
            return ce._import_module_from_library(a["name"], build_dir, True)
    _clean(Path(build_dir))
    a["build_directory"] = build_dir
    a["use_pch"] = False  # torch's own header cache lives in torch's install, shared by every build
    record["strategy"] = "torch"
    return original(**{k: v for k, v in a.items() if k in inspect.signature(original).parameters})


def request_arguments(a: dict[str, Any]) -> dict[str, Any]:
    """The arguments a build request carries: every one that decides the build (its digest's)."""
    return {k: a.get(k) for k in _ARG_KEYS}


def _write_stamp(build_dir: str, record: dict[str, Any]) -> None:
    doc = {"digest": record["digest"], "strategy": record["strategy"]}
    (Path(build_dir) / STAMP).write_text(json.dumps(doc))


def _digest(a: dict[str, Any]) -> str:
    doc = {k: a.get(k) for k in _ARG_KEYS}
    if isinstance(doc["functions"], dict):
        doc["functions"] = sorted(doc["functions"].items())
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def _stamp_digest(stamp: Path) -> str:
    try:
        return str(json.loads(stamp.read_text()).get("digest", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def _main_cpp(a: dict[str, Any]) -> str:
    """main.cpp exactly as torch's load_inline writes it."""
    cpp = list(a["cpp_sources"])
    if not a.get("no_implicit_headers"):
        cpp.insert(0, "#include <torch/extension.h>")
    functions = a.get("functions")
    if functions is not None:
        if isinstance(functions, str):
            functions = [functions]
        if isinstance(functions, list):
            functions = {f: f for f in functions}
        cpp.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        for fname, doc in functions.items():
            if a.get("with_pytorch_error_handling", True):
                cpp.append(f'm.def("{fname}", torch::wrap_pybind_function({fname}), "{doc}");')
            else:
                cpp.append(f'm.def("{fname}", {fname}, "{doc}");')
        cpp.append("}")
    return "\n".join(cpp)


def _fast_build(a: dict[str, Any], build_dir: str) -> tuple[str, bool]:
    """Split build; returns (strategy, whether a precompiled header was used). Raises _NoFast."""
    if not a["cuda_sources"]:
        raise _NoFast("no CUDA sources")
    if not a["is_python_module"] or a.get("sycl_sources") or a.get("with_cuda") is False:
        raise _NoFast("not a CUDA Python module")
    if any(_NO_FAST_CUDA_FLAGS.match(f.strip()) for f in a.get("extra_cuda_cflags") or []):
        raise _NoFast("relocatable device code needs a device link")
    split = split_cuda_source("\n".join(a["cuda_sources"]), implicit_headers=not a.get("no_implicit_headers"))
    if split is None:
        raise _NoFast("the CUDA source is outside what the splitter reads safely")
    try:
        vars_ = _pch.torch_build_vars(
            a.get("extra_cflags"),
            a.get("extra_cuda_cflags"),
            a.get("extra_ldflags"),
            a.get("extra_include_paths"),
            a["name"],
        )
    except Exception as e:  # noqa: BLE001 - torch internals moved: use torch's own path
        raise _NoFast(f"torch build flags unavailable: {e!r}") from None
    out = Path(build_dir)
    (out / "main.cpp").write_text(_main_cpp(a))
    (out / "launch.cpp").write_text(split.launch_cpp)
    (out / "kernels.cu").write_text(split.kernels_cu)
    pch_used = False
    pch_dir = _state["pch_dir"]
    if pch_dir:
        found = Path(pch_dir) / _pch.pch_id(vars_) / _pch.PCH_HEADER
        if found.with_name(_pch.PCH_HEADER + ".gch").is_file():
            vars_ = dict(vars_, cflags=f"-include {shlex.quote(str(found))} -Winvalid-pch {vars_['cflags']}")
            pch_used = True
    rules = _pch.ninja_rules(vars_["_header"])
    name = a["name"]

    def command(rule: str, ins: list[str], target: str) -> list[str]:
        return _argv(rules.get(rule, ""), vars_, [str(out / i) for i in ins], str(out / target))

    # device code first: a refusal costs a second, not a full build
    _run_compilers(out, [command("cuda_compile", ["kernels.cu"], "kernels.cuda.o")])
    _run_compilers(
        out, [command("compile", ["main.cpp"], "main.o"), command("compile", ["launch.cpp"], "launch.o")]
    )
    _run_compilers(out, [command("link", ["main.o", "launch.o", "kernels.cuda.o"], f"{name}.so")])
    return ("split+pch" if pch_used else "split"), pch_used


def _argv(template: str, vars_: dict[str, str], ins: list[str], target: str) -> list[str]:
    """One ninja rule's command as an argument list: what ninja would hand to /bin/sh, split the
    way sh splits it, with no shell. A word this cannot expand without sh refuses the fast path."""
    if not template:
        raise _NoFast("torch's build file has no rule for this step")
    argv: list[str] = []
    for word in template.split():
        if word == "$in":
            argv += ins
        elif word == "$out":
            argv.append(target)
        elif word == "$out.d":
            argv.append(target + ".d")
        elif re.fullmatch(r"\$\w+", word):
            argv += _words(vars_.get(word[1:], ""))
        else:
            argv += _words(word)
    return argv


def _words(value: str) -> list[str]:
    if any(c in value for c in "`$\n"):
        raise _NoFast(f"torch's build flags need a shell to expand: {value[:200]!r}")
    return shlex.split(value)


def _run_compilers(build_dir: Path, commands: list[list[str]]) -> None:
    """Run these compiler commands (in parallel up to MAX_JOBS), from argument lists, with the
    pinned environment; _NoFast with their output when one fails."""
    env = toolenv.environ()
    jobs = max(1, int(env.get("MAX_JOBS") or (os.cpu_count() or 1) + 2))
    failed: list[str] = []
    for start in range(0, len(commands), jobs):
        procs = [
            subprocess.Popen(
                cmd, cwd=build_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            for cmd in commands[start : start + jobs]
        ]
        for cmd, proc in zip(commands[start : start + jobs], procs, strict=True):
            output, _ = proc.communicate()
            if proc.returncode != 0:
                failed.append(shlex.join(cmd) + "\n" + output)
    if failed:
        sys.stderr.write(f"kernelproof: fast build of {build_dir.name} failed, building with torch instead\n")
        raise _NoFast(f"split build failed: {''.join(failed)[-4000:]}")


def _clean(build_dir: Path) -> None:
    """Remove what a failed fast build left, so torch's build starts from its own files."""
    for p in build_dir.iterdir():
        if p.is_file() and (
            p.suffix in (".o", ".so", ".d") or p.name in ("build.ninja", ".ninja_log", ".ninja_deps")
        ):
            p.unlink()
