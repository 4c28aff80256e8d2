"""The ``kernelproof`` process's stdout when its reader goes away."""

from __future__ import annotations

import os


class ClosedPipeSafe:
    """stdout for the ``kernelproof`` process: once the reader has gone (``| head``), what is left
    to write is dropped and the verb ends with its own exit code, not 1 or 120 and a traceback.

    Why: a closed pipe is the reader's choice, not a failure of the verb; a pass piped into
    ``head`` exits 0. The descriptor is pointed at /dev/null so that the interpreter's last flush
    at exit finds nothing to complain about.
    """

    def __init__(self, stream) -> None:
        self._stream = stream
        self.closed_by_reader = False

    def write(self, text: str) -> int:
        if not self.closed_by_reader:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self.closed_by_reader:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        self.closed_by_reader = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
