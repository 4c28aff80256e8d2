"""Pull the one solution file out of a model's answer, or say precisely why there is none.

An answer that holds no usable file (no code, no ``ModelNew``, a syntax error, cut off at the
token limit) becomes a candidate with a :class:`Rejection`: it is never evaluated, costs no GPU
time, never counts as an evaluated candidate and is never selected, and its message goes back to
the model as feedback. Everything that parses is left to the evaluator to judge: this module reads
text, it never decides correctness.

When an answer holds several code blocks only one becomes the file; the others are dropped, and
the model is told which block was taken and why each other one was not (``Extraction.note``),
since a helper in a second block or a CUDA source in its own block is a common mistake that the
evaluator's verdict alone would not explain.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kernelproof import pyast
from kernelproof.agent.call_records import Rejection

MAX_SOLUTION_BYTES = 256_000  # far above any real solution file; bounds what is written and sent back
MAX_IDEA_CHARS = 600  # one idea is a sentence or two
MAX_NOTED_BLOCKS = 8  # dropped code blocks named in the feedback (an answer may hold thousands)

# A fenced block: a line opening with ``` or ~~~ and an optional language tag, the body, and the
# next line that is that fence alone (trailing blanks allowed).
_FENCES = ("```", "~~~")
_LANG = re.compile(r"[ \t]*([\w+.-]*)")
_PY_TAGS = {"", "python", "py", "python3"}
_ITEM = re.compile(r"^\s*(?:#{1,4}\s*)?(?:\d+[.)]|[-*•]|idea\s*\d+\s*[:.)-])\s+", re.IGNORECASE)


@dataclass(frozen=True)
class Extraction:
    """What an answer yields: the solution file, or why there is none, and how it was read."""

    source: str | None  # the solution file ("\n"-terminated), None when the answer holds none
    rejection: Rejection | None  # why there is no file
    note: str = ""  # which of several code blocks was taken and why the others were dropped


@dataclass(frozen=True)
class _Block:
    number: int  # 1-based, in the answer's order
    lang: str  # the fence's language tag, lower case
    body: str  # the block's text
    first_line: int  # where the block starts and ends in the answer (1-based, fences included)
    last_line: int

    def where(self) -> str:
        tag = self.lang or "no language tag"
        return f"block {self.number} ({tag}, lines {self.first_line}-{self.last_line})"


def extract_solution(text: str, finish_reason: str = "stop") -> Extraction:
    """The solution file in ``text``, or a rejection saying what is wrong with the answer.

    The file is the last fenced Python block that defines ``class ModelNew`` and parses (answers
    often show a draft before the final version); an answer with no fence at all is taken whole
    when it parses and defines ``ModelNew``.
    """
    if not text.strip():
        return _rejected("The answer was empty.", f"finish_reason={finish_reason}")
    blocks = _blocks(text)
    python = [b for b in blocks if b.lang in _PY_TAGS]
    cut_off = finish_reason == "length"
    if not python:
        if _defines_model_new(text):
            return Extraction(*_check(text, cut_off))
        if cut_off or text.count("```") % 2 == 1:
            return _rejected(
                "The answer was cut off before its code block closed: answer with one shorter, complete file.",
                f"finish_reason={finish_reason}",
            )
        return _rejected(
            "The answer holds no Python code block: answer with one complete solution file "
            "in a single ```python block."
        )
    with_model = [b for b in python if "ModelNew" in b.body]
    if not with_model:
        return _rejected(
            "No code block defines `class ModelNew(nn.Module)`: the solution file must define it."
        )
    last_error: Rejection | None = None
    failed: dict[int, str] = {}  # block number -> why it was not taken
    for block in reversed(with_model):
        source, rejection = _check(block.body, cut_off=False)
        if source is not None:
            return Extraction(source, None, _dropped_note(blocks, block, failed))
        assert rejection is not None
        failed[block.number] = rejection.message
        last_error = last_error or rejection
    return Extraction(None, last_error)


def _blocks(text: str) -> list[_Block]:
    """The closed fenced blocks of ``text``, in one pass over its lines (linear in its length).

    Why not one regular expression: a lazy match from every unclosed fence rescans to the end of
    the answer, so a long answer with many unclosed fences took quadratic time (minutes for a few
    hundred kB). Here the next closing line of each fence kind is known for every line in advance,
    so an opening without a close is passed over at once, as the expression would have done.
    """
    lines = text.split("\n")
    nxt: dict[str, list[int]] = {f: [0] * len(lines) for f in _FENCES}  # next closing line after i
    following = {f: -1 for f in _FENCES}
    for i in range(len(lines) - 1, -1, -1):
        for f in _FENCES:
            nxt[f][i] = following[f]
        if lines[i].rstrip(" \t") in _FENCES:
            following[lines[i].rstrip(" \t")] = i
    out = []
    i = 0
    while i < len(lines):
        f = lines[i][:3]
        close = nxt[f][i] if f in nxt else -1
        if close < 0:
            i += 1
            continue
        lang = _LANG.match(lines[i], 3)
        body = "".join(line + "\n" for line in lines[i + 1 : close])
        out.append(_Block(len(out) + 1, lang.group(1).lower() if lang else "", body, i + 1, close + 1))
        i = close + 1
    return out


def _dropped_note(blocks: list[_Block], taken: _Block, failed: dict[int, str]) -> str:
    """Feedback for an answer of several blocks: which one became the file, and why not the others."""
    if len(blocks) < 2:
        return ""
    why = []
    for b in blocks:
        if b is taken:
            continue
        if b.lang not in _PY_TAGS:
            reason = "not a Python block; only the Python file is run (CUDA or C++ source goes inside it)"
        elif "ModelNew" not in b.body:
            reason = "it does not define ModelNew; code outside the one file is never seen by the evaluator"
        elif b.number in failed:
            reason = failed[b.number].rstrip(".")
        else:
            reason = "an earlier version; only the last complete file is evaluated"
        why.append(f"{b.where()}: {reason}")
    if len(why) > MAX_NOTED_BLOCKS:
        why = why[:MAX_NOTED_BLOCKS] + [f"and {len(why) - MAX_NOTED_BLOCKS} more blocks"]
    return (
        f"Your answer held {len(blocks)} code blocks. The solution file was taken from {taken.where()}, "
        "the last Python block that defines ModelNew and parses. Dropped: "
        + "; ".join(why)
        + ". Answer with one complete file in a single ```python block."
    )


def extract_ideas(text: str, limit: int) -> list[str]:
    """Optimisation ideas from a numbered or bulleted list; the whole answer when it has no list."""
    items: list[list[str]] = []
    open_item = in_code = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_code, open_item = not in_code, False
            continue
        match = None if in_code else _ITEM.match(line)
        if match:
            items.append([line[match.end() :].strip()])
            open_item = True
        elif not stripped:
            open_item = False
        elif open_item and not in_code:
            items[-1].append(stripped)
    ideas = [" ".join(parts) for parts in items]
    ideas = [_clip(i.strip(" *_")) for i in ideas if i.strip(" *_")]
    if not ideas and text.strip():
        ideas = [_clip(" ".join(text.split()))]
    return ideas[:limit]


def _check(source: str, cut_off: bool) -> tuple[str | None, Rejection | None]:
    if len(source.encode()) > MAX_SOLUTION_BYTES:
        return None, _malformed(f"The solution file is larger than {MAX_SOLUTION_BYTES} bytes.")
    try:
        tree = pyast.parse(source)
    except SyntaxError as exc:
        hint = " (the answer was cut off at the output-token limit)" if cut_off else ""
        return None, _malformed(
            f"The solution file does not parse: {exc.msg} at line {exc.lineno}{hint}.",
            _excerpt(source, exc.lineno),
        )
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in names:
        return None, _malformed(
            "The solution file does not define `class ModelNew` at module level: the evaluator imports it by that name."
        )
    return (source if source.endswith("\n") else source + "\n"), None


def _defines_model_new(text: str) -> bool:
    return re.search(r"^class\s+ModelNew\b", text, re.MULTILINE) is not None


def _malformed(message: str, detail: str = "") -> Rejection:
    return Rejection("malformed_answer", message, detail)


def _rejected(message: str, detail: str = "") -> Extraction:
    return Extraction(None, _malformed(message, detail))


def _excerpt(source: str, line: int | None, around: int = 2) -> str:
    if not line:
        return ""
    lines = source.splitlines()
    lo, hi = max(0, line - 1 - around), min(len(lines), line + around)
    return "\n".join(f"{i + 1:4d} | {lines[i]}" for i in range(lo, hi))


def _clip(text: str) -> str:
    return text if len(text) <= MAX_IDEA_CHARS else text[: MAX_IDEA_CHARS - 3] + "..."
