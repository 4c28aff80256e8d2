"""How much of a call's GPU work is the submission's own: the fractions launch accounting decides on.

Every kernel counts its device duration above the device's launch floor (measure/floor.py): the
part that is work, not the fixed cost any launch has. Under both policies. ``strict`` divides the
solution's kernels' work by all the work; ``library-ok`` leaves vendor-library kernels (a cuBLAS
GEMM) out of the denominator. The raw fractions (whole durations) are reported beside them: on a
GPU whose floor could not be measured they are what decides, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

COVERAGE_MIN = {
    "strict": 0.8,
    "library-ok": 0.5,
}  # share of the (non-library) GPU work in the submission's kernels


@dataclass(frozen=True)
class Shares:
    """The submission's share of the GPU work under each policy, whole durations and above the floor."""

    raw: dict[str, float]  # policy -> share of whole durations
    above_floor: dict[str, float]  # policy -> share of durations above the floor
    floor_us: float | None  # the floor subtracted from each kernel (None: not measured, nothing subtracted)


def shares(kernels: Sequence[tuple[str, str, float]], floor_us: float | None) -> Shares:
    """`kernels`: (name, origin, device ms) with origin solution | library | aten."""
    floor_ms = (floor_us or 0.0) / 1e3

    def fractions(work, fallback: dict[str, float] | None = None) -> dict[str, float]:
        total = sum(work(ms) for _, _, ms in kernels)
        custom = sum(work(ms) for _, o, ms in kernels if o == "solution")
        library = sum(work(ms) for _, o, ms in kernels if o == "library")
        out = {}
        for policy, denom in (("strict", total), ("library-ok", total - library)):
            if denom > 0:
                out[policy] = custom / denom
            elif fallback is not None:  # every kernel at the floor: nothing to weigh above it
                out[policy] = fallback[policy]
            else:
                out[policy] = 1.0 if custom > 0 else 0.0
        return out

    raw = fractions(lambda ms: ms)
    above = fractions(lambda ms: max(0.0, ms - floor_ms), raw) if floor_us else raw
    if not any(o == "solution" for _, o, _ in kernels):  # no launch of its own: nothing above any floor
        above = {p: 0.0 for p in above}
    return Shares(raw, above, floor_us)
