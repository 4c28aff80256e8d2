"""The outputs a reply owes, known before any of its tensor data is read (I1, I8).

Why: a parent that reads a reply first and counts afterwards can be made to swallow memory.
Returning the right output plus four extra 512 MiB tensors took the parent to 7.1 GB at its peak
before the count was checked (issue 15); the parent holds the verdict, so its memory is not the
candidate's to spend. The parent states, with each request whose reply carries outputs, the
count, dtypes and shapes of the reference's (never their values, I2). The worker compares what
the call returned before it copies anything; the parent compares the reply's header before it
reads a byte of data, and refuses a mismatch with the code the comparison would have given
(``wrong_shape``, ``wrong_dtype``) without reading it.

The byte cap is the reference's own size (a multiple of one): tensors that match in count, dtype
and shape carry exactly those bytes, so any slack would only admit more than the parent already
holds for the reference. It is checked on its own, after the shapes, so that it still holds if a
future expectation is loosened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelproof.inputs import dtype_name
from kernelproof.verdict import ReasonCode
from kernelproof.wire.replies import failure

# The verdict flag for outputs of different calls that share storage (kernelproof.worker.checks.reuse).
OUTPUT_REUSED = "output_reused"
REUSED_NOTE = (
    "returned outputs that share storage (a static output buffer, CUDA-graph style); each was "
    "checked right after its own call, and a caller that keeps an output must copy it"
)
OUTPUT_BYTES_FACTOR = 1  # a reply's tensors may total this many times the expected bytes (see above)


@dataclass(frozen=True)
class Spec:
    """One output as the wire describes it: dtype and shape, no values."""

    dtype: str  # torch dtype name, e.g. "float32"
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        n = getattr(torch, self.dtype).itemsize
        for s in self.shape:
            n *= s
        return n

    @classmethod
    def of(cls, t: torch.Tensor) -> Spec:
        return cls(dtype_name(t.dtype), tuple(int(s) for s in t.shape))

    def describe(self) -> str:
        return f"shape {self.shape} {self.dtype}"


@dataclass(frozen=True)
class Expected:
    """What a reply's tensors must be: ``runs`` repetitions of the reference's outputs, in order."""

    outputs: tuple[Spec, ...]  # the reference's results of one call (outputs, then in-place arguments)
    runs: int = 1  # calls whose results the reply carries (a correctness case sends both of its runs)

    @classmethod
    def like(cls, tensors: Sequence[torch.Tensor], runs: int = 1) -> Expected:
        return cls(tuple(Spec.of(t) for t in tensors), runs)

    def to_json(self) -> dict[str, Any]:
        return {
            "outputs": [{"dtype": s.dtype, "shape": list(s.shape)} for s in self.outputs],
            "runs": self.runs,
        }

    @classmethod
    def from_json(cls, doc: Any) -> Expected | None:
        """The expectation a request carries, or None when it carries none (or a malformed one)."""
        try:
            outputs = tuple(Spec(str(o["dtype"]), tuple(int(s) for s in o["shape"])) for o in doc["outputs"])
            return cls(outputs, int(doc.get("runs", 1)))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def on_wire(self, delivered: Sequence[int] = ()) -> list[Spec]:
        """The tensors the reply itself carries: every run's results, less those of the first run
        delivered into the parent's device buffers (kernelproof.wire.handoff)."""
        first = [s for i, s in enumerate(self.outputs) if i not in set(delivered)]
        return first + list(self.outputs) * (self.runs - 1)


COUNT_OF_A_CALL = "forward returned {got} outputs, the reference returns {want}"
COUNT_OF_A_REPLY = "the worker's reply carries {got} tensors where {want} were expected"


def refuse_reply(
    header: dict[str, Any], specs: list[tuple[str, tuple[int, ...]]], expected: Expected | None
) -> dict[str, Any] | None:
    """The parent's side: a failed reply to stand for a reply whose tensors, as its header declares
    them, cannot be the outputs ``expected``; None when the data may be read.

    A failed reply owes no tensors at all: whatever it carries is dropped unread. Without an
    expectation, nothing is refused here (the frame reader's own limits still hold).
    """
    if not specs:
        return None
    if header.get("ok") is not True:
        return dict(header)  # read as failed by every caller; its tensors are dropped
    if expected is None:
        return None
    delivered = header.get("delivered") or []
    delivered = [d for d in delivered if isinstance(d, int)] if isinstance(delivered, list) else []
    got = [Spec(dtype, tuple(shape)) for dtype, shape in specs]
    found = refusal(expected.on_wire(delivered), got, COUNT_OF_A_REPLY)
    if found is None:
        return None
    code, message = found
    return failure(code, f"{message} (refused from the reply's header, before its data was read)")


def refusal(
    expected: Sequence[Spec], got: Sequence[Spec], count: str = COUNT_OF_A_CALL
) -> tuple[ReasonCode, str] | None:
    """Why ``got`` cannot be the outputs ``expected`` describes, as a reason code and a sentence; None
    when they match. Shapes and dtypes in the words of the parent's comparison (verify/oracle_compare.py)."""
    if len(got) != len(expected):
        return ReasonCode.WRONG_SHAPE, count.format(got=len(got), want=len(expected))
    for k, (want, have) in enumerate(zip(expected, got)):
        where = f"output {k}: " if len(expected) > 1 else ""
        if have.shape != want.shape:
            return ReasonCode.WRONG_SHAPE, f"{where}output shape {have.shape}, expected {want.shape}"
        if have.dtype != want.dtype:
            return (
                ReasonCode.WRONG_DTYPE,
                f"{where}output dtype torch.{have.dtype}, expected torch.{want.dtype}",
            )
    cap = OUTPUT_BYTES_FACTOR * sum(s.nbytes for s in expected)
    total = sum(s.nbytes for s in got)
    if total > cap:
        return ReasonCode.WRONG_SHAPE, f"the outputs total {total} bytes, more than the {cap} allowed"
    return None
