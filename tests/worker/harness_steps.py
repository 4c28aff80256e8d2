"""Every step the worker's harness takes on tensors, run once on small inputs (tests only).

The worker watches the aten operators these steps call (kernelproof.worker.checks.hooks); the test
beside this file runs the steps under torch's profiler and a recording dispatch mode, and fails
when a step calls an operator the watch list misses.
"""

from __future__ import annotations

import torch

from kernelproof.inputs import (
    DISTRIBUTIONS,
    InputSlot,
    case_inputs,
    checksum,
    draw,
    fingerprint,
    fingerprints,
    same_bits,
    timed_inputs,
)
from kernelproof.wire import protocol
from kernelproof.worker import addresses
from kernelproof.worker.checks import aliasing, mutation, output_type, reuse
from kernelproof.worker.poison import POISON_BYTE

DOMAINS = ("any", "positive", "nonzero", "unit")
FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
OTHERS = (torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool)


def run_all(device: str = "cpu") -> None:
    """Each harness step, for each dtype the wire carries."""
    dev = torch.device(device)
    for dtype in FLOATS:
        for distribution in DISTRIBUTIONS[1:]:
            for domain in DOMAINS:
                draw((4, 5), distribution, domain, 7, dev, dtype)
        slots = [
            InputSlot(0, "float", (4, 5), str(dtype).replace("torch.", ""), "any"),
            InputSlot(1, "fixed", (3,), "float32", "any"),
            InputSlot(2, "scalar", (), "float32", "any"),
        ]
        args = timed_inputs(slots, {1: draw((3,), "normal", "any", 1, dev, torch.float32)}, {2: 0.5}, 11, dev)
        case_inputs(slots[:1] + slots[2:], {2: 0.5}, "spiky", 3, dev)
        _output_steps(args[0], args)
    for dtype in OTHERS:
        t = draw((6,), "uniform01", "unit", 2, dev, torch.float32).to(dtype)
        _output_steps(t, [t.clone()])
    # large outputs and inputs take chunks (fingerprints, checksums, the input check): the same
    # steps with chunks of 8 elements
    import kernelproof.inputs as inputs

    chunk, inputs.FINGERPRINT_CHUNK = inputs.FINGERPRINT_CHUNK, 8
    try:
        big = draw((4, 5), "normal", "any", 9, dev, torch.float32)
        _output_steps(big, [big.clone()])
    finally:
        inputs.FINGERPRINT_CHUNK = chunk
    flush = torch.empty(64, dtype=torch.uint8, device=dev)
    flush.zero_()  # the clock's L2 flush
    torch.empty(64, dtype=torch.uint8, device=dev).fill_(POISON_BYTE)  # poison.fill's blocks


def _output_steps(out: torch.Tensor, args: list) -> None:
    """What the worker does with a call's output and inputs once the call has returned."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    originals = [(i, a.clone()) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    output_type.check([out], out.device)
    aliasing.check([out], args, ())
    mutation.check(args, originals, ())
    same_bits(out, out.clone())
    checksum(tensors)
    fingerprint(out, 5)
    fingerprints([out, out.clone()], 5)  # a back-to-back batch's outputs
    reuse.shared_with([out], [[out.clone()]])
    addresses.earlier([t.clone() for t in args if isinstance(t, torch.Tensor)], tensors)
    out.detach().to("cpu")
    [t.clone() for t in [out]]  # the copies kept once outputs are reused
    protocol.encode_tensor(out)
    if protocol.BULK_AVAILABLE:
        import os

        os.close(protocol.write_sealed(out))
