"""How much of a call's GPU work is the submission's own: the fractions launch accounting decides on.

Every kernel counts its device duration above the device's launch floor (measure/floor.py): the
part that is work, not the fixed cost any launch has. Under both policies. ``strict`` divides the
solution's kernels' work by all the work; ``library-ok`` leaves vendor-library kernels (a cuBLAS
GEMM) out of the denominator. The raw fractions (whole durations) are reported beside them: on a
GPU whose floor could not be measured they are what decides, as before.

Two kinds of device activity are neither the solution's work nor library work, and
:func:`classify` takes them out of the deciding fractions (the raw ones count them as ATen):

- *movement*: device-to-device copies and memsets, up to the outputs' and inputs' size in all (a
  CUDA-graph solution copying its inputs in and returning ``out.clone()``, an output zeroed before
  an atomic reduction). A host-to-device
  copy stays counted: "compute on the host, copy up" must not pass; so does a copy beyond the
  outputs' size, or one whose size is known neither from the profiler's record nor from the ATen op
  that launched it (its largest input's elements times the task's smallest element size: the
  profiler of torch 2.11 on an H200 gave no bytes for a ``clone``'s device-to-device copy).
- *epilogue*: at most ``EPILOGUE_MAX_KERNELS`` ATen kernels, beside at least one of the
  solution's own, each either launched by an op whose every input is small (at most
  1/``EPILOGUE_INPUT_FRACTION`` of the task's inputs' elements: a reduction of partial sums, a
  scalar multiply), or near the launch floor (at most ``EPILOGUE_FLOOR_MULTIPLE`` floors, together
  at most ``EPILOGUE_SHARE`` of the solution's kernels' time, where those kernels do real work: at
  least ``OWN_WORK_FLOORS`` floors above the floor in all). An ATen op that computes the output
  from the inputs reads them: it is not small. A decoy's ATen op at a size worth timing is far above the floor (the deciding shape
  is the largest timed: kernelproof/evaluate/timing.py), and a decoy whose own kernels do nothing
  (one element, a launch repeated) never qualifies.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

COVERAGE_MIN = {
    "strict": 0.8,
    "library-ok": 0.5,
}  # share of the (non-library) GPU work in the submission's kernels


EPILOGUE_FLOOR_MULTIPLE = 2.0  # an ATen kernel at most this many launch floors long is near the floor
EPILOGUE_SHARE = 0.5  # the epilogue's time, at most this share of the solution's own kernels' time
EPILOGUE_MAX_KERNELS = 4
EPILOGUE_INPUT_FRACTION = 16  # an op over at most 1/16 of the inputs' elements works on a small tensor
OWN_WORK_FLOORS = (
    2.0  # the solution's kernels' time above the floor, in floors, for an epilogue to be set aside
)
MOVEMENT = re.compile(r"^(Memcpy DtoD|Memset)")  # device-to-device copies and memsets (CUPTI's names)
SET_ASIDE = ("movement", "epilogue")  # origins out of the deciding fractions


def classify(
    rows: Sequence[tuple],
    budget_bytes: int,
    floor_us: float | None,
    small_elements: int = 0,
    element_bytes: int = 0,
) -> list[tuple[str, str, float]]:
    """(name, origin, ms) with data movement and a small ATen epilogue given their own origins.

    `rows`: (name, origin, device ms, bytes moved or -1[, the largest input in elements of the ATen
    op that launched it, or -1]) as launch accounting attributed them. `small_elements`: an ATen op
    whose every input is at most this many elements works on a small tensor (0: none does).
    `element_bytes`: the bytes of an element, to size a copy or memset whose bytes the profiler did
    not give from its op's largest input (0: such a copy is not sized, and stays counted).
    """
    out: list[tuple[str, str, float]] = []
    sizes: list[int] = []
    budget = max(0, int(budget_bytes))
    for row in rows:
        name, origin, ms, nbytes = row[0], row[1], row[2], row[3]
        sizes.append(int(row[4]) if len(row) > 4 else -1)
        if nbytes < 0 and element_bytes > 0 and sizes[-1] > 0:
            nbytes = sizes[-1] * element_bytes  # an unsized op (the worker's 1 << 62) lands beyond any budget
        if origin == "aten" and MOVEMENT.match(name) and 0 <= nbytes <= budget:
            budget -= nbytes
            out.append((name, "movement", ms))
        else:
            out.append((name, origin, ms))
    own_ms = sum(ms for _, o, ms in out if o == "solution")
    if own_ms <= 0:
        return out
    small = [
        i
        for i, (n, o, _) in enumerate(out)
        if o == "aten" and 0 <= sizes[i] <= small_elements and not n.startswith(("Memcpy", "Memset"))
    ]  # a copy is never an epilogue: "compute on the host, copy the small result up" stays counted
    near: list[int] = []
    if floor_us:
        floor_ms = floor_us / 1e3
        own_work = sum(max(0.0, ms - floor_ms) for _, o, ms in out if o == "solution")
        near = [
            i
            for i, (_, o, ms) in enumerate(out)
            if o == "aten" and i not in small and ms <= EPILOGUE_FLOOR_MULTIPLE * floor_ms
        ]
        if own_work < OWN_WORK_FLOORS * floor_ms or sum(out[i][2] for i in near) > EPILOGUE_SHARE * own_ms:
            near = []  # the solution's kernels do no real work, or the near-floor ATen work is not small
    chosen = small + near
    if not chosen or len(chosen) > EPILOGUE_MAX_KERNELS:
        return out  # many ATen kernels: real work split up, counted
    for i in chosen:
        out[i] = (out[i][0], "epilogue", out[i][2])
    return out


@dataclass(frozen=True)
class Shares:
    """The submission's share of the GPU work under each policy, whole durations and above the floor."""

    raw: dict[str, float]  # policy -> share of whole durations
    above_floor: dict[str, float]  # policy -> share of durations above the floor
    floor_us: float | None  # the floor subtracted from each kernel (None: not measured, nothing subtracted)


def shares(kernels: Sequence[tuple[str, str, float]], floor_us: float | None) -> Shares:
    """`kernels`: (name, origin, device ms) with origin solution | library | aten | movement | epilogue.

    The raw fractions count movement and epilogue as ATen work (whole durations, as before this
    classification); the deciding ones leave them out and count each kernel above the floor."""
    floor_ms = (floor_us or 0.0) / 1e3

    def fractions(rows, work, fallback: dict[str, float] | None = None) -> dict[str, float]:
        total = sum(work(ms) for _, _, ms in rows)
        custom = sum(work(ms) for _, o, ms in rows if o == "solution")
        library = sum(work(ms) for _, o, ms in rows if o == "library")
        out = {}
        for policy, denom in (("strict", total), ("library-ok", total - library)):
            if denom > 0:
                out[policy] = custom / denom
            elif fallback is not None:  # every kernel at the floor: nothing to weigh above it
                out[policy] = fallback[policy]
            else:
                out[policy] = 1.0 if custom > 0 else 0.0
        return out

    whole = [(n, "aten" if o in SET_ASIDE else o, ms) for n, o, ms in kernels]
    counted = [(n, o, ms) for n, o, ms in kernels if o not in SET_ASIDE]
    raw = fractions(whole, lambda ms: ms)
    if floor_us:
        above = fractions(counted, lambda ms: max(0.0, ms - floor_ms), fractions(counted, lambda ms: ms))
    else:
        above = fractions(counted, lambda ms: ms)
    if not any(o == "solution" for _, o, _ in kernels):  # no launch of its own: nothing above any floor
        above = {p: 0.0 for p in above}
    return Shares(raw, above, floor_us)
