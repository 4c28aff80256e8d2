"""A large output's fingerprint: what it costs against one plain read of the output.

Every timed call's output is checked against the reference on that call's fresh inputs by its
fingerprint, [<w, x>, ||x||] in float64 (kernelproof/inputs.py): the worker computes it of the
candidate's output, the parent of the reference's, and a large case's second run comes back as
one. On KernelBench level 1's 6.4 GB-a-tensor tasks that is two fingerprints of 6.4 GB for each
timed call of a few milliseconds, so its cost is the timed rounds' cost. Each row is the best of
``--repeats`` runs after one warm-up, on the same tensor; the ratios are to the plain read
(``x.sum()``: the least any fingerprint can cost) and to the elementwise method the library used
before (a mask, a ``where`` and the products, each a float64 temporary), both measured in this run.
Two rows time the projections alone, as drawn (float32, widened) and drawn in float64: whether
the widening pass is worth saving where the draws are cheap. On CUDA two more time a fresh
allocation of the output's size (the caching allocator emptied first, as a worker that lets go
of its buffers pays for its next large tensor) against a fill of a buffer already held. Why: on
an H200 (results/h200-2026-12-07-i) the worker of a 6.4 GB case reported about 0.11 s for its
second run's fingerprint and 0.09 s for drawing its inputs, where the device's 4.8 TB/s reads
6.4 GB in about 1.3 ms.

    python benchmarks/fingerprint_cost.py                         # 6.4 GB on CUDA if present
    python benchmarks/fingerprint_cost.py --device cpu --gb 0.4
"""

from __future__ import annotations

import argparse
import time

import torch
from _common import table, write_json

from kernelproof import inputs


def elementwise(outputs: list[torch.Tensor], seed: int) -> list[list[float]]:
    """The previous chunked fingerprint, kept here as the comparison: per chunk, the float64 copy,
    its finite mask, a ``where`` and the products and squares as temporaries."""
    n, device = outputs[0].numel(), outputs[0].device
    flats = [t.reshape(-1) for t in outputs]
    dots = torch.zeros(len(outputs), dtype=torch.float64, device=device)
    squares = torch.zeros(len(outputs), dtype=torch.float64, device=device)
    for index, at in enumerate(range(0, n, inputs.FINGERPRINT_CHUNK)):
        size = min(inputs.FINGERPRINT_CHUNK, n - at)
        w = inputs._projection(size, inputs._chunk_seed(seed, index), device).to(torch.float64)
        for i, flat in enumerate(flats):
            x = flat[at : at + inputs.FINGERPRINT_CHUNK].to(torch.float64)
            x = torch.where(torch.isfinite(x), x, float("nan"))
            dots[i] += (x * w).sum()
            squares[i] += x.square().sum()
    return [[float(d), float(q)] for d, q in zip(dots.tolist(), squares.sqrt().tolist())]


def _projections(n: int, chunk: int, device: torch.device, dtype: torch.dtype | None) -> float:
    """Every chunk's projection of an n-element output as the fingerprint draws it (float32, then
    widened), or drawn in float64 directly: whether the widening pass is worth saving."""
    total = torch.zeros((), dtype=torch.float64, device=device)
    for index, at in enumerate(range(0, n, chunk)):
        size, seed = min(chunk, n - at), inputs._chunk_seed(7, index)
        if dtype is None:  # the library's own draw
            w = inputs._projection(size, seed, device)
        else:
            g = torch.Generator(device=device)
            g.manual_seed(seed)
            w = torch.randn(size, generator=g, device=device, dtype=dtype)
        total += w.to(torch.float64)[-1]
    return float(total)


def _fresh(x: torch.Tensor) -> float:
    """A buffer of x's size from the device itself, not the allocator's cache: what a worker
    that emptied its cache pays for its next large tensor."""
    torch.cuda.empty_cache()
    return float(torch.empty_like(x).fill_(1.0)[0])


def best_ms(fn, device: torch.device, repeats: int) -> tuple[float, object]:
    result = fn()  # warm-up: the allocator's blocks, the generator's state
    if device.type == "cuda":
        torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return min(times), result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--gb", type=float, default=6.4, help="the output's size (float32), in GB")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    device = torch.device(args.device)
    x = torch.rand(int(args.gb * 1e9) // 4, device=device)
    seed = 12345
    floor_ms, _ = best_ms(lambda: float(x.sum()), device, args.repeats)
    rows_spec = (
        ("one read of the output (x.sum())", lambda: None),
        ("elementwise (the previous method)", lambda: elementwise([x], seed)[0]),
        ("fingerprint (kernelproof.inputs)", lambda: inputs.fingerprint(x, seed)),
        ("each of two at once (a timed batch)", lambda: inputs.fingerprints([x, x], seed)),
    )
    chunk = inputs.FINGERPRINT_CHUNK
    rows_spec += (
        ("its projections alone (float32, widened)", lambda: _projections(x.numel(), chunk, device, None)),
        ("its projections drawn in float64", lambda: _projections(x.numel(), chunk, device, torch.float64)),
    )
    if device.type == "cuda":
        spare = torch.empty_like(x)
        rows_spec += (
            ("fill a buffer already held", lambda: float(spare.fill_(1.0)[0])),
            ("allocate afresh, then fill", lambda: _fresh(x)),
        )
    rows, doc = [], {"device": str(device), "gb": args.gb, "elements": x.numel(), "rows": []}
    ms_by = {rows_spec[0][0]: floor_ms}
    values = {}
    for name, fn in rows_spec[1:]:
        ms_by[name], values[name] = best_ms(fn, device, args.repeats)
    ms_by[rows_spec[3][0]] /= 2  # per output: the batch shares each chunk's projection
    old = ms_by[rows_spec[1][0]]
    for name, ms in ms_by.items():
        rows.append([name, f"{ms:.1f}", f"{ms / floor_ms:.1f}", f"{old / ms:.2f}"])
        doc["rows"].append({"what": name, "ms": ms, "per_read": ms / floor_ms, "old_over_this": old / ms})
    want, got = values[rows_spec[1][0]], values[rows_spec[2][0]]
    drift = max(abs(a - b) for a, b in zip(want, got)) / want[1]
    doc["relative_difference"] = drift
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"{name}: a {args.gb} GB float32 output ({x.numel()} elements), best of {args.repeats}")
    print(table(rows, ["fingerprint", "ms", "x one read", "previous / this"]))
    print(f"the two methods' fingerprints differ by {drift:.1e} of the norm (allowed: 6e-06 at the least)")
    write_json("fingerprint-cost.json", doc)


if __name__ == "__main__":
    main()
