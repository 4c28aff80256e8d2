"""Progress and Ctrl-C for the command line's long verbs (bench, compare, audit, kernelbench,
optimize): what a person watching sees while nothing is finished yet, and how a run ends early.

Why: a verb over many items can run for minutes before its first result. On a terminal a blank
screen for 40 s reads as a hang; in a pipe (a CI log) the run must say, item by item, how far it
got. And Ctrl-C must end a run at once and say what it kept, never wait for the evaluations in
flight (minutes) nor print a traceback on a second Ctrl-C.

The interface (command-line code only; library code never prints, nor touches signals):

    from kernelproof import cli_progress

    with cli_progress.Progress("bench", total=len(pairs), console=out) as p:
        with cli_progress.keeping(lambda: f"{p.done} of {p.total} verdicts kept in the store"):
            p.running("level1/a.py")           # what is under way: "; running level1/a.py" at the
            p.state("worker ready at 5 s")      # live line's end, or any words (nothing in a pipe)
            ...
            p.finished("pass  level1/a.py")    # one item done: "[3/10] pass  level1/a.py"
            p.note("no solution for b.py")     # any other line, in both modes
        # parts as console.say takes them: p.finished(("DEGENERATE", "red"), " level1/b.py")

- On a terminal (not a dumb one) one live line at the bottom, redrawn every second:
  ``bench: 3/10 done, 42 s; running level1/a.py``. Lines printed through the object go above
  it; the line is erased when the block ends.
- In a pipe nothing is redrawn: each ``finished`` line is printed as it comes, with its count
  (``[3/10] pass  level1/a.py``), as it is on a terminal, above the live line.
- :func:`keeping` says what a Ctrl-C would leave behind. :func:`interruptible` (``kernelproof``'s
  ``main`` alone sets it; a test or notebook calling ``cli.run`` keeps Python's own Ctrl-C) turns
  the first Ctrl-C into ``interrupted: <what was kept>`` on stderr and exit 130 within
  STOP_GRACE_S: the workers in flight are ended (the exit handlers run in a helper thread), and a
  second Ctrl-C is ignored.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console

from kernelproof.text import terminal

REDRAW_S = 1.0  # the live line's clock moves once a second: often enough to see it move
STOP_GRACE_S = 3.0  # the exit handlers' time after a Ctrl-C (ending workers): the run ends within 5 s
EXIT_INTERRUPTED = 130  # kernelproof/exits.py's (not imported: this module sits below the verbs)

Part = str | tuple[str, str]  # text, or (text, Rich style): kernelproof/console.py's, made inert there
_active: list[Progress] = []  # live lines on screen, erased before the interruption's line
_kept: list[Callable[[], str]] = []  # what a Ctrl-C now leaves behind, innermost last
_lock = threading.RLock()


class Progress:
    """One verb's progress on ``console`` (default: stderr): a live line on a terminal, a line per
    finished item in a pipe. A context manager; safe to call from several threads."""

    def __init__(self, verb: str, total: int | None = None, *, console: Console | None = None) -> None:
        self.verb = verb
        self.total = total  # items expected, when known
        self.done = 0  # items finished so far
        self.console = console or Console(stderr=True, emoji=False)
        self.live = self.console.is_terminal and not self.console.is_dumb_terminal  # redrawn in place
        self._what = ""  # what is under way
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._shown = False  # whether a live line is on screen now
        self._steps: dict[str, str] = {}  # item in flight -> the step it reached (see step)

    def __enter__(self) -> Progress:
        if self.live:
            with _lock:
                _active.append(self)
            self._ticker = threading.Thread(target=self._tick, name=f"{self.verb}-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2 * REDRAW_S)
        with _lock:
            self._erase()
            if self in _active:
                _active.remove(self)

    def running(self, what: str) -> None:
        """Say what is under way now (``running WHAT`` at the end of the live line; nothing in a pipe)."""
        self.state(f"running {what}")

    def state(self, text: str) -> None:
        """Say where the verb stands, in words of its own (the end of the live line; nothing in a pipe)."""
        self._what = text
        self._draw()

    def step(self, item: str, words: str) -> None:
        """`item` (one of several in flight) reached the step `words`: the live line's end names the
        item and its step (``running level1/a.py: case 3 of 16 checked at 41 s``); nothing in a pipe."""
        with _lock:
            self._steps.pop(item, None)
            self._steps[item] = words  # the latest step last
            self._what = self._in_flight()
        self._draw()

    def item_done(self, item: str) -> None:
        """`item` is finished: the live line names what else is in flight."""
        with _lock:
            if self._steps.pop(item, None) is not None:
                self._what = self._in_flight()

    def _in_flight(self) -> str:
        """The item that moved last and its step, with how many others are in flight."""
        if not self._steps:
            return ""
        item, words = next(reversed(self._steps.items()))
        others = f" (and {len(self._steps) - 1} more)" if len(self._steps) > 1 else ""
        return f"running {item}: {words}{others}"

    def finished(self, *parts: Part, style: str = "") -> None:
        """One item done: its line (``parts``: text, or (text, Rich style)), the count before it."""
        with _lock:
            self.done += 1
            count = f"[{self.done}/{self.total}] " if self.total else f"[{self.done}] "
            self._print((count, *parts), style)

    def note(self, *parts: Part, style: str = "") -> None:
        """Any other line, in both modes (above the live line on a terminal)."""
        with _lock:
            self._print(parts, style)

    def line(self) -> str:
        """The live line's text: the verb, items done, seconds so far, what is under way."""
        elapsed = time.monotonic() - self._started
        done = (
            f"{self.done}/{self.total} done, " if self.total else f"{self.done} done, " if self.done else ""
        )
        what = f"; {self._what}" if self._what else ""
        return terminal(f"{self.verb}: {done}{elapsed:.0f} s{what}")

    def _print(self, parts: tuple[Part, ...], style: str) -> None:
        from kernelproof.console import line

        self._erase()
        self.console.print(line(*parts), style=style, highlight=False, soft_wrap=True)
        self._draw()

    def _tick(self) -> None:
        while not self._stop.wait(REDRAW_S):
            self._draw()

    def _draw(self) -> None:
        if not self.live or self._stop.is_set():
            return
        with _lock:
            width = max(10, self.console.width - 1)  # never the last column: no wrap, no scroll
            text = self.line()
            text = text if len(text) <= width else text[: width - 3] + "..."
            self._write("\r\x1b[2K" + text)
            self._shown = True

    def _erase(self) -> None:
        if self._shown:
            self._write("\r\x1b[2K")
            self._shown = False

    def _write(self, raw: str) -> None:
        try:
            self.console.file.write(raw)
            self.console.file.flush()
        except (OSError, ValueError):  # the terminal went away: nothing to show progress on
            self.live = False


# The evaluation's phases as kernelproof/evaluate/chain.py reports them, in words.
PHASE_WORDS = {
    "setup": "task set up (references, float64 oracle, audit, cases)",
    "build_done": "solution built",
    "worker_ready": "worker ready",
    "correctness_done": "correctness checked",
    "settled": "device settled for timing",
    "timing_done": "timed",
    "shapes_done": "probed shapes run",
}


def phase_line(phase: str, seconds: float) -> None:
    """``eval`` piped: a line on stderr per phase ended (stdout keeps the verdict alone)."""
    print(f"kernelproof: {PHASE_WORDS.get(phase, phase)} ({seconds:.1f} s)", file=sys.stderr, flush=True)


class ItemSteps:
    """A verb over many evaluations (bench) on a terminal: each evaluation's phases, named by its
    item (kernelproof/evaluate/phase_progress.py's ``about``), at the end of the live line. `name` says
    an item as the verb shows it (a path relative to its folder)."""

    def __init__(self, shown: Progress, name: Callable[[str], str] = str) -> None:
        self.shown = shown
        self.name = name

    def __call__(self, phase: str, seconds: float) -> None:
        from kernelproof.evaluate.phase_progress import current_item

        item = current_item()
        if item and self.shown.live:
            self.shown.step(self.name(item), f"{PHASE_WORDS.get(phase, phase)} at {seconds:.0f} s")

    def done(self, item: str) -> None:
        self.shown.item_done(self.name(item))


class PhaseLine:
    """``eval`` on a terminal: the phase reached, at the end of the live line."""

    def __init__(self, shown: Progress) -> None:
        self.shown = shown
        shown.state("setting the task up")

    def __call__(self, phase: str, seconds: float) -> None:
        self.shown.state(f"{PHASE_WORDS.get(phase, phase)} at {seconds:.0f} s")


class CompareSteps:
    """``compare``'s phases (A verified, then B, then both timed) as a :class:`Progress` shows
    them: the live line's tail on a terminal, a line each in a pipe."""

    def __init__(self, shown: Progress) -> None:
        self.shown = shown
        self.which = ""
        shown.state("verifying A")

    def phase(self, phase: str, seconds: float) -> None:
        """The sink of :func:`kernelproof.evaluate.phase_progress.reporting`: A's phases, then B's."""
        if phase == "setup":  # each solution's evaluation begins with the task's set-up
            self.which = "B" if self.which == "A" else "A"
        words = f"{self.which}: {PHASE_WORDS.get(phase, phase)}"
        if self.shown.live:
            self.shown.state(words)
        else:
            self.shown.note(f"compare: {words} ({seconds:.1f} s)")
        if phase in ("shapes_done", "correctness_done") and self.which == "B":
            self.shown.state("timing A and B, interleaved")


@contextmanager
def keeping(kept: Callable[[], str]) -> Iterator[None]:
    """Within the block, ``kept()`` says what a Ctrl-C leaves behind (``3 of 10 verdicts kept in
    the store``): the last words of an interrupted run."""
    with _lock:
        _kept.append(kept)
    try:
        yield
    finally:
        with _lock:
            _kept.remove(kept)


@contextmanager
def interruptible() -> Iterator[None]:
    """The whole process's Ctrl-C, for the ``kernelproof`` command (its ``main``): the first
    prints one line, ``interrupted: <what was kept>``, and ends the process with 130 within
    STOP_GRACE_S; a second is ignored (no traceback from an exit handler half-way through)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _on_interrupt(signum: int, frame: object) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: nothing more
    with _lock:
        for p in list(_active):
            p._stop.set()
            p._erase()
        kept = _kept[-1] if _kept else None
    if sys.stderr.isatty():
        _last_words_raw("\x1b[?25h")  # the cursor back, should a Rich display have hidden it
    try:
        said = kept() if kept is not None else "nothing was kept"
    except Exception:  # noqa: BLE001 - the last words must come whatever happened
        said = "nothing was kept"
    _last_words(f"interrupted: {said}")
    _wind_down()
    os._exit(EXIT_INTERRUPTED)


def _last_words(text: str) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    try:
        sys.stderr.write(terminal(text, limit=2000) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _end_children() -> None:
    """SIGKILL this process's own workers and builders (each with its process group: a worker
    leads its own session), the zygotes aside: :func:`kernelproof.host.zygote.shutdown` ends
    those, with the workers they forked. An evaluation in flight is thrown away, not finished."""
    me = os.getpid()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            if ppid != me:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"kernelproof.worker.zygote_main" in f.read():
                    continue
            pid = int(entry)
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError, IndexError):  # gone meanwhile, or not ours to read
            continue


def _last_words_raw(raw: str) -> None:
    try:
        sys.stderr.write(raw)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _wind_down() -> None:
    """End the workers in flight and run the exit handlers, for STOP_GRACE_S at most.

    Why a thread with a deadline: an evaluation in flight holds its thread for as long as its
    worker runs (minutes), and the thread pool waits for it at exit. The zygotes go first (each
    takes its forked workers with it), then the other handlers (spare workers, builders, temporary
    folders); whatever is still running after the grace is ended by the process's exit."""

    def run() -> None:
        zygotes = sys.modules.get("kernelproof.host.zygote")
        try:
            _end_children()
            if zygotes is not None:
                zygotes.shutdown()
        finally:
            atexit._run_exitfuncs()

    helper = threading.Thread(target=run, name="interrupted", daemon=True)
    helper.start()
    helper.join(STOP_GRACE_S)
