"""Signal handlers the solution installs: its code, run at any moment of the harness's own steps (D4).

Why: a Python signal handler runs in the main thread, between two bytecodes of whatever runs when
its signal arrives. A solution that asks for SIGIO on the worker's own socket (``fcntl``'s
``F_SETOWN`` and ``O_ASYNC``: no audit event) has its handler run when the parent's next message
arrives, which in a timed batch is after the call's window has closed and before its fingerprint
is taken: a call that returned its output unwritten had it computed there, outside every window
(an interval timer does the same on a clock). The trace hooks and modes of :mod:`.hooks` are the
same kind of entry point; this is the one the signal module offers.

What is watched, from :func:`watch` on (before the solution is imported): every callable handler
installed through ``_signal.signal`` (which ``signal.signal`` calls), recorded as it is installed,
so that a handler that puts the old one back after running is still named; and the handlers in
place, compared with the snapshot. Either is ``harness_hooked``. The functions used are bound
here at import and the wrapper is identity-checked (:func:`guarded`).
"""

from __future__ import annotations

import _signal
import signal
from collections.abc import Callable

_getsignal = _signal.getsignal  # the builtin: signal.getsignal calls _signal's at call time
_valid = _signal.valid_signals


def _name(signum: object) -> str:
    try:
        return signal.Signals(int(signum)).name  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return f"signal {signum!r}"[:40]


def _handlers() -> dict[int, object]:
    out = {}
    for s in _valid():
        try:
            out[int(s)] = _getsignal(s)
        except (OSError, ValueError):  # pragma: no cover - a signal Python cannot query
            continue
    return out


def watch() -> Callable[[], list[str]]:
    """Snapshot the handlers now and record every handler installed from now on; the returned
    function names what was installed since, or differs from the snapshot (empty when nothing)."""
    installed: list[str] = []
    before = _handlers()
    original = _signal.signal

    def recording(signalnum, handler):
        if callable(handler):
            installed.append(f"a signal handler for {_name(signalnum)}")
        return original(signalnum, handler)

    _signal.signal = recording

    def found() -> list[str]:
        now = _handlers()
        changed = [
            f"a signal handler for {_name(s)}"
            for s, h in now.items()
            if h is not before.get(s) and callable(h)
        ]
        return list(dict.fromkeys(installed + changed))

    return found


def guarded() -> list[tuple[object, str]]:
    """The attribute :func:`watch` replaced, for the identity check of the harness's functions."""
    return [(_signal, "signal")]
