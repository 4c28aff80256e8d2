"""KernelBench's problems at reduced sizes: a smoke run on a small machine (``--sizes small``).

Why: KernelBench's level 1 holds tensors of gigabytes; on a CPU with a few cores a run at the
published sizes judges nothing in the time a user waits (issue 49). Its tasks state their sizes as
module-level integer constants (``N = 2048 * 2``, ``batch_size = 16``), read by ``get_inputs`` and
``get_init_inputs``; dividing the large ones keeps every task's structure, dtypes and operations.

A verdict at reduced sizes is a different judgement from one at the published sizes, and the two
are never mixed: the scaled copy is another file, so its sha256, the store's key, differs
(kernelproof/store.py), and every entry written from it carries its ``sizes`` label
(kernelproof/report/kernelbench_run.py). The copies are written into the run folder, under
``.kernelproof/sizes-1of<F>/level<L>/``, where a reader of a verdict's task path finds what was
judged.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kernelproof.errors import UsageError

SMALL_FACTOR = 16  # ``--sizes small``: the large size constants divided by this
SCALE_FROM = 64  # constants below this (kernel sizes, strides, channels of a few, batch sizes) are kept
SCALED_FLOOR = SCALE_FROM // 2  # a divided constant never drops below this
SCALED_FOLDER = ".kernelproof"  # in the run folder: the scaled copies of the problems


def parse_sizes(text: str) -> int:
    """``--sizes``: ``published`` (1), ``small`` (:data:`SMALL_FACTOR`), or a factor N (the large
    size constants divided by N); UsageError else."""
    word = text.strip().lower()
    if word in ("published", "full", "1"):
        return 1
    if word == "small":
        return SMALL_FACTOR
    if word.isdigit() and int(word) >= 1:
        return int(word)
    raise UsageError(
        f"--sizes takes published, small (the large size constants divided by {SMALL_FACTOR}) or a "
        f"factor such as 8, not {text!r}"
    )


def sizes_label(factor: int) -> str:
    """How eval_results.json and the table name the sizes: ``published`` or ``1/<factor>``."""
    return "published" if factor <= 1 else f"1/{factor}"


def scaled_source(source: str, factor: int) -> str:
    """The task with each one-line module-level integer constant of at least :data:`SCALE_FROM`
    divided by ``factor`` (at least :data:`SCALED_FLOOR`); anything else is left as it is."""
    if factor <= 1:
        return source
    tree = ast.parse(source)
    lines = source.splitlines()
    for node in tree.body:
        if not (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            continue
        if node.lineno != node.end_lineno:
            continue
        value = _constant(node.value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= SCALE_FROM:
            indent = lines[node.lineno - 1][: node.col_offset]
            lines[node.lineno - 1] = f"{indent}{node.targets[0].id} = {max(SCALED_FLOOR, value // factor)}"
    return "\n".join(lines) + "\n"


def _constant(node: ast.expr) -> object:
    """The value of an arithmetic expression of integer literals (``2048 * 2``, ``2**20``), or None."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(
        node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Pow)
    ):
        left, right = _constant(node.left), _constant(node.right)
        if not (isinstance(left, int) and isinstance(right, int)):
            return None
        if isinstance(node.op, ast.Pow) and not 0 <= right <= 64:
            return None
        if isinstance(node.op, ast.FloorDiv) and right == 0:
            return None
        ops = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__}
        ops |= {ast.FloorDiv: int.__floordiv__, ast.Pow: int.__pow__}
        return ops[type(node.op)](left, right)
    return None


def scaled_copy(task: Path, factor: int, run_dir: Path, level: int) -> Path:
    """The problem file ``task`` scaled by ``factor``, written (only when changed) under the run
    folder; the task itself at factor 1."""
    if factor <= 1:
        return task
    try:
        text = scaled_source(task.read_text(), factor)
    except SyntaxError as exc:
        raise UsageError(f"{task} does not parse, so its sizes cannot be scaled: {exc}") from None
    dest = Path(run_dir) / SCALED_FOLDER / f"sizes-1of{factor}" / f"level{level}" / task.name
    if not dest.is_file() or dest.read_text() != text:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
    return dest
