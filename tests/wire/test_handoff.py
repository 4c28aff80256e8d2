"""Large outputs handed over on the GPU (kernelproof.wire.handoff).

The CPU tests cover what the parent accepts from a worker's reply and when each side stays on the
wire; the `gpu` tests move real bytes between two processes through CUDA IPC and run the pipeline
with every case's outputs handed over.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelproof.wire import handoff
from kernelproof.wire.expected import Expected
from kernelproof.wire.handoff import Inbox, Outbox
from kernelproof.wire.protocol import ProtocolError

REPO = Path(__file__).resolve().parents[2]


def offered(*slots: int) -> list[dict]:
    return [{"i": i, "handle": "00", "nbytes": 8, "dtype": "float32", "shape": [2]} for i in slots]


def test_without_deliveries_the_outputs_are_the_wires_in_order():
    wire = [torch.ones(2), torch.zeros(3)]
    got = Inbox(torch.device("cpu")).collect(offered(0, 1), {"delivered": []}, wire)
    assert [t.shape for t in got] == [(2,), (3,)]


@pytest.mark.parametrize(
    "delivered",
    [[3], [0, 0], ["0"], "0", [1]],  # not offered, twice, not an int, not a list, past the outputs
    ids=["not-offered", "twice", "string-slot", "not-a-list", "past-the-end"],
)
def test_a_reply_claiming_what_it_was_not_offered_is_refused(delivered):
    inbox = Inbox(torch.device("cpu"))
    with pytest.raises(ProtocolError):
        inbox.collect(offered(0, 1), {"delivered": delivered}, [] if delivered == [1] else [torch.ones(2)])


def test_the_parent_offers_nothing_for_small_outputs(monkeypatch):
    inbox = Inbox(torch.device("cpu"))
    monkeypatch.setattr(inbox, "_buffer", lambda *a: pytest.fail("a small output got a device buffer"))
    assert inbox.offer([torch.zeros(16)]) == []


def test_large_tensors_without_a_device_buffer_take_the_wire_and_the_verdict_says_so(monkeypatch):
    from kernelproof.host.process import WorkerProcess

    inbox = Inbox(torch.device("cpu"))

    def no_memory(*a):
        raise MemoryError("cudaErrorMemoryAllocation")

    monkeypatch.setattr(inbox, "_buffer", no_memory)
    large = torch.zeros(1 << 20)  # 4 MiB: above the wire's bulk size
    assert inbox.offer([large, torch.zeros(4)]) == [] and inbox.lend([large]) == []
    assert (inbox.short_tensors, inbox.short_bytes) == (2, 2 * large.numel() * 4)
    w = WorkerProcess.__new__(WorkerProcess)
    w.handoff_failed, w._inbox = False, Inbox(torch.device("cpu"))
    assert w.handoff_note() is None  # every large tensor went where it was meant to
    w._inbox = inbox
    assert w.handoff_note().startswith("handoff_fell_back: 2 large tensors (0.0 GB) took host memory")
    w.handoff_failed = True
    assert "could not be mapped" in w.handoff_note()


def test_the_parent_counts_the_device_memory_its_buffers_hold(monkeypatch):
    """They are cudaMallocs of its own, invisible to torch's allocator: admission adds this figure."""
    from kernelproof.host.process import WorkerProcess

    inbox = Inbox(torch.device("cpu"))
    made = iter(range(1, 10))
    monkeypatch.setattr(
        inbox,
        "_buffer",
        lambda d, slot, nbytes: inbox._slots.setdefault((d, slot, nbytes), (next(made), b"h")),
    )
    large = torch.zeros(1 << 20)
    inbox.offer([large, large]), inbox.lend([large]), inbox.offer([large])  # the same slots again
    assert inbox.held_bytes() == 3 * large.numel() * 4
    w = WorkerProcess.__new__(WorkerProcess)
    w._inbox = None
    assert w.handoff_bytes() == 0
    w._inbox = inbox
    assert w.handoff_bytes() == inbox.held_bytes()


def test_an_output_that_does_not_fit_its_offer_takes_the_wire():
    box = Outbox(torch.device("cuda", 0))
    offer = offered(0)[0]
    for t in (torch.zeros(2), torch.zeros(3), torch.zeros(2, dtype=torch.float64)):  # device, shape, dtype
        assert not box._fits(t, offer)
    delivered, wire = box.deliver([torch.zeros(2)], [offer])
    assert delivered == [] and len(wire) == 1


def test_it_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("KERNELPROOF_HANDOFF", "0")
    assert not handoff.available()


CHILD = """
import json, sys, torch
from kernelproof.wire.handoff import Outbox
into, lent = json.loads(sys.argv[1]), json.loads(sys.argv[2])
box = Outbox(torch.device("cuda", 0))
borrowed = box.borrow(lent[0])  # the parent's input, cloned into this process's memory
out = borrowed * 0.5
wrong = torch.zeros(3, device="cuda:0")  # shaped unlike its offer: goes to the wire
delivered, wire = box.deliver([out, wrong], into)
print(json.dumps({"delivered": delivered, "wire": len(wire)}))
"""


@pytest.mark.gpu
def test_another_process_reads_a_lent_input_and_writes_its_output_into_the_parents_buffer():
    assert handoff.available(), "CuPy is needed for the handoff"
    n = 1 << 20
    like = [torch.empty(n, device="cuda:0"), torch.empty(n, device="cuda:0")]
    inbox = Inbox(torch.device("cuda", 0))
    try:
        offer = inbox.offer(like)
        assert [d["i"] for d in offer] == [0, 1]
        lent = inbox.lend([torch.zeros(4), torch.arange(n, dtype=torch.float32)])  # the small one stays
        assert [d["t"] for d in lent] == [1]
        lent[0]["t"] = 0
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(offer), json.dumps(lent)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        reply = json.loads(proc.stdout.strip().splitlines()[-1])
        assert reply == {"delivered": [0], "wire": 1}
        got = inbox.collect(offer, {"delivered": reply["delivered"]}, [torch.zeros(3)])
        assert torch.equal(got[0], torch.arange(n, device="cuda:0", dtype=torch.float32) * 0.5)
        assert got[0].data_ptr() != 0 and got[1].shape == (3,)
    finally:
        inbox.close()


@pytest.mark.gpu
def test_the_pipeline_judges_outputs_handed_over_on_the_device(monkeypatch):
    """Every case large: run 1's outputs come back through the handoff, and bad ones still fail."""
    from kernelproof.api import evaluate
    from kernelproof.evaluate import correctness
    from kernelproof.options import EvalOptions

    delivered: list[int] = []
    failures: list[str] = []
    collect = Inbox.collect

    def counting(self, offered, reply, wire):
        delivered.extend(reply.get("delivered") or [])
        try:
            return collect(self, offered, reply, wire)
        except Exception as exc:  # the pipeline would fall back to the wire: that is a failure here
            failures.append(repr(exc))
            raise

    monkeypatch.setattr(correctness, "LARGE_CASE_BYTES", 0)
    monkeypatch.setattr(handoff, "BULK_MIN_BYTES", 0)
    monkeypatch.setattr(Inbox, "collect", counting)
    data = REPO / "tests" / "data"
    task = str(data / "tasks" / "scale_relu.py")
    opts = EvalOptions(device="cuda", db="", seed=11, correctness_only=True, seeds_per_case=1, timeout_s=120)
    good = evaluate(task, str(data / "solutions" / "scale_relu_triton.py"), opts)
    assert good.passed, good.reasons
    assert not failures, failures
    assert len(delivered) >= good.correctness.cases_run > 0
    bad = evaluate(task, str(data / "solutions" / "wrong_dtype.py"), opts)
    assert "wrong_dtype" in bad.codes, bad.reasons


def test_a_parent_that_cannot_read_its_buffers_asks_again_over_the_wire(monkeypatch):
    from kernelproof.host.process import WorkerProcess

    class Broken(Inbox):
        def offer(self, like):
            return offered(0)

        def collect(self, offered, reply, wire):
            raise RuntimeError("no CUDA array interface here")

    w = WorkerProcess.__new__(WorkerProcess)  # no process: only the request logic is exercised
    w.handoff_failed = False
    w._inbox = Broken(torch.device("cpu"))
    monkeypatch.setattr(w, "_handoff_inbox", lambda: None if w.handoff_failed else w._inbox)
    sent, expected = [], []

    def request(h, t, s, expect=None):
        sent.append(h)
        expected.append(expect)
        return {"ok": True}, [torch.ones(2)]

    monkeypatch.setattr(w, "request", request)
    reply, outs = w.request_outputs({"op": "fetch", "index": 0}, None, [torch.ones(2)], 10.0)
    assert [("into" in h) for h in sent] == [True, False]
    assert expected == [Expected.like([torch.ones(2)])] * 2  # both ask for outputs like the reference's
    assert w.handoff_failed and len(outs) == 1
    w.request_outputs({"op": "fetch", "index": 0}, None, [torch.ones(2)], 10.0)
    assert "into" not in sent[-1]  # off for this worker from then on


def test_lent_inputs_leave_empty_stand_ins_on_the_wire_and_a_failed_borrow_asks_again(monkeypatch):
    from kernelproof.host.process import WorkerProcess

    class Lending(Inbox):
        def offer(self, like):
            return []

        def lend(self, tensors):
            return [{"t": 1, "handle": "00", "nbytes": 8, "dtype": "float32", "shape": [2]}]

    w = WorkerProcess.__new__(WorkerProcess)
    w.handoff_failed = False
    w._inbox = Lending(torch.device("cpu"))
    monkeypatch.setattr(w, "_handoff_inbox", lambda: None if w.handoff_failed else w._inbox)
    sent = []

    def request(header, tensors, timeout_s, expect=None):
        sent.append((header, tensors))
        failed = "from" in header  # the worker could not map it
        return ({"ok": False, "handoff": "failed"} if failed else {"ok": True}), []

    monkeypatch.setattr(w, "request", request)
    inputs = [torch.ones(3), torch.ones(2)]
    reply, _ = w.request_outputs({"op": "run"}, inputs, [], 10.0, lend=True)
    (first, first_tensors), (second, second_tensors) = sent
    assert first["from"][0]["t"] == 1 and first_tensors[0] is inputs[0] and first_tensors[1].numel() == 0
    assert "from" not in second and second_tensors is inputs  # asked again with the real tensors
    assert reply["ok"] and w.handoff_failed


def test_a_request_for_both_runs_lends_its_inputs_and_takes_every_output_over_the_wire(monkeypatch):
    from kernelproof.host.process import WorkerProcess

    class Lending(Inbox):
        def offer(self, like):
            raise AssertionError("two runs' outputs are never offered a device buffer")

        def lend(self, tensors):
            return [{"t": 0, "handle": "00", "nbytes": 8, "dtype": "float32", "shape": [2]}]

    w = WorkerProcess.__new__(WorkerProcess)
    w.handoff_failed = False
    w._inbox = Lending(torch.device("cpu"))
    monkeypatch.setattr(w, "_handoff_inbox", lambda: w._inbox)
    sent = []

    def request(header, tensors, timeout_s, expect=None):
        sent.append((header, tensors, expect))
        return {"ok": True}, [torch.ones(1), torch.ones(1)]

    monkeypatch.setattr(w, "request", request)
    reply, outs = w.request_outputs({"op": "run"}, [torch.ones(2)], [torch.ones(1)], 10.0, lend=True, runs=2)
    ((header, tensors, expect),) = sent
    assert header["from"][0]["t"] == 0 and "into" not in header and tensors[0].numel() == 0
    assert expect == Expected.like([torch.ones(1)], runs=2) and len(outs) == 2


@pytest.mark.parametrize("large", [True, False])
def test_a_case_of_large_drawn_by_the_task_inputs_and_small_outputs_lends_its_inputs(monkeypatch, large):
    """get_inputs()'s own values cannot be drawn in the worker: above the large-case size they go
    over on the device even where the outputs are small (a loss, a reduction), not through host
    memory; below it, over the wire as before."""
    from kernelproof.evaluate import correctness
    from kernelproof.options import EvalOptions
    from kernelproof.task import load_task
    from kernelproof.verify.case_plan import Case, build_variant, make_inputs, reference_and_oracle

    task = load_task(REPO / "tests" / "data" / "tasks" / "kb_row_mean.py")
    ctx = build_variant(task, task.meta.cpu[0], torch.device("cpu"), "eval", 3)
    args = make_inputs(ctx, "task", 5)
    ref, orc = reference_and_oracle(ctx, args)
    in_bytes, out_bytes = args[0].numel() * 4, ref[0].numel() * 4
    monkeypatch.setattr(correctness, "LARGE_CASE_BYTES", in_bytes - 1 if large else in_bytes)
    assert out_bytes <= correctness.LARGE_CASE_BYTES  # run 2 still answers with its outputs
    calls = []

    class _Worker:
        def request(self, header, tensors, timeout_s, expect=None):
            calls.append(("wire", header, expect))
            return {"ok": False, "code": "crash", "message": "stop here"}, []

        def request_outputs(self, header, tensors, like, timeout_s, lend=False, runs=1):
            calls.append(("lent" if lend else "offered", header, Expected.like(like, runs)))
            return {"ok": False, "code": "crash", "message": "stop here"}, []

    case = Case("default/task/0", ctx.variant, "task", 5)
    opts = EvalOptions(device="cpu", db="")
    got = correctness._run_case(ctx, case, 5, args, ref, orc, _Worker(), opts, None)
    assert got.code.value == "crash"
    ((how, header, expect),) = calls
    assert how == ("lent" if large else "wire") and "draw" not in header
    assert "second_run_projection" not in header and expect == Expected.like(ref, runs=2)


@pytest.mark.gpu
def test_the_pipeline_lends_large_task_drawn_inputs_whose_outputs_are_small(monkeypatch, tmp_path):
    """The case get_inputs() draws, above the large-case size with a small output (a row mean):
    its input goes over on the device, both runs' outputs over the wire, and a wrong kernel fails."""
    from kernelproof.api import evaluate
    from kernelproof.evaluate import correctness
    from kernelproof.options import EvalOptions

    lent: list[dict] = []
    lend = Inbox.lend

    def counting(self, tensors):
        got = lend(self, tensors)
        lent.extend(got)
        return got

    monkeypatch.setattr(correctness, "LARGE_CASE_BYTES", 1024)  # the 8x64 input above, its 8 means below
    monkeypatch.setattr(handoff, "BULK_MIN_BYTES", 0)
    monkeypatch.setattr(Inbox, "lend", counting)
    data = REPO / "tests" / "data"
    task = str(data / "tasks" / "kb_row_mean.py")
    opts = EvalOptions(device="cuda", db="", seed=11, correctness_only=True, seeds_per_case=1, timeout_s=120)
    good = evaluate(task, str(data / "solutions" / "row_mean_general.py"), opts)
    assert good.passed, good.reasons
    assert lent and all(d["t"] == 0 for d in lent)
    wrong = tmp_path / "row_mean_off.py"
    source = (data / "solutions" / "row_mean_general.py").read_text()
    wrong.write_text(source.replace("/ cols)", "/ cols + 1.0)"))  # the same kernel, off by one
    assert "+ 1.0" in wrong.read_text()
    bad = evaluate(task, str(wrong), opts)
    assert "mismatch" in bad.codes, bad.reasons
