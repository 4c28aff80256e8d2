"""Terminal rendering of verdicts: a compact summary a person (or an agent) can act on.

Everything a verdict holds may come from the candidate (paths, reason messages and details,
flags, backend and device names read back from a store), so every string goes through
:func:`kernelproof.text.terminal` and reaches Rich as plain :class:`~rich.text.Text`: no escape
sequence, Rich markup or emoji code in it is interpreted (kernelproof/text.py says why).

Tables are laid out for the terminal they are printed on, 80 columns included (a pipe is 80 wide
unless ``COLUMNS`` says otherwise): paths are shown relative to the suite or the current
directory, and a path too long for its column is folded onto the next line, never cut.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kernelproof.text import LINE_CHARS, terminal
from kernelproof.verdict import ShapeTiming, Speedup, Verdict

STYLE = {"pass": "bold green", "fail": "bold red", "error": "bold yellow"}
DETAIL_LINES = 12  # lines of a reason's detail shown; the JSON verdict has all of them
WORD_CHARS = 20  # a table cell's room for its longest word: the longest reason code (output_aliases_input)
ROUNDS_LISTED = 8  # per-round ratios printed one by one up to this many rounds; a summary beyond

WHOLE_LINE_CHARS = 8000  # an error or a stored row's problem, shown whole; only a flood is capped
# A reason's message, shown whole up to about twelve 80-column lines: its advice comes last (run
# again with --correctness-only, ...), and LINE_CHARS cut machine_busy's before it; a flood (a
# 10 kB exception message) is still capped, and the JSON keeps all of it.
REASON_CHARS = 1000
Part = str | tuple[str, str]  # text, or (text, Rich style); the text is always made inert


def make_console(*, stderr: bool = False) -> Console:
    """A console that never turns ``:name:`` in printed text into an emoji."""
    return Console(stderr=stderr, emoji=False)


def line(*parts: Part, limit: int = LINE_CHARS) -> Text:
    """One line of our words and candidate text: every part made inert (and capped at ``limit``
    characters), styles applied as given."""
    out = Text()
    for part in parts:
        text, style = (part, "") if isinstance(part, str) else part
        out.append(terminal(text, limit=limit), style=style)
    return out


def say(console: Console, *parts: Part, style: str = "", limit: int = LINE_CHARS) -> None:
    """Print :func:`line` ``(*parts)`` with no markup, highlighting or emoji read into it, unfolded
    (a long path is never cut into pieces a grep cannot find)."""
    console.print(line(*parts, limit=limit), style=style, highlight=False, soft_wrap=True)


def print_error(console: Console, message: str, *, label: str = "error") -> None:
    """The one wording of an error, for every verb: ``error: <message>`` (on ``console``: stderr),
    on one line however narrow the terminal, whole (up to WHOLE_LINE_CHARS), so that a script's
    grep finds it and a person reads all of it."""
    console.print(
        line((f"{label}:", "red"), f" {message}", limit=WHOLE_LINE_CHARS), highlight=False, soft_wrap=True
    )


def say_wrapped(
    console: Console, *parts: Part, style: str = "", hang: int = 4, limit: int = LINE_CHARS
) -> None:
    """Print :func:`line` ``(*parts)`` (each part capped at ``limit`` characters) wrapped at words to
    the console's width (80 in a pipe unless ``COLUMNS`` says otherwise), each further line indented
    ``hang`` more than the first. A word longer than the width (a path) is never broken: it goes
    whole on a line of its own."""
    for piece in wrap_words(line(*parts, limit=limit), console.width, hang):
        console.print(piece, style=style, highlight=False, soft_wrap=True)


def wrap_words(text: Text, width: int, hang: int = 4) -> list[Text]:
    """``text`` cut into lines no wider than ``width`` at spaces (styles kept), the lines after the
    first indented by the first's indent plus ``hang``; words are never broken."""
    plain = text.plain
    if len(plain) <= width or "\n" in plain:
        return [text]
    indent = len(plain) - len(plain.lstrip(" ")) + hang
    breaks: list[int] = []
    start, room = 0, width
    for word in re.finditer(r"\S+", plain):
        if word.end() - start > room and word.start() > start and plain[start : word.start()].strip():
            breaks.append(word.start())
            start, room = word.start(), max(1, width - indent)
    pieces = text.divide(breaks)
    out = [pieces[0]]
    for piece in pieces[1:]:
        out[-1].rstrip()
        out.append(Text(" " * indent) + piece)
    return out


def display_path(path: str, root: str | os.PathLike | None = None) -> str:
    """``path`` as a person reads it: relative to ``root`` (a suite) when inside it, else relative to
    the current directory when inside that, else as given. Relative paths are kept as given (a
    stored one was relative to wherever that evaluation ran)."""
    p = Path(path)
    if root is not None:  # a bench's paths were given here, relative to this directory or not
        try:
            return str(Path(os.path.abspath(p)).relative_to(os.path.abspath(root)))
        except ValueError:
            pass
    if not p.is_absolute():
        return path
    try:
        rel = p.relative_to(os.getcwd())
    except ValueError:
        return path
    return str(rel) if str(rel) != "." else p.name


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}x"


def fmt_speedup(s: Any) -> str:
    if s is None or s.median is None:
        return "-"
    if s.ci95 is None:
        return fmt_ratio(s.median)
    return f"{fmt_ratio(s.median)} [{s.ci95[0]:.3g}, {s.ci95[1]:.3g}]"


def fmt_ms(ms: float | None) -> str:
    if ms is None or ms != ms:
        return "-"
    if ms < 0.1:
        return f"{ms * 1000:.1f} us"
    return f"{ms:.3f} ms"


def print_verdict(v: Verdict, console: Console | None = None) -> None:
    c = console or make_console()
    device = v.environment.get("device_name", v.environment.get("device"))
    say_wrapped(
        c,
        (v.verdict.value.upper(), STYLE.get(v.verdict.value, "")),
        f"  {display_path(v.solution.path)}  vs  {display_path(v.task.path)}"
        f"  ({v.solution.backend or '?'} backend, {device})",
    )
    if v.stored is not None:
        c.print(f"  stored verdict from {v.stored.at} (--fresh re-runs)", highlight=False, markup=False)
    for r in v.reasons:
        say_wrapped(c, f"  {r.code.value}: {r.message}", style="red", limit=REASON_CHARS)
        if r.detail:
            detail = terminal(r.detail, multiline=True, max_lines=DETAIL_LINES)
            for text in detail.splitlines():  # wrapped under its indent; a path is never cut
                for piece in wrap_words(Text(f"      {text}"), c.width, hang=2):
                    c.print(piece, highlight=False, soft_wrap=True)
    missing = [n for n, x in (v.environment.get("sandbox") or {}).items() if not x.get("active")]
    if missing:
        say_wrapped(
            c,
            f"  sandbox: {', '.join(missing)} not active (python -m kernelproof.sandbox says why)",
            style="yellow",
        )
    if v.build is not None:
        b = v.build
        how = "cache hit" if b.cached else f"built in {b.build_s:.1f} s"
        extra = f", {b.strategy}" if b.strategy else ""
        extra += ", rebuilt after a refused cache entry" if b.rebuilt else ""
        say_wrapped(c, f"  build: {how}{extra} (waited {b.wait_s:.1f} s)")
    if v.correctness is not None and v.correctness.cases_run:  # nothing ran: no case line to show
        k = v.correctness
        kb = (
            ""
            if k.kernelbench_compatible is None
            else f"; KernelBench's rule: {'accept' if k.kernelbench_compatible else 'reject'}"
        )
        say_wrapped(
            c,
            f"  cases: {k.cases_passed}/{k.cases_run} passed; worst rel. error {k.worst_rel_norm_err:.2e} "
            f"(contract {k.precision}{f', {k.precision_source}' if k.precision_source else ''}){kb}",
        )
    if v.timing is not None:
        for sh in v.timing.shapes:
            for text in shape_lines(sh):
                say_wrapped(c, text)
    for text in speedup_lines(v):
        say_wrapped(c, text)
    if v.roofline is not None and v.roofline.sol_fraction is not None:
        r = v.roofline
        say_wrapped(
            c,
            f"  roofline: {r.achieved_tflops or 0:.2f} TFLOP/s, {r.achieved_tbps or 0:.3f} TB/s, "
            f"{r.sol_fraction:.1%} of speed of light (floor {fmt_ms(r.floor_ms)})",
        )
    if v.coverage is not None and v.coverage.custom_fraction is not None:
        say_wrapped(
            c, f"  kernel coverage: {v.coverage.custom_fraction:.0%} of GPU time in the solution's kernels"
        )
    elif v.coverage is not None and v.coverage.custom_launches is not None:  # the CPU: launches counted
        cov = v.coverage
        outside = ", ".join(cov.aten_outside) or "none"
        count = f"{cov.custom_launches} of the solution's per forward"
        say_wrapped(c, f"  kernel launches: {count}; ATen ops outside them: {outside}")
    if v.claims is not None and v.claims.note:  # what the verdict does not claim (measure/claims.py)
        say_wrapped(c, f"  claims: {v.claims.note}")
    if _task_did_not_load(v):  # nothing of the solution ran: its flags and a seed would mislead
        say_wrapped(c, f"  the solution was not run: the task must load first; {v.elapsed_s:.1f} s")
        return
    for f in v.flags:
        say_wrapped(c, f"  flag: {f}", style="dim")
    why = reward_why(v)
    say_wrapped(
        c,
        f"  reward {v.reward:.3f}{f' ({why})' if why else ''}; {v.elapsed_s:.1f} s; seed {v.settings.get('seed')}",
    )


def _task_did_not_load(v: Verdict) -> bool:
    """A task_error before any case ran: the task is at fault, and nothing was run with a seed."""
    ran = v.correctness is not None and v.correctness.cases_run > 0
    return v.verdict.value == "error" and "task_error" in v.codes and not ran and v.timing is None


def reward_why(v: Verdict) -> str:
    """Why a verdict's reward is 0, in words ("" when it is not 0, or not a pass: no reward is
    expected there). Mirrors :func:`kernelproof.verdict.compute_reward`: a pass earns only the
    speedup it shows with 95% confidence, so "PASS ... reward 0.000" is never left unexplained."""
    if v.verdict.value != "pass" or v.reward > 0:
        return ""
    if v.claims is not None and not v.claims.speed:
        return f"speed is not a claim here ({v.claims.speed_withheld}): the reward has no speed term"
    best = v.speedup.get("best") or v.speedup.get("eager")
    if best is None or best.median is None:
        if v.settings.get("correctness_only"):
            return "not timed: --correctness-only"
        return "no speedup was measured"
    if best.ci95 is None:
        return "the speedup has no 95% interval (too few rounds), and the reward counts only what one shows"
    low = best.ci95[0]
    return (
        f"the speedup's 95% lower bound, {fmt_ratio(low)}, is not above 1x: no speedup shown with confidence"
    )


# --- the speedup story ------------------------------------------------------------------------------
# A speedup is the median of paired per-round ratios (kernelproof/measure/stats.py), not the ratio
# of the medians printed above it: the two differ when times move between rounds. The text says
# which it is, shows the rounds it came from, and says so when the medians tell another story.


def shape_lines(sh: ShapeTiming) -> list[str]:
    """One timed shape: each program's median over its calls, then each baseline's per-round ratios."""
    cand = sh.candidate
    out = [
        f"  timing [{sh.regime}, {sh.shape}, {sh.clock}]: {sh.rounds} paired rounds,"
        f" stopped by {sh.stopped_by}",
        f"      candidate: {fmt_ms(cand.median_ms)} median of {cand.n} calls"
        f" (mean {fmt_ms(cand.mean_ms)}, max {fmt_ms(cand.max_ms)})",
    ]
    for name, st in sh.baselines.items():
        out.append(f"      {name}: {fmt_ms(st.median_ms)} median of {st.n} calls")
    for s in sh.speedups:
        if s.round_ratios and s.baseline in sh.baselines:
            out.append(f"      {s.baseline} / candidate, per round: {_rounds_text(s.round_ratios)}")
    return out


def speedup_lines(v: Verdict) -> list[str]:
    """The headline speedups, each saying what statistic it is."""
    names = _in_order([v])
    out = []
    for name in [*names, "best"] if len(names) > 1 else names:
        s = v.speedup.get(name)
        if s is None:
            continue
        who = "the best baseline (the faster one in each round)" if name == "best" else name
        if s.median is None:
            out.append(f"  speedup over {who}: - ({s.note or 'not measured'})")
            continue
        figure = fmt_speedup(s)
        if s.round_ratios:
            n = len(s.round_ratios)
            round_of = "the faster baseline's mean" if name == "best" else f"{name}'s mean"
            out.append(
                f"  speedup over {who} {figure}, median of {n} paired rounds"
                f" (each round: {round_of} / the candidate's mean of its calls"
                + ("; 95% CI by bootstrap over rounds)" if s.ci95 else f"; {s.note or 'no interval'})")
            )
            out += _disagreement(v, s)
        elif s.note:
            out.append(f"  speedup over {who} {figure}, {s.note}")
        else:
            out.append(f"  speedup over {who} {figure}")
    return out


def _rounds_text(ratios: Sequence[float]) -> str:
    if len(ratios) <= ROUNDS_LISTED:
        return " ".join(fmt_ratio(r) for r in ratios)
    q = sorted(ratios)
    lo, hi = q[len(q) // 4], q[(3 * len(q)) // 4]
    middle = f"middle half {fmt_ratio(lo)} to {fmt_ratio(hi)}"
    return f"{fmt_ratio(q[0])} to {fmt_ratio(q[-1])} over {len(q)} rounds ({middle})"


def _disagreement(v: Verdict, s: Speedup) -> list[str]:
    """A note when the ratio of the medians over all calls lies outside the speedup's interval.

    Why: a reader divides the two medians printed above and expects the speedup; when the rounds
    disagree (the candidate fast in some, slow in others) the paired statistic is another number.
    """
    shapes = [sh for sh in (v.timing.shapes if v.timing else ()) if sh.regime == "cold"]
    if len(shapes) != 1 or s.ci95 is None:
        return []
    sh = shapes[0]
    if s.baseline == "best":
        medians = [st.median_ms for st in sh.baselines.values()]
        base = min(medians) if medians else None
    else:
        base = sh.baselines[s.baseline].median_ms if s.baseline in sh.baselines else None
    cand = sh.candidate.median_ms
    if not base or not cand or base != base or cand != cand:
        return []
    overall = base / cand
    if s.ci95[0] <= overall <= s.ci95[1]:
        return []
    return [
        f"      the medians over all calls give {fmt_ratio(overall)}, outside that interval: the rounds"
        " disagree (times moved between rounds; docs/timing.md)"
    ]


# --- tables ---------------------------------------------------------------------------------------


def _table(title: str, columns: list[tuple[str, str]], rows: list[list[Any]], width: int) -> Table:
    """A table no wider than ``width``. Columns are (header, kind): "right" or "" are as wide as
    their widest cell; "fold" columns share what is left. Each "fold" column first gets room for
    its longest word (up to WORD_CHARS: no reason code is broken), then the first of them gets what
    it needs before the next: its text (a path) folds onto more lines when it must, nothing is cut."""
    flexible = [i for i, (_, kind) in enumerate(columns) if kind == "fold"]
    cells = [[_plain(r[i]).split("\n") for r in rows] for i in range(len(columns))]
    natural = [
        max([len(name)] + [len(x) for c in cells[i] for x in c]) for i, (name, _) in enumerate(columns)
    ]
    words = [
        max([len(w) for c in cells[i] for x in c for w in x.split()] or [1]) for i in range(len(columns))
    ]
    overhead = 2 * (len(columns) - 1)  # one space of padding and one of rule between columns
    room = width - overhead - sum(natural[i] for i in range(len(columns)) if i not in flexible)
    widths = {i: min(natural[i], words[i], WORD_CHARS) for i in flexible}
    room -= sum(widths.values())
    for i in flexible:
        extra = max(0, min(room, natural[i] - widths[i]))
        widths[i] += extra
        room -= extra
    t = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    for i, (name, kind) in enumerate(columns):
        if i in flexible:
            t.add_column(name, overflow="fold", width=widths[i])
        else:
            t.add_column(name, justify="right" if kind == "right" else "left", no_wrap=True)
    for r in rows:
        t.add_row(*(cell if isinstance(cell, Text) else Text(str(cell)) for cell in r))
    return t


def _plain(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _speedup_cell(s: Speedup | None) -> str:
    if s is None or s.median is None:
        return "-"
    if s.ci95 is None:
        return fmt_ratio(s.median)
    return f"{fmt_ratio(s.median)}\n{s.ci95[0]:.2g}-{s.ci95[1]:.2g}"  # the 95% interval, under the median


def _in_order(verdicts: Sequence[Verdict]) -> list[str]:
    """The baselines of these verdicts' speedups ("best" aside), in the order they were asked for."""
    names: list[str] = []
    for v in verdicts:
        asked = list(v.settings.get("baselines") or ())
        found = [n for n in v.speedup if n != "best"]
        names += [
            n
            for n in sorted(found, key=lambda n: (n not in asked, asked.index(n) if n in asked else 0, n))
            if n not in names
        ]
    return names


def _figures(verdicts: Sequence[Verdict]) -> tuple[list[tuple[str, str]], Any]:
    """The speedup columns, narrow enough for 80 columns: the first baseline asked for, and "best"
    (the fastest baseline in each round) beside two or more; SOL where a roofline was measured.
    The other baselines' speedups are in ``eval``'s text and every verdict's JSON."""
    asked = _in_order(verdicts) or ["eager"]
    names = asked[:1] + (["best"] if len(asked) > 1 else [])
    sol = any(v.roofline and v.roofline.sol_fraction is not None for v in verdicts)
    short = {"compile:default": "compile"}  # the --baselines shorthand
    columns = [(f"vs {short.get(n, n)}", "right") for n in names] + ([("SOL", "right")] if sol else [])

    def cells(v: Verdict) -> list[str]:
        out = [_speedup_cell(v.speedup.get(n)) for n in names]
        if sol:
            frac = v.roofline.sol_fraction if v.roofline else None
            out.append("-" if frac is None else f"{frac:.0%}")
        return out

    return columns, cells


def _verdict_cell(v: Verdict) -> Text:
    """The outcome, styled, and under it the reason codes (inert: a store may hold anything), and
    "stored" for a verdict served from the store rather than evaluated now."""
    out = line((v.verdict.value, STYLE.get(v.verdict.value, "")))
    if v.codes:
        out.append("\n" + terminal(", ".join(v.codes)))
    if v.stored is not None:
        out.append("\nstored", style="dim")
    return out


class AskedPaths:
    """Each verdict of a bench under the task and solution paths given for it.

    Why: a verdict served from the store carries the paths of the evaluation that made it
    (``suite/level1/10_silu.py``), and the same files benched from ``tasks/a.py`` must be shown
    as ``tasks/a.py``. A verdict is matched to the pair whose files have its two sha256 (each pair
    once); a verdict matching none (a file changed meanwhile) is shown as it is.
    """

    def __init__(self, pairs: Sequence[tuple[str | os.PathLike, str | os.PathLike]]) -> None:
        self._left: list[tuple[str, str, str, str]] = []  # task sha, solution sha, task, solution
        for task, solution in pairs:
            try:
                digests = (_sha256(task), _sha256(solution))
            except OSError:
                continue
            self._left.append((*digests, str(task), str(solution)))

    def shown(self, v: Verdict) -> Verdict:
        """``v`` with the paths asked for, for display (its JSON document keeps its own)."""
        for i, (task_sha, solution_sha, task, solution) in enumerate(self._left):
            if (task_sha, solution_sha) == (v.task.sha256, v.solution.sha256):
                del self._left[i]
                if (task, solution) == (v.task.path, v.solution.path):
                    return v
                return dataclasses.replace(
                    v,
                    task=dataclasses.replace(v.task, path=task),
                    solution=dataclasses.replace(v.solution, path=solution),
                )
        return v


def _sha256(path: str | os.PathLike) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def bench_table(verdicts: list[Verdict], *, suite: str | os.PathLike | None = None, width: int = 80) -> Table:
    """The tasks of one bench, by task path (relative to the suite), as wide as ``width`` at most."""
    figures, cells = _figures(verdicts)
    columns = [("task", "fold"), ("verdict", "fold"), ("time", "right"), *figures]
    rows = []
    for v in sorted(verdicts, key=lambda x: x.task.path):
        shape = v.timing.shapes[0] if v.timing and v.timing.shapes else None
        rows.append(
            [
                line(display_path(v.task.path, suite)),
                _verdict_cell(v),
                fmt_ms(shape.candidate.median_ms) if shape else "-",
                *cells(v),
            ]
        )
    where = f" of {display_path(os.path.abspath(suite))}" if suite is not None else ""
    tasks = f"{len(verdicts)} task" + ("" if len(verdicts) == 1 else "s")
    return _table(f"kernelproof bench: {tasks}{where}", columns, rows, width)


def kernelbench_table(rows: list[tuple[str, Verdict | None]], *, title: str, width: int = 80) -> Table:
    """A KernelBench run's samples in the order given: the problem file and sample id, the verdict
    (``missing`` for a sample the run folder lacks), the mean time per call KernelBench records."""
    figures, cells = _figures([v for _, v in rows if v is not None])
    columns = [("problem / sample", "fold"), ("verdict", "fold"), ("mean", "right"), *figures]
    body = []
    for label, v in rows:
        if v is None:
            body.append([line(label), line(("missing", "dim")), "-", *["-"] * len(figures)])
            continue
        cold = [s for s in v.timing.shapes if s.regime == "cold"] if v.timing else []
        shape = next((s for s in cold if s.shape == "default"), cold[0] if cold else None)  # the task's own
        mean = fmt_ms(shape.candidate.mean_ms) if shape and v.passed else "-"
        body.append([line(label), _verdict_cell(v), mean, *cells(v)])
    return _table(title, columns, body, width)


def results_table(verdicts: list[Verdict], *, width: int = 80) -> Table:
    """Stored verdicts in the order given (the store's: newest first): when, the task with its
    solution under it, the verdict with its reasons, the speedups."""
    figures, cells = _figures(verdicts)
    columns = [("stored", ""), ("task / solution", "fold"), ("verdict", "fold"), *figures]
    rows = []
    for v in verdicts:
        rows.append(
            [
                Text(terminal(v.created_at[:10]) + "\n" + terminal(v.created_at[11:16])),
                Text(terminal(display_path(v.task.path)) + "\n" + terminal(display_path(v.solution.path))),
                _verdict_cell(v),
                *cells(v),
            ]
        )
    return _table("stored verdicts, newest first", columns, rows, width)
