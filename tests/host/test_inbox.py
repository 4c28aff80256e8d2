"""The parent reads every frame from a worker as hostile input, before any use (I10).

The candidate shares the worker's process, and a write to the worker's socket raises no audit
event: it can forge a reply of any kind, malform one, or send frames nobody asked for. These tests
play the worker's side with a script (scripted_worker.py) and show that each such frame ends the
worker as ``protocol_violation``, that the parent never raises and never allocates what a header
declares, and, with the checks switched off (a test-only switch), what the same frames did before.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from kernelproof.errors import WorkerDied
from kernelproof.host import process
from kernelproof.measure.session import Program, time_variant
from kernelproof.options import EvalOptions
from kernelproof.task import load_task
from kernelproof.verify.case_plan import build_variant, make_inputs
from kernelproof.wire.expected import Expected

sys.path.insert(0, str(Path(__file__).parent))
from scripted_worker import frame, reply_to, scripted  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCALE_SHIFT = REPO / "tests" / "exploits" / "tasks" / "scale_shift.py"

# What a forger writes for each kind when it cannot read the nonce: the worker's own fields.
FORGED = {
    "prebuilt": {},
    "load": {"load_s": 0.1, "weights": "by_name", "attributes": 0},
    "run": {"second_run_fingerprints": [], "checksums": []},
    "fetch": {},
    "time": {"step": "closed", "index": 0},
    "end": {"span_ms": [1e-6, 1e-6], "event_ms": [1e-6, 1e-6], "clock": "forged"},
    "steady": {"per_call_ms": 1e-6, "fingerprints": []},
    "profile": {"kernels": [["my_kernel", 7, 1.0]], "launches": [["extension:forged", True]]},
}


# The rest of a well-formed time reply (its per-call lists are sized per request).
TIME = {"output_reused": 0, "lost": [], "wall_ms": 1.0, "harness_ms": {}, "clock": "cpu-perf-counter"}


def _violation(died: pytest.ExceptionInfo) -> str:
    assert died.value.code == "protocol_violation", died.value.message
    return died.value.message


def test_the_reply_to_the_request_in_flight_is_accepted_without_its_envelope(tmp_path):
    with scripted(tmp_path, lambda req: frame(reply_to(req, kernels=[["k", 7, 0.5, -1, -1]]))) as w:
        reply, tensors = w.request({"op": "profile", "seed": 3}, None, 10)
    assert reply == {"ok": True, "kernels": [["k", 7, 0.5, -1, -1]]} and tensors == []


@pytest.mark.parametrize("kind", sorted(FORGED))
def test_rejects_a_forged_reply_of_each_kind_without_the_request_s_nonce(tmp_path, kind):
    """The PyTorch solution that wrote its own ``profile`` reply passed launch accounting."""
    with scripted(tmp_path, lambda req: frame({"ok": True, "op": kind, **FORGED[kind]})) as w:
        with pytest.raises(WorkerDied) as died:
            w.request({"op": kind, "seeds": [1, 2]}, None, 10)
        assert "nonce of the request in flight" in _violation(died)
        assert w.proc.poll() is not None  # ended: nothing it sends is read again
        with pytest.raises(WorkerDied) as again:
            w.request({"op": "profile", "seed": 1}, None, 10)
        assert again.value is died.value


def test_rejects_a_reply_with_the_nonce_but_of_another_kind(tmp_path):
    forged = lambda req: frame({**reply_to(req), "op": "profile", **FORGED["profile"]})  # noqa: E731
    with scripted(tmp_path, forged) as w:
        with pytest.raises(WorkerDied) as died:
            w.request({"op": "end", "calls": 2}, None, 10)
    assert "answers a 'profile' request" in _violation(died)


def _ctx():
    ctx = build_variant(load_task(SCALE_SHIFT), "small", torch.device("cpu"), "eval", 0)
    make_inputs(ctx, "task", 0)
    return ctx


def _malformed_time(req):
    """A timed batch played step by step, whose closing reply carries a span that is a list, with
    the nonce (a forger can read it): what crashed the parent (internal_error, exit 3)."""
    op = req.get("op")
    if op == "time":
        _malformed_time.index = 0
        return frame({"op": op, "nonce": req.get("nonce"), "step": "closed", "index": 0})
    if op == "project":
        return frame(
            {
                "op": op,
                "nonce": req.get("nonce"),
                "step": "fingerprint",
                "index": _malformed_time.index,
                "fingerprints": [[1.0, 1.0]],
            }
        )
    if op == "next":
        _malformed_time.index += 1
        return frame({"op": op, "nonce": req.get("nonce"), "step": "closed", "index": _malformed_time.index})
    n = int(req.get("calls", 0))
    fields = {**TIME, "span_ms": [[0.1]] * n, "event_ms": [0.1] * n, "host_ms": [0.1] * n}
    return frame(reply_to(req, **fields, activities=[-1] * n))


def test_a_malformed_time_reply_ends_the_worker_and_never_raises_in_the_parent(tmp_path, monkeypatch):
    options = EvalOptions(device="cpu", db="", max_rounds=2, min_rounds=1)
    with scripted(tmp_path, _malformed_time) as w:
        monkeypatch.setattr(process, "REPLY_CHECKS", False)  # the defence off: the parent raised
        with pytest.raises(TypeError):
            time_variant(_ctx(), [Program("candidate", w)], options.timing, random.Random(0), None, 10)
    with scripted(tmp_path, _malformed_time) as w:
        monkeypatch.setattr(process, "REPLY_CHECKS", True)
        timing, reasons = time_variant(
            _ctx(), [Program("candidate", w)], options.timing, random.Random(0), None, 10
        )
    assert timing is None and [r.code.value for r in reasons] == ["protocol_violation"]
    assert "span_ms[0] is a list, not a number" in reasons[0].message


WHOLE_TIME = {
    **TIME,
    "span_ms": [0.1, 0.1],
    "event_ms": [0.1, 0.1],
    "host_ms": [0.1, 0.1],
    "activities": [-1, -1],
}


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"span_ms": None}, "end reply has no 'span_ms'"),
        ({"span_ms": ["fast", 0.1]}, "span_ms[0] is a string, not a number"),
        ({"span_ms": [float("nan"), 0.1]}, "span_ms[0] is nan"),
        ({"span_ms": [0.1]}, "span_ms has 1 items, the request asked for 2"),
    ],
)
def test_rejects_a_time_reply_with_the_nonce_but_malformed(tmp_path, fields, words):
    body = {k: v for k, v in {**WHOLE_TIME, **fields}.items() if v is not None}
    with scripted(tmp_path, lambda req: frame(reply_to(req, **body))) as w:
        with pytest.raises(WorkerDied) as died:
            w.request({"op": "end", "calls": 2}, None, 10)
    assert words in _violation(died)


def test_rejects_kernel_rows_of_the_wrong_arity_on_the_gpu_path(tmp_path):
    with scripted(tmp_path, lambda req: frame(reply_to(req, kernels=[["k", 0.5]]))) as w:
        with pytest.raises(WorkerDied) as died:
            w.request({"op": "profile", "seed": 1}, None, 10)
    assert "kernels[0] has 2 items, not 5" in _violation(died)


def test_rejects_tensors_the_request_does_not_expect_before_reading_them(tmp_path):
    declared = [{"dtype": "float32", "shape": [8], "nbytes": 32}]
    with scripted(tmp_path, lambda req: frame(reply_to(req), declared)) as w:
        with pytest.raises(WorkerDied) as died:
            w.request({"op": "fetch", "index": 0}, None, 10, Expected.like([torch.zeros(4)]))
    assert "output shape (8,), expected (4,)" in _violation(died)
    with scripted(tmp_path, lambda req: frame(reply_to(req), declared)) as w:
        with pytest.raises(WorkerDied) as died:
            w.request({"op": "fetch", "index": 0}, None, 10)
    assert "where the request expects none" in _violation(died)


def test_a_frame_between_requests_ends_the_worker(tmp_path):
    """A well-formed frame nobody asked for: read at the next request, before anything is sent."""

    def twice(req):
        return frame(reply_to(req)) + frame({"ok": True, "op": "prebuilt", "nonce": req["nonce"]})

    with scripted(tmp_path, twice) as w:
        w.request({"op": "prebuilt"}, None, 10)
        with pytest.raises(WorkerDied) as died:
            w.request({"op": "prebuilt"}, None, 10)
    assert "between requests" in _violation(died) or "nonce" in died.value.message


@pytest.mark.parametrize(
    "garbage",
    [
        b"NOPE" + b"\0" * 20,
        b"KP1" + (1 << 40).to_bytes(8, "little"),
        b"KP1" + (5).to_bytes(8, "little") + b"[[[[[",
    ],
)
def test_bytes_that_are_no_reply_end_the_worker(tmp_path, garbage):
    with scripted(tmp_path, lambda req: garbage) as w:
        with pytest.raises(WorkerDied) as died:
            w.request({"op": "prebuilt"}, None, 10)
    _violation(died)


def test_a_reply_nested_deeper_than_the_parser_goes_ends_the_worker(tmp_path):
    deep = b"[" * 200_000 + b"]" * 200_000
    with scripted(tmp_path, lambda req: b"KP1" + len(deep).to_bytes(8, "little") + deep) as w:
        with pytest.raises(WorkerDied) as died:
            w.request({"op": "prebuilt"}, None, 10)
    assert "not JSON" in _violation(died)


# The parent's peak resident memory across one reply that declares an inline tensor it never sends.
HUGE = """
import json, sys, tempfile
from pathlib import Path
sys.path[:0] = ["tests/host", "tests/support"]
from resident import peak_mib
from scripted_worker import frame, reply_to, scripted
from kernelproof.errors import WorkerDied
from kernelproof.host import process

nbytes, process.REPLY_CHECKS = int(sys.argv[1]), sys.argv[2] == "on"
declared = [{"dtype": "uint8", "shape": [nbytes], "nbytes": nbytes}]
with scripted(Path(tempfile.mkdtemp()), lambda req: frame(reply_to(req), declared)) as w:
    w.wait_ready()
    before = peak_mib()
    try:
        if sys.argv[3] == "bye":  # the last reply, read and dropped when the worker is let go
            w.finish(timeout_s=1)
            code = "finished"
        else:
            w.request({"op": "fetch", "index": 0}, None, 3)
            code = "read"
    except WorkerDied as died:
        code = died.code
print(json.dumps({"grown_mib": peak_mib() - before, "code": code}))
"""


def _huge(nbytes: int, checks: str, op: str = "fetch") -> dict:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(HUGE), str(nbytes), checks, op],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(REPO),
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_reply_declaring_a_60_gib_inline_tensor_leaves_the_parent_small():
    # The defence off: the 512 MiB declaration is accepted, its storage allocated and its bytes
    # awaited until the request's limit ends it (how much of that storage becomes resident depends
    # on the allocator and the machine's load, so residency is asserted only with the defence on).
    off = _huge(512 * 2**20, "off")
    assert off["code"] == "timeout", off
    on = _huge(60 * 2**30, "on")
    assert on["code"] == "protocol_violation" and on["grown_mib"] < 64, on


def test_the_reply_to_bye_is_never_read_past_its_header():
    bye = _huge(60 * 2**30, "on", "bye")
    assert bye["code"] == "finished" and bye["grown_mib"] < 64, bye
