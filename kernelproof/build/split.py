"""Split a load_inline .cu into a torch-free kernel file and a host launcher file, when it is safe.

Why: nvcc spends nearly all of a load_inline build parsing torch's headers, three times over
(the device front end, cudafe++ and the host compiler), while the kernels themselves compile in
under a second. A typical KernelBench .cu uses torch only in its host launcher. Split so:

- ``kernels.cu`` keeps the includes, types and every ``__global__``/``__device__`` item, minus the
  torch includes, plus one small host wrapper per kernel that does the ``<<<...>>>`` launch. nvcc
  compiles it with the original flags, in about a second.
- ``launch.cpp`` keeps the host functions, with each ``k<<<g, b, s, st>>>(args)`` rewritten into
  ``kp_launch_k(g, b, s, st, args)`` (an ordinary call with the kernel's own parameter types, so
  the arguments convert exactly as they did). The C++ compiler builds it beside main.cpp, with a
  precompiled torch header when one is available.

The device code nvcc sees is the user's own text, with the same flags. The split is refused
(returns None, and the caller builds the original way) on anything this reader does not fully
understand: preprocessor conditionals, namespaces, templated kernels, a kernel named outside a
launch, torch names in device code. A split that then fails to compile is also retried the
original way by the caller, so the split can only make a build faster, never reject one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Include prefixes that belong to torch (go to the launcher only).
_TORCH_INCLUDE = re.compile(r"#\s*include\s*[<\"](torch/|ATen/|c10/|pybind11/|caffe2/|THC/|Python\.h)")
# Headers that only make sense for nvcc (go to the kernel file only).
_DEVICE_INCLUDE = re.compile(
    r"#\s*include\s*[<\"](mma\.h|cooperative_groups|cub/|cuda/|cute/|cutlass/|cuda_pipeline|crt/|"
    r"sm_\d+_intrinsics|device_launch_parameters\.h|math_constants\.h|cuda_awbarrier|[^>\"]*\.cuh)"
)
_TORCH_WORDS = re.compile(
    r"\b(torch|at|c10|pybind11|py)\s*::|\bnamespace\s+(torch|at|c10|pybind11|py)\b|"
    r"\b(AT_\w+|TORCH_\w+|C10_\w+|Tensor|scalar_t)\b"
)
_DEVICE_WORDS = re.compile(
    r"\b(__device__|__constant__|__managed__|__shared__|nvcuda|wmma|cooperative_groups|cg\s*::|cuda\s*::)"
)
# What torch's headers bring into a .cu besides torch itself (c10/util/Half.h includes cuda_fp16.h
# under nvcc; <cmath>, <cfloat>, <climits>, <algorithm> come with ATen): device code that relies on
# them unknowingly (FLT_MAX, INT_MAX, std::min, __half) still compiles without torch.
_KERNEL_PRELUDE = "".join(
    f"#include <{h}>\n"
    for h in (
        "cuda.h",
        "cuda_runtime.h",
        "cuda_fp16.h",
        "cuda_bf16.h",
        "cmath",
        "cfloat",
        "climits",
        "cstdint",
        "cstdio",
        "algorithm",
    )
)
_CONDITIONAL = re.compile(r"#\s*(if|ifdef|ifndef|elif|else|endif)\b")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_LAUNCH = re.compile(r"\b([A-Za-z_]\w*)\s*<<<")


@dataclass(frozen=True)
class Kernel:
    name: str  # the __global__ function's name
    params: tuple[str, ...]  # each parameter's declaration, default values removed
    param_names: tuple[str, ...]  # the names used to forward them


@dataclass(frozen=True)
class SplitSource:
    kernels_cu: str  # torch-free translation unit for nvcc
    launch_cpp: str  # host translation unit for the C++ compiler
    kernels: tuple[Kernel, ...]  # the kernels that got launch wrappers


@dataclass(frozen=True)
class _Item:
    text: str  # the item's source text, comments included
    line: int  # 1-based line where it starts
    kind: str  # "directive" | "function" | "declaration"
    head: str = ""  # functions: the text before the body's opening brace


class _Refuse(Exception):
    pass


def split_cuda_source(source: str, implicit_headers: bool = True) -> SplitSource | None:
    """Split one load_inline .cu source, or return None when the split is not certainly safe."""
    try:
        return _split(source, implicit_headers)
    except _Refuse:
        return None


def _split(source: str, implicit_headers: bool) -> SplitSource:
    items = _items(source)
    kernels: dict[str, Kernel] = {}
    device_names: set[str] = set()
    placed: list[tuple[_Item, str]] = []  # (item, "kernel" | "launch" | "both")
    for item in items:
        where = _classify(item, kernels, device_names)
        placed.append((item, where))
    if not kernels:
        raise _Refuse("no kernels")

    kernel_parts, launch_parts = [], []
    for item, where in placed:
        code = f'#line {item.line} "cuda.cu"\n{item.text}\n'
        if where in ("kernel", "both"):
            if _TORCH_WORDS.search(_strip_comments_strings(item.text)):
                raise _Refuse("torch names in device code")
            kernel_parts.append(code)
            if item.kind == "function" and "__global__" in item.head:
                # the launcher sees the wrapper's prototype where the kernel was defined
                launch_parts.append(_prototype(kernels[_function_name(_strip_comments_strings(item.head))]))
        if where in ("launch", "both"):
            if where == "launch" and item.kind != "directive":
                code = f'#line {item.line} "cuda.cu"\n{_rewrite_launches(item.text, kernels, device_names)}\n'
            launch_parts.append(code)
    kernel_parts.append("\n".join(_wrapper(k) for k in kernels.values()))
    prelude_l = (
        "#include <torch/types.h>\n" if implicit_headers else ""
    ) + "#include <cuda.h>\n#include <cuda_runtime.h>\n"
    prelude_k = _KERNEL_PRELUDE if implicit_headers else "#include <cuda.h>\n#include <cuda_runtime.h>\n"
    return SplitSource(
        prelude_k + "".join(kernel_parts), prelude_l + "".join(launch_parts), tuple(kernels.values())
    )


# -- reading top-level items --------------------------------------------------------------------
def _items(src: str) -> list[_Item]:
    """Cut the source into top-level items: directives, declarations (to ';'), function definitions."""
    items: list[_Item] = []
    i, n, line = 0, len(src), 1
    start, start_line, depth, paren = None, 1, 0, 0
    head_end = -1
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            if j < 0:
                raise _Refuse("unterminated comment")
            line += src.count("\n", i, j)
            i = j + 2
            continue
        if c in "\"'":
            if c == '"' and i > 0 and src[i - 1] == "R":
                raise _Refuse("raw string literal")
            j = _end_of_literal(src, i)
            line += src.count("\n", i, j)
            i = j
            continue
        if start is None:
            if c.isspace():
                i += 1
                continue
            if c == "#":
                j = i
                while True:
                    e = src.find("\n", j)
                    e = n if e < 0 else e
                    if e > 0 and src[e - 1] == "\\":
                        j = e + 1
                        continue
                    break
                text = src[i:e]
                if _CONDITIONAL.match(text):
                    raise _Refuse("preprocessor conditional at top level")
                items.append(_Item(text, line, "directive"))
                line += text.count("\n")
                i = e
                continue
            start, start_line, head_end = i, line, -1
        if c == "(":
            paren += 1
        elif c == ")":
            paren -= 1
        elif c == "{":
            if depth == 0:
                head_end = i
                head = src[start:i]
                if re.match(r"\s*(namespace|extern\s*\"C\"\s*$)", head) or re.search(r"\bnamespace\b", head):
                    raise _Refuse("namespace or linkage block")
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                raise _Refuse("unbalanced braces")
            if depth == 0 and paren == 0:
                head = src[start:head_end]
                if _is_function_head(head):
                    items.append(_Item(src[start : i + 1], start_line, "function", head))
                    start = None
        elif c == ";" and depth == 0 and paren == 0:
            items.append(_Item(src[start : i + 1], start_line, "declaration"))
            start = None
        i += 1
    if start is not None and src[start:].strip():
        raise _Refuse("trailing text")
    if depth != 0:
        raise _Refuse("unbalanced braces")
    return items


def _end_of_literal(src: str, i: int) -> int:
    q = src[i]
    j = i + 1
    while j < len(src):
        if src[j] == "\\":
            j += 2
            continue
        if src[j] == q:
            return j + 1
        if src[j] == "\n":
            raise _Refuse("newline in literal")
        j += 1
    raise _Refuse("unterminated literal")


def _is_function_head(head: str) -> bool:
    h = _strip_comments_strings(head).strip()
    if re.match(r"(template\s*<.*>\s*)?(struct|class|union|enum)\b", h, re.S) or "=" in h.split("(")[0]:
        return False
    return h.endswith(")") or bool(re.search(r"\)\s*(const|noexcept|override|->[^{]*)\s*$", h))


def _strip_comments_strings(text: str) -> str:
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'', '""', text)


# -- classifying ----------------------------------------------------------------------------------
def _classify(item: _Item, kernels: dict[str, Kernel], device_names: set[str]) -> str:
    code = _strip_comments_strings(item.text)
    if item.kind == "directive":
        if _TORCH_INCLUDE.match(code.strip()):
            return "launch"
        if _DEVICE_INCLUDE.match(code.strip()):
            return "kernel"
        if re.match(r"\s*#\s*pragma\s+once", code):
            return "none"
        if _TORCH_WORDS.search(code):
            return "launch"
        return "both"
    if item.kind == "function":
        head = _strip_comments_strings(item.head)
        if "__global__" in head:
            if re.match(r"\s*template\b", head):
                raise _Refuse("templated kernel")
            k = _parse_kernel(head)
            if k.name in kernels:
                raise _Refuse("overloaded kernel")
            kernels[k.name] = k
            return "kernel"
        if "__device__" in head:
            name = _function_name(head)
            if "__host__" in head:
                return "both"
            device_names.add(name)
            return "kernel"
        return "launch"
    # declarations
    if "__global__" in code:
        k = _parse_kernel(code.rstrip().rstrip(";"))
        device_names.add(k.name)  # a prototype: the definition must follow and be the one launched
        return "kernel"
    if _DEVICE_WORDS.search(code):
        m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*(=[^;]*)?;\s*$", code)
        if m:
            device_names.add(m.group(1))
        return "kernel"
    if _TORCH_WORDS.search(code):
        return "launch"
    stripped = code.strip()
    if re.match(
        r"(template\s*<.*?>\s*)?(struct|class|union|enum|typedef|using|static_assert)\b", stripped, re.S
    ):
        return "both"
    if re.search(r"\bconstexpr\b", stripped) or re.match(r"(static\s+)?const\b", stripped):
        return "both"
    return "launch"


def _name_and_params(head: str) -> tuple[str, str]:
    """The function's name and parameter text: the identifier before the last top-level (...)."""
    h = head.strip()
    h = re.sub(r"\)\s*(const|noexcept|override)?\s*$", ")", h)
    if not h.endswith(")"):
        raise _Refuse("function head")
    depth = 0
    for j in range(len(h) - 1, -1, -1):
        if h[j] == ")":
            depth += 1
        elif h[j] == "(":
            depth -= 1
            if depth == 0:
                m = re.search(r"([A-Za-z_]\w*)\s*$", h[:j])
                if not m:
                    raise _Refuse("unnamed function")
                return m.group(1), h[j + 1 : -1]
    raise _Refuse("function head")


def _function_name(head: str) -> str:
    return _name_and_params(head)[0]


def _parse_kernel(head: str) -> Kernel:
    name, param_text = _name_and_params(head)
    params = [p.strip() for p in _split_top(param_text)] if param_text.strip() not in ("", "void") else []
    decls, names = [], []
    for idx, p in enumerate(params):
        p = re.split(r"=(?![=])", p, maxsplit=1)[0].strip()  # drop a default value
        if "(" in p or "[" in p or "..." in p or "&" in p:
            raise _Refuse("unsupported kernel parameter")
        ids = _IDENT.findall(p)
        last = ids[-1] if ids else ""
        qualifiers = {"const", "volatile", "__restrict__", "__restrict", "restrict", "unsigned", "signed"}
        if len(ids) < 2 or last in qualifiers or p.rstrip().endswith("*") or last in _BUILTIN_TYPES:
            arg = f"kp_arg{idx}"
            p = f"{p} {arg}"
        else:
            arg = last
        decls.append(p)
        names.append(arg)
    return Kernel(name, tuple(decls), tuple(names))


_BUILTIN_TYPES = {
    "int",
    "float",
    "double",
    "char",
    "short",
    "long",
    "bool",
    "size_t",
    "int64_t",
    "int32_t",
    "half",
}


def _split_top(text: str) -> list[str]:
    """Split at commas outside (), [], {} and <> nesting."""
    out, depth, cur = [], 0, []
    for c in text:
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    out.append("".join(cur))
    return out


# -- writing ----------------------------------------------------------------------------------------
# The wrappers stay inside their own extension: two extensions loaded in one process may both
# have a kernel of the same name.
_HIDDEN = '__attribute__((visibility("hidden")))'


def _wrapper(k: Kernel) -> str:
    params = "".join(", " + p for p in k.params)
    args = ", ".join(k.param_names)
    return (
        f"{_HIDDEN} void kp_launch_{k.name}(dim3 kp_grid, dim3 kp_block, size_t kp_smem, cudaStream_t kp_stream{params}) {{\n"
        f"    {k.name}<<<kp_grid, kp_block, kp_smem, kp_stream>>>({args});\n}}\n"
    )


def _prototype(k: Kernel) -> str:
    params = "".join(", " + p for p in k.params)
    return f"{_HIDDEN} void kp_launch_{k.name}(dim3, dim3, size_t, cudaStream_t{params});\n"


def _rewrite_launches(text: str, kernels: dict[str, Kernel], device_names: set[str]) -> str:
    out, pos = [], 0
    for m in _LAUNCH.finditer(text):
        if m.start() < pos:
            raise _Refuse("nested launch")
        name = m.group(1)
        if name not in kernels:
            raise _Refuse(f"launch of {name}, not a kernel defined here")
        cfg_end = text.find(">>>", m.end())
        if cfg_end < 0:
            raise _Refuse("unterminated launch configuration")
        cfg = [c.strip() for c in _split_top_parens(text[m.end() : cfg_end])]
        if not 2 <= len(cfg) <= 4 or not all(cfg):
            raise _Refuse("launch configuration")
        cfg += ["0", "0"][: 4 - len(cfg)]
        j = cfg_end + 3
        while j < len(text) and text[j].isspace():
            j += 1
        if j >= len(text) or text[j] != "(":
            raise _Refuse("launch without arguments")
        args_end = _matching_paren(text, j)
        args = text[j + 1 : args_end]
        args = args if args.strip() else ""
        call = (
            f"kp_launch_{name}(dim3({cfg[0]}), dim3({cfg[1]}), (size_t)({cfg[2]}), (cudaStream_t)({cfg[3]})"
        )
        out.append(text[pos : m.start()])
        out.append(call + (", " + args if args else "") + ")")
        out.append("\n" * text.count("\n", m.start(), j))  # keep later lines where they were
        pos = args_end + 1
    out.append(text[pos:])
    rewritten = "".join(out)
    used = set(_IDENT.findall(_strip_comments_strings(rewritten)))
    clash = used & (set(kernels) | device_names)
    if clash:
        raise _Refuse(f"host code names device symbols: {sorted(clash)}")
    return rewritten


def _split_top_parens(text: str) -> list[str]:
    """Split a launch configuration at commas outside parentheses and brackets."""
    out, depth, cur = [], 0, []
    for c in text:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    out.append("".join(cur))
    return out


def _matching_paren(text: str, i: int) -> int:
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    raise _Refuse("unbalanced parentheses in launch")
