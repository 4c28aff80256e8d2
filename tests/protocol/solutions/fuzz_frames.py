"""Write hostile frames to every descriptor the worker has: one strategy, at one place.

Strategy: fuzzing the parent's reading of replies. The file is copied under a name
``fuzz__<strategy>__<place>.py`` (tests/protocol/test_fuzz_frames.py) and reads both from it:

- strategies: ``random`` bytes; a ``truncated`` frame (cut inside its prefix, its header or before
  its tensor data); ``oversized`` (a header of a terabyte, a 60 GiB inline tensor declared);
  ``reordered`` (a frame's parts in the wrong order); ``unrequested`` (well-formed replies of every
  kind with a nonce of its own);
- places: at ``import``, in ``__init__``, in ``forward``, and from a ``thread`` forward starts and
  joins.

Every descriptor from 0 to 1023 is written (os.write raises no audit event; a closed or read-only
one just refuses). The computation itself is honest.
Class: D1 (fake result emission) against the reply protocol.
Invariant attacked: I10 (every byte from a worker is hostile input). Each run ends as
protocol_violation, or has no effect; the parent never raises and never allocates what a header
declares.
Why a naive evaluator accepts it: it trusts the first frame it can parse.
"""

import json
import os
import random
import struct
import threading
import zlib

import torch
import torch.nn as nn

_, STRATEGY, PLACE = os.path.basename(__file__)[: -len(".py")].split("__")
KINDS = ("prebuilt", "load", "run", "fetch", "time", "steady", "profile", "bye")


def _frame(header, metas=()):
    head = json.dumps({**header, "_tensors": list(metas)}).encode()
    return b"KP1" + struct.pack("<Q", len(head)) + head


def _frames(rng):
    """The byte strings this strategy writes, in order."""
    whole = _frame({"ok": True, "op": "time", "span_ms": [1e-6], "nonce": rng.getrandbits(62)})
    if STRATEGY == "random":
        return [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 4096)))]
    if STRATEGY == "truncated":
        tensor = _frame({"ok": True, "op": "fetch"}, [{"dtype": "float32", "shape": [4], "nbytes": 16}])
        return [rng.choice([whole[:5], whole[:20], whole[: len(whole) - 3], tensor])]
    if STRATEGY == "oversized":
        huge = [{"dtype": "uint8", "shape": [60 * 2**30], "nbytes": 60 * 2**30}]
        return [rng.choice([b"KP1" + struct.pack("<Q", 1 << 40), _frame({"ok": True, "op": "fetch"}, huge)])]
    if STRATEGY == "reordered":
        return [whole[11:] + whole[:11]]
    if STRATEGY == "unrequested":
        return [_frame({"ok": True, "op": k, "nonce": rng.getrandbits(62)}) for k in KINDS]
    raise ValueError(STRATEGY)


def _write_everywhere():
    rng = random.Random(zlib.crc32(f"{STRATEGY}/{PLACE}".encode()))
    for data in _frames(rng):
        for fd in range(1024):
            try:
                os.write(fd, data)
            except OSError:
                pass


def _at(place):
    if PLACE != place:
        return
    if place == "thread":
        t = threading.Thread(target=_write_everywhere)
        t.start()
        t.join()
    else:
        _write_everywhere()


_at("import")


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))
        _at("init")

    def forward(self, x):
        _at("forward")
        _at("thread")
        return torch.relu(x) * self.scale + self.bias
