"""Which compiler flags a solution may pass: checked before any compiler, ninja or shell sees them.

Why: torch's load_inline writes ``extra_cflags``, ``extra_cuda_cflags``, ``extra_ldflags`` and
``extra_include_paths`` into build.ninja unquoted, and ninja runs every command line through
``/bin/sh``. A flag holding a backtick or ``$(...)`` ran commands in the builder; they wrote into
the build cache and rewrote the shared precompiled torch header (issue 15). Other flags need no
shell to do harm: ``-fplugin`` loads code into the compiler, ``-B`` and ``-ccbin`` choose the
programs the compiler runs, ``-include`` and ``-I`` outside the staging directory pull in files
the solution does not own, ``@file`` and ``-specs`` read more options from a file, ``-o`` and
``-Wl,`` options that carry paths write or read where the build does not look. So every flag is
checked against what a kernel needs (optimisation levels, macros, the language standard, the
Hopper target, fast math, line info) and anything else is refused with the flag named: a refused
flag is the solution's ``compile_error`` (invariant I8, untrusted code stays contained).

The check runs twice: statically in the trusted parent on the literal flags of the solution's
``load_inline`` / ``cpp_extension.load`` / ``load_cuda`` calls (:func:`literal_refusals`, through
kernelproof.solution.triage and the builder pool, before any builder starts), and in the builder
on the flags actually passed (kernelproof.build.inline, kernelproof.native), since flags may be
computed at run time. It is deliberately narrow: a harmless flag missing here is a one-line
addition, a harmful one allowed is a way into the build cache.

A leaf module (it imports nothing of kernelproof but errors): solution triage, on the left of the
data flow, reads it, and so does the build layer.
"""

from __future__ import annotations

import ast
import glob
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kernelproof import pyast
from kernelproof.errors import RefusedFlagError  # defined in the one tree, raised here

POLICY = "kernelproof.build-flags/2"  # in every build key: a policy change re-decides cached refusals

# What each checked argument holds. "cxx": host compiler flags; "nvcc": nvcc flags (load_cuda's
# `options` too); "ld": linker flags; "path": one include directory per entry.
KINDS = {
    "extra_cflags": "cxx",
    "extra_cuda_cflags": "nvcc",
    "extra_ldflags": "ld",
    "extra_include_paths": "path",
    "options": "nvcc",
}
# Characters a flag may contain. None of them means anything to sh or to ninja ($ is ninja's escape).
_SAFE_CHAR = re.compile(r"[A-Za-z0-9_.,:=+/-]")
_SHELL_META = set("`$;|&<>()\\\"'*?[]{}~#!^ \t\n\r")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_NAME = re.compile(_IDENT)  # an extension's name: it becomes a macro and file names
# Flags whose value may come as the next list entry ("-gencode", "arch=compute_90a,code=sm_90a").
_TAKES_VALUE = {
    "-D": "",
    "-U": "",
    "-I": "",
    "-isystem": "",
    "-iquote": "",
    "-idirafter": "",
    "-L": "",
    "-l": "",
    "-gencode": "=",
    "--generate-code": "=",
    "-arch": "=",
    "--gpu-architecture": "=",
    "-code": "=",
    "--gpu-code": "=",
    "-Xptxas": "=",
    "--ptxas-options": "=",
    "-Xcompiler": "=",
    "--compiler-options": "=",
    "-Xcudafe": "=",
    "-maxrregcount": "=",
    "--maxrregcount": "=",
    "-t": "=",
    "--threads": "=",
}
_INCLUDE_FLAG = re.compile(r"^(-I|-isystem|-iquote|-idirafter|--include-path=)(.*)$")
# Refused whatever the compiler, each with the reason the message gives.
_NAMED_REFUSALS = (
    (re.compile(r"^-fplugin"), "loads a compiler plugin"),
    (re.compile(r"^-B"), "changes where the compiler finds the programs it runs"),
    (re.compile(r"^(-ccbin|--compiler-bindir)"), "chooses the host compiler nvcc runs"),
    (re.compile(r"^(-Xlinker|--linker-options|-Xnvlink)"), "passes options to the linker"),
    (re.compile(r"^-Wl,.*[/=]"), "a linker option that carries a path"),
    (re.compile(r"^(-o|--output-file|--output-directory|-odir)"), "sets an output path"),
    (re.compile(r"^(-include|-imacros|--pre-include|-preinclude)"), "includes a file into every source"),
    (re.compile(r"^(-specs|--specs)"), "loads a compiler specs file"),
    (re.compile(r"^(--options-file|-optf)"), "reads more options from a file"),
    (re.compile(r"^-wrapper"), "runs the compiler through another program"),
    (re.compile(r"^(-save-temps|-keep|--keep|--keep-dir|-MF|-MD|-MMD)"), "writes files beside the build"),
)
_HOPPER_VIRTUAL = "compute_90a?"  # Hopper: sm_90 / sm_90a and their virtual compute_90 / compute_90a
_HOPPER = f"(sm_90a?|{_HOPPER_VIRTUAL})"
# Any GPU generation: published code often targets sm_80 or older and runs on Hopper through its PTX.
# Allowed, and noted (:func:`literal_notes`): such code does not use the device's own instructions.
_ANY_VIRTUAL = "compute_[1-9][0-9]{1,2}[af]?"
_ANY_ARCH = f"(sm_[1-9][0-9]{{1,2}}[af]?|{_ANY_VIRTUAL})"
_ARCH_FLAG = re.compile(r"^(-arch|--gpu-architecture|-code|--gpu-code|-gencode|--generate-code)=(.*)$")
DOCS = "docs/builds.md#what-a-solution-may-pass-to-the-compilers"  # the section every refusal names
_DEFINE = rf"-D{_IDENT}(=[A-Za-z0-9_.+-]*)?|-U{_IDENT}"
_OPT = r"-O[0-3]"
_STD = r"--?std=(c|gnu)\+\+(11|14|17|20|23|1z|2a|2b)"
# Warnings and diagnostics: they change what the compiler prints, never what it builds. The
# comma forms (-Wl, -Wa, -Wp) pass options to other programs and do not match.
_WARN = r"-w|-W[a-z][a-z0-9-]*(=[a-z0-9-]+)?"
# gcc's code-generation switches (-fNAME and -fno-NAME) that change only the code built: vectorising,
# unrolling, inlining, floating-point contracts, exceptions and RTTI. None reads or writes a file.
_CODEGEN = (
    r"fast-math|unsafe-math-optimizations|math-errno|trapping-math|signed-zeros|reciprocal-math"
    r"|associative-math|finite-math-only|rounding-math|strict-aliasing|unroll-loops|unroll-all-loops"
    r"|peel-loops|tree-vectorize|tree-loop-vectorize|tree-slp-vectorize|tree-loop-distribution"
    r"|prefetch-loop-arrays|inline-functions|inline-small-functions|omit-frame-pointer|exceptions|rtti"
    r"|strict-overflow|wrapv|ipa-pta|schedule-insns|schedule-insns2|gcse|loop-interchange"
    r"|loop-unroll-and-jam|split-loops|unswitch-loops|permissive|lax-vector-conversions"
)
_CXX = re.compile(
    rf"^({_OPT}|-Os|-Ofast|{_DEFINE}|{_STD}|-g|-g0|{_WARN}"
    # host code generation that cannot reach outside the build (-fPIC: torch passes it too): the
    # optimisers' switches published CPU kernels pass, each with its -fno- form; none takes a path
    r"|-fPIC|-fpic|-fvisibility=hidden|-fvisibility-inlines-hidden"
    rf"|-f(no-)?({_CODEGEN})|-ffp-contract=(fast|on|off)|-f(vect|simd)-cost-model=(unlimited|dynamic|cheap|very-cheap)"
    # diagnostics on stderr (-fopt-info without =FILE, which would write a file)
    r"|-fdiagnostics-color(=(always|never|auto))?|-fmax-errors=[0-9]{1,4}|-fopt-info(-[a-z]+)*"
    # -pthread: POSIX threads' macros and library, as -lpthread links it
    r"|-pthread"
    # OpenMP: the host code's own threads, in the builder's and the worker's process limits
    r"|-fopenmp|-fopenmp-simd"
    # CPU instruction sets: the machine's CPU model is in the build key (kernelproof.build.env)
    r"|-m(arch|tune|cpu)=[a-z0-9_.+-]+|-mprefer-vector-width=(128|256|512)"
    r"|-m(no-)?(sse[0-9.]*|ssse3|avx[0-9a-z]*|fma4?|f16c|bmi2?|popcnt|lzcnt|movbe|aes|pclmul|sha"
    r"|vpclmulqdq|gfni|vaes|adx|rdrnd|rdseed|amx-[a-z0-9]+|neon|sve2?))$"
)
_PTXAS_OPTION = re.compile(
    r"^(-v|--verbose|-O[0-3]|-warn-spills|--warn-on-spills|-warn-lmem-usage|--warn-on-local-memory-usage"
    r"|-dlcm=c[agv]|-dscm=(cg|cs|wt)|--allow-expensive-optimizations=(true|false)"
    r"|--?maxrregcount=[0-9]{1,3}|--?def-load-cache=c[agv]|--?def-store-cache=(cg|cs|wt|wb)"
    r"|--?fmad=(true|false)|-lineinfo|--generate-line-info|--?opt-level=[0-3]|--?register-usage-level=[0-9]{1,2}"
    r"|-warn-double-usage|--warn-on-double-precision-use|--disable-optimizer-constants|--?sp-bound-check)$"
)
_NVCC = re.compile(
    rf"^({_OPT}|{_DEFINE}|{_STD}|-g|{_WARN}|--disable-warnings"
    r"|-lineinfo|--generate-line-info|--use_fast_math|-use_fast_math"
    r"|--?(ftz|prec-div|prec-sqrt|fmad)=(true|false)"
    # language switches; torch itself passes --expt-relaxed-constexpr
    r"|--?expt-relaxed-constexpr|--?expt-extended-lambda|--?extended-lambda"
    # diagnostics: register and shared-memory use, suppressed front-end warnings by number or name
    r"|-res-usage|--resource-usage|--?diag[-_]suppress=[A-Za-z0-9_,]+|-Xcudafe=--diag_suppress=[A-Za-z0-9_,]+"
    # register budget per thread: a tuning knob of the kernel's own code generation
    r"|--?maxrregcount=[0-9]{1,3}"
    # device code generation: restrict-qualified pointers, vectorised loads, device-side optimisation,
    # nvcc's own parallelism over its steps
    r"|--?restrict|--?extra-device-vectorization|--?dopt=(on|off)|(-t|--threads)=?[0-9]{1,2}"
    rf"|(-arch|--gpu-architecture)={_ANY_ARCH}|(-code|--gpu-code)={_ANY_ARCH}(,{_ANY_ARCH})*"
    rf"|(-gencode|--generate-code)=arch={_ANY_VIRTUAL},code={_ANY_ARCH})$"
)
_LD = re.compile(r"^(-l[A-Za-z0-9_.+-]+|-Wl,--(no-)?as-needed|-Wl,-O[0-3]|-fopenmp|-pthread|-O[0-3])$")


@dataclass(frozen=True)
class Refusal:
    """One refused entry of a build argument."""

    argument: str  # extra_cflags | extra_cuda_cflags | extra_ldflags | extra_include_paths | options | name
    flag: str  # the entry as the solution wrote it
    reason: str  # why, in a few words
    line: int = 0  # 1-based line of the call in the solution (static check); 0 at run time

    def message(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        what = "name" if self.argument == "name" else f"{self.argument} entry"
        return f"{where}{what} {self.flag!r} refused: {self.reason} (allowed flags: {DOCS})"


def check(argument: str, flags: object, staging: str | Path | None = None) -> tuple[str, ...]:
    """The entries of one build argument as separate tokens; RefusedFlagError for the first refused one.

    `staging` is the directory include and library paths may point into; None allows none (the
    static check, and a process that was given no staging directory). The CUDA toolkit's own
    include and library directories are allowed too (see :func:`_toolkit_dirs`).
    """
    tokens, refusal = _check(argument, flags, staging)
    if refusal is not None:
        raise RefusedFlagError(refusal)
    return tokens


def first_refusal(argument: str, flags: object, staging: str | Path | None = None) -> Refusal | None:
    """The first refused entry of one build argument, or None when every entry is allowed."""
    return _check(argument, flags, staging)[1]


def check_name(name: object) -> None:
    """An extension's name becomes a macro (-DTORCH_EXTENSION_NAME=...) and file names: an identifier."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise RefusedFlagError(Refusal("name", str(name), "an extension's name must be a C identifier"))


def check_paths(argument: str, paths: object) -> None:
    """Source files and build directories of cpp_extension.load land on ninja's command lines too."""
    for p in [paths] if isinstance(paths, (str, os.PathLike)) else list(paths or []):
        bad = _unsafe_char(os.fspath(p))
        if bad:
            raise RefusedFlagError(Refusal(argument, os.fspath(p), bad))


def _check(
    argument: str, flags: object, staging: str | Path | None
) -> tuple[tuple[str, ...], Refusal | None]:
    kind = KINDS[argument]
    if flags is None:
        return (), None
    if isinstance(flags, (str, bytes)) or not isinstance(flags, Iterable):
        return (), Refusal(argument, str(flags)[:200], "must be a list of strings, not one string")
    roots = _roots(staging)
    words: list[tuple[str, str]] = []  # (word, the entry it came from)
    for entry in flags:
        if not isinstance(entry, str):
            return (), Refusal(argument, repr(entry)[:200], "not a string")
        if kind == "path":
            reason = _unsafe_char(entry) or _path_reason(entry, roots["include"], "include")
            if reason:
                return (), Refusal(argument, entry, reason)
            words.append((entry, entry))
            continue
        control = next((c for c in entry if (ord(c) < 32 or ord(c) == 127) and c not in " \t"), None)
        if control is not None:
            return (), Refusal(argument, entry, f"control character {control!r}")
        words += [(w, entry) for w in entry.split()]  # torch joins entries with spaces: sh splits them
    if kind == "path":
        return tuple(w for w, _ in words), None
    i = 0
    while i < len(words):
        word, entry = words[i]
        step = 1
        if word in _TAKES_VALUE and i + 1 < len(words):  # "-gencode", "arch=compute_90a,code=sm_90a"
            word, step = word + _TAKES_VALUE[word] + words[i + 1][0], 2
            entry = entry if entry == words[i + 1][1] else word
        reason = _token_reason(kind, word, roots)
        if reason:
            return (), Refusal(argument, entry, reason)
        i += step
    return tuple(w for w, _ in words), None


def _token_reason(kind: str, word: str, roots: dict[str, tuple[str, ...]]) -> str:
    """Why one flag is refused, or "" when it is allowed."""
    if word.startswith("@"):
        return "reads more options from a file (@file)"
    bad = _unsafe_char(word)
    if bad:
        return bad
    for pattern, reason in _NAMED_REFUSALS:
        if pattern.match(word):
            return reason
    m = _INCLUDE_FLAG.match(word)
    if m and kind in ("cxx", "nvcc"):
        return _path_reason(m.group(2), roots["include"], "include")
    if kind == "ld":
        if word.startswith("-L"):
            return _path_reason(word[2:], roots["lib"], "library")
        return "" if _LD.match(word) else "not an allowed linker flag"
    if kind == "nvcc":
        inner = re.match(r"^(-Xcompiler|--compiler-options)=(.*)$", word)
        if inner:
            for host_flag in inner.group(2).split(","):
                reason = _token_reason("cxx", host_flag, roots)
                if reason:
                    return f"{host_flag!r} for the host compiler: {reason}"
            return ""
        ptxas = re.match(r"^(-Xptxas|--ptxas-options)=(.*)$", word)
        if ptxas:
            opts = ptxas.group(2).split(",")
            return "" if all(_PTXAS_OPTION.match(o) for o in opts) else "not an allowed ptxas option"
        if re.match(r"^(-arch|--gpu-architecture|-code|--gpu-code|-gencode|--generate-code)\b", word):
            return "" if _NVCC.match(word) else "not a GPU target nvcc takes here (sm_NN, compute_NN)"
        return "" if _NVCC.match(word) else "not on the allowlist of nvcc flags"
    return "" if _CXX.match(word) else "not on the allowlist of C++ compiler flags"


def _unsafe_char(text: str) -> str:
    for c in text:
        if not _SAFE_CHAR.match(c):
            return f"shell metacharacter {c!r}" if c in _SHELL_META else f"character {c!r} is not allowed"
    return ""


def _path_reason(path: str, allowed: tuple[str, ...], what: str) -> str:
    if not path:
        return f"empty {what} path"
    real = os.path.realpath(path)
    if any(real == root or real.startswith(root.rstrip("/") + "/") for root in allowed):
        return ""
    if what == "include":
        # A folder of headers the solution wrote at run time is where no build sees it: a worker's
        # builds are made by the parent's builders, each in a staging folder of its own.
        return (
            "include path outside the staging directory (allowed: the build's staging directory, the CUDA "
            "toolkit's and torch's include directories; a folder of headers the solution writes is not "
            "seen by the builder that builds a run-time request: put the header's text at the head of "
            "cpp_sources / cuda_sources instead)"
        )
    return f"{what} path outside the staging directory"


def _roots(staging: str | Path | None) -> dict[str, tuple[str, ...]]:
    own = (os.path.realpath(staging),) if staging else ()
    return {
        "include": own + _toolkit_dirs("include") + _torch_include_dirs(),
        "lib": own + _toolkit_dirs("lib"),
    }


def _torch_include_dirs() -> tuple[str, ...]:
    """torch's own include directory and Python's: what ``cpp_extension.include_paths()`` returns.

    Why they are allowed: torch already puts them on every extension's command line, they belong
    to the installed toolchain (no solution writes there), and published solutions pass
    ``extra_include_paths=cpp_extension.include_paths()``. Found without importing torch.
    """
    import importlib.util
    import sysconfig

    found: list[str] = []
    spec = importlib.util.find_spec("torch")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        found.append(os.path.realpath(os.path.join(location, "include")))
    python_include = sysconfig.get_paths().get("include")
    if python_include:
        found.append(os.path.realpath(python_include))
    return tuple(p for p in dict.fromkeys(found) if os.path.isdir(p))


def _toolkit_dirs(what: str) -> tuple[str, ...]:
    """The CUDA toolkit's own include (or library) directories.

    Why they are allowed although they are outside staging: they hold the headers and libraries
    nvcc already uses (they are on its default search path), they are part of the trusted
    toolchain, and KernelBench-style solutions often name them (``-I/usr/local/cuda/include``,
    ``-L/usr/local/cuda/lib64 -lcublas``).
    """
    home = _toolkit_home()
    if not home:
        return ()
    subdirs = ("include", "targets/*/include") if what == "include" else ("lib64", "lib", "targets/*/lib")
    found: list[str] = []
    for sub in subdirs:
        found += [os.path.realpath(p) for p in sorted(glob.glob(os.path.join(home, sub)))]
    return tuple(dict.fromkeys(found))


def _toolkit_home() -> str | None:
    """The CUDA toolkit's root: the search kernelproof.build.env.cuda_home makes (CUDA_HOME,
    CUDA_PATH, /usr/local/cuda, the folder above nvcc's bin/), repeated so this stays a leaf."""
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.path.isfile(os.path.join(home, "bin", "nvcc")):
            return home
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    return home if os.path.isdir(os.path.join(home, "include")) else None


# -- the static check in the trusted parent ------------------------------------------------------
# Positional parameters of the calls checked, in the callee's order.
_POSITIONS = {
    "load_inline": ("name", "cpp_sources", "cuda_sources", "functions") + tuple(KINDS)[:4],
    "load": ("name", "sources") + tuple(KINDS)[:4],
    "load_cuda": ("source", "kernels", "options"),
}
_MODULES = {"torch.utils.cpp_extension", "kernelproof.native"}


def literal_refusals(source: str) -> list[Refusal]:
    """Refused entries among the literal flags of the solution's build calls (read, never run).

    A call's argument counts when it is a literal, or a name bound once at module level to a
    literal; anything computed is left to the builder's own check.
    """
    found: list[Refusal] = []
    for line, param, value in _literal_arguments(source):
        if param == "name":
            if not (isinstance(value, str) and _NAME.fullmatch(value)):
                found.append(Refusal("name", str(value), "an extension's name must be a C identifier", line))
            continue
        refusal = first_refusal(param, value, None)
        if refusal is not None:
            found.append(Refusal(refusal.argument, refusal.flag, refusal.reason, line))
    return found


@dataclass(frozen=True)
class Note:
    """An allowed flag a person reading the verdict should know about (a flag, never a failure)."""

    line: int  # 1-based line of the build call
    flag: str
    what: str

    def message(self) -> str:
        return f"{self.flag!r}: {self.what} ({DOCS})"


FOREIGN_TARGET = (
    "targets another GPU generation than Hopper (sm_90, sm_90a): on this device the code runs "
    "through its PTX or older instructions, not the device's own"
)


def foreign_targets(argument: str, flags: object) -> tuple[str, ...]:
    """The GPU-target flags of one allowed nvcc argument that name something other than Hopper."""
    if KINDS.get(argument) != "nvcc":
        return ()
    tokens, refusal = _check(argument, flags, None)
    if refusal is not None:
        return ()
    joined: list[str] = []
    i = 0
    while i < len(tokens):
        word = tokens[i]
        if word in _TAKES_VALUE and i + 1 < len(tokens):
            word, i = word + _TAKES_VALUE[word] + tokens[i + 1], i + 1
        joined.append(word)
        i += 1
    out = []
    for word in joined:
        m = _ARCH_FLAG.match(word)
        targets = re.findall(r"(?:sm|compute)_[0-9]+[af]?", m.group(2)) if m else []
        if targets and not all(re.fullmatch(_HOPPER, t) for t in targets):
            out.append(word)
    return tuple(out)


def literal_notes(source: str) -> list[Note]:
    """Allowed literal flags worth a verdict flag: GPU targets other than Hopper."""
    return [
        Note(line, flag, FOREIGN_TARGET)
        for line, param, value in _literal_arguments(source)
        if param != "name"
        for flag in foreign_targets(param, value)
    ]


def _literal_arguments(source: str) -> list[tuple[int, str, object]]:
    """(line, parameter, literal value) of every checked argument of the solution's build calls."""
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return []
    aliases = _aliases(tree)
    constants = _module_literals(tree)
    found: list[tuple[int, str, object]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = _callee(node.func, aliases)
        if callee is None:
            continue
        params = _POSITIONS[callee]
        given = {params[i]: arg for i, arg in enumerate(node.args[: len(params)])}
        given.update({kw.arg: kw.value for kw in node.keywords if kw.arg})
        for param, value_node in given.items():
            if param not in KINDS and param != "name":
                continue
            value = _literal(value_node, constants)
            if value is not _UNKNOWN:
                found.append((node.lineno, param, value))
    return found


_UNKNOWN = object()


def _literal(node: ast.AST, constants: dict[str, object]) -> object:
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):  # ["-O3", FLAG]: each element a literal or a constant
        items = [_literal(e, constants) for e in node.elts]
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else items
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNKNOWN


def _module_literals(tree: ast.Module) -> dict[str, object]:
    """Names bound exactly once in the whole file, by a module-level assignment of a literal."""
    stores: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
    out: dict[str, object] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            value = _literal(stmt.value, {})
            if stores.get(name) == 1 and value is not _UNKNOWN:
                out[name] = value
    return out


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local names of load_inline / load / load_cuda imported from torch or kernelproof.native, and
    of the module torch.utils.cpp_extension itself (mapped to "cpp_extension")."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in _MODULES:
            for a in node.names:
                if a.name in _POSITIONS:
                    out[a.asname or a.name] = a.name
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch.utils.cpp_extension" and a.asname:
                    out[a.asname] = "cpp_extension"
    return out


def _callee(func: ast.AST, aliases: dict[str, str]) -> str | None:
    if isinstance(func, ast.Name):
        name = aliases.get(func.id, func.id)
        return name if name in _POSITIONS and (name != "load" or func.id in aliases) else None
    if isinstance(func, ast.Attribute):
        if func.attr in ("load_inline", "load_cuda"):
            return func.attr
        owner = _dotted(func.value)
        if func.attr == "load" and (owner.endswith("cpp_extension") or aliases.get(owner) == "cpp_extension"):
            return "load"
    return None


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""
