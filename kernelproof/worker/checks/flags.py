"""Numeric flags are as the precision contract pinned them, after every call (I7; class C7).

TF32 or reduced-precision reductions switched on by the solution speed it up at a precision the
task did not allow, and change what later code computes. The flags are read back after each call
and compared with the contract's targets. cuDNN's benchmark and deterministic modes choose among
algorithms at the same precision: they are the solution's to set (kernelproof.flags.NEUTRAL), and
the parent flags them from the load reply.
"""

from __future__ import annotations

from typing import Any

from kernelproof import flags as numeric_flags
from kernelproof.verdict import ReasonCode
from kernelproof.wire.replies import failure


def check(expected: dict[str, Any]) -> dict[str, Any] | None:
    """A failed reply when a flag differs from ``expected`` or cannot be read; else None."""
    try:
        now = numeric_flags.read()
    except Exception as exc:  # noqa: BLE001
        return failure(ReasonCode.FLAGS_CHANGED, f"numeric flags could not be read after the call: {exc}")
    changed = numeric_flags.precision_differences(expected, now)  # cuDNN benchmark/deterministic: allowed
    if changed:
        return failure(ReasonCode.FLAGS_CHANGED, f"the solution changed numeric flags: {', '.join(changed)}")
    return None
