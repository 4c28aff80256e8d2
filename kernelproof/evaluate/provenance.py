"""Which verdict fields the parent established and which the candidate's worker reported (I10).

Why: a verdict is read by people, stores and agents who cannot see how each figure was obtained.
The candidate shares its process with the harness, so a launch record, a profile or a time the
worker reports can be forged from pure Python (a CPU launch list sits in a closure cell; a GPU
profile reply is a frame on a socket the candidate can write). Each verdict says so, field by
field: ``checked`` the parent decided from what it computed or measured itself, ``reported`` it
took from the worker, checked for form and cross-checked where it can (docs/verdict.md).
"""

from __future__ import annotations

from kernelproof.verdict import Coverage, Provenance, Timing

# Outputs compared in the parent against its own float64 oracle (the worker never holds them, I2).
CORRECTNESS = ("correctness",)
# The parent's clock around each batch (timing_tamper) and the datasheet floor (physics).
TIMING_CHECKED = ("timing.overhead_ms.outside", "roofline.floor_ms")
# The worker's clock: spans and per-call times, bounded by the parent's wall clock, and what follows
# from them (speedups, achieved rates).
TIMING_REPORTED = (
    "timing.candidate",
    "speedup",
    "roofline.achieved_tflops",
    "roofline.achieved_tbps",
    "roofline.sol_fraction",
)
# The launch record (CPU) or the profile's kernel list (GPU): the worker's account on both devices.
COVERAGE_REPORTED = ("coverage",)
BUILD_REPORTED = ("build.worker_compiled",)  # whether the worker's import compiled


def provenance_of(
    ran: bool, timing: Timing | None, coverage: Coverage | None, built: bool
) -> Provenance | None:
    """The record for a verdict whose candidate `ran` (None when it never did: nothing was reported)."""
    if not ran:
        return None
    checked = CORRECTNESS + (TIMING_CHECKED if timing is not None else ())
    reported = (
        (TIMING_REPORTED if timing is not None else ())
        + (COVERAGE_REPORTED if coverage is not None else ())
        + (BUILD_REPORTED if built else ())
    )
    return Provenance(checked, reported)
