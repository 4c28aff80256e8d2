"""A reply's outputs are checked in count, dtype and shape before any of their data is read.

Returning the right output plus four extra 512 MiB tensors took the parent to 7.1 GB at its peak
before the count was checked (issue 15). The worker now refuses such outputs before it copies
them, and the parent refuses a reply whose header declares them before it reads a byte.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from kernelproof.wire.expected import Expected, Spec, refusal, refuse_reply

REPO = Path(__file__).resolve().parents[2]
REF = [torch.zeros(8, 64), torch.zeros(8, dtype=torch.int64)]


def test_outputs_that_match_the_reference_are_accepted():
    assert refusal(Expected.like(REF).outputs, [Spec("float32", (8, 64)), Spec("int64", (8,))]) is None


@pytest.mark.parametrize(
    ("got", "code", "words"),
    [
        ([Spec("float32", (8, 64))], "wrong_shape", "forward returned 1 outputs, the reference returns 2"),
        ([Spec("float32", (8, 65)), Spec("int64", (8,))], "wrong_shape", "output 0: output shape (8, 65)"),
        ([Spec("float64", (8, 64)), Spec("int64", (8,))], "wrong_dtype", "output dtype torch.float64"),
    ],
)
def test_a_mismatch_gets_the_code_the_comparison_would_give(got, code, words):
    found = refusal(Expected.like(REF).outputs, got)
    assert found is not None and found[0].value == code and words in found[1], found


def test_the_wire_carries_every_run_less_what_was_delivered_on_the_device():
    two_runs = Expected.like(REF, runs=2)
    assert two_runs.on_wire() == [Spec("float32", (8, 64)), Spec("int64", (8,))] * 2
    assert Expected.like(REF).on_wire([0]) == [Spec("int64", (8,))]


def test_a_failed_reply_is_read_without_its_tensors():
    failed = {"ok": False, "code": "mismatch", "message": "m"}
    assert refuse_reply(failed, [("float32", (4,))], None) == failed


def test_a_reply_with_extra_outputs_is_refused_from_its_header():
    header = {"ok": True}
    specs = [("float32", (8, 64)), ("int64", (8,)), ("float32", (2**27,))]
    reply = refuse_reply(header, specs, Expected.like(REF))
    assert reply is not None and reply["ok"] is False and reply["code"] == "wrong_shape"
    assert "carries 3 tensors where 2 were expected" in reply["message"]
    assert refuse_reply(header, specs[:2], Expected.like(REF)) is None  # and nothing else is


# A worker's reply forged with four extra outputs as sealed, sparse memfds: reading one would
# allocate and fill its size in the reader. The script reports how much its resident memory grew
# across the read, with whatever was read still held.
FORGED = """
import fcntl, json, os, socket, struct, sys, torch
from kernelproof.wire import protocol
from kernelproof.wire.expected import Expected, refuse_reply

EXTRA_BYTES = 64 * 2**20
a, b = socket.socketpair()

def forged_reply():
    good = torch.ones(8, 64)
    metas = [{"dtype": "float32", "shape": [8, 64], "nbytes": good.numel() * 4}]
    fds = []
    for _ in range(4):
        fd = os.memfd_create("extra", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, EXTRA_BYTES)  # sparse: costs the sender nothing
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
        fds.append(fd)
        metas.append({"dtype": "float32", "shape": [EXTRA_BYTES // 4], "nbytes": EXTRA_BYTES, "fd": True})
    head = json.dumps({"ok": True, "_tensors": metas}).encode()
    frame = protocol.MAGIC + struct.pack("<Q", len(head)) + head
    import array
    b.sendmsg([frame], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    b.sendall(good.numpy().tobytes())
    for fd in fds:
        os.close(fd)

def resident_mib():  # now, not the peak: the import's own peak would hide a later growth
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

forged_reply()
before = resident_mib()
incoming = protocol.recv_header(a)
if sys.argv[1] == "expect":
    refused = refuse_reply(incoming.header, incoming.specs(), Expected.like([torch.zeros(8, 64)]))
    incoming.discard()
    kept = []
else:
    refused = None
    kept = incoming.read()  # held while measured
grown = resident_mib() - before
protocol.send(b, {"ok": True, "next": 1}, [torch.arange(3.0)])  # the stream is still in step
header, tensors = protocol.recv(a)
print(json.dumps({"grown_mib": grown, "refused": refused, "next": header.get("next"), "t": tensors[0].tolist()}))
"""


def _forged(mode: str) -> dict:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FORGED), mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_extra_huge_outputs_are_refused_before_the_parent_reads_them():
    refused = _forged("expect")
    assert refused["refused"]["code"] == "wrong_shape", refused
    assert refused["grown_mib"] < 32, refused  # four 64 MiB extras declared, none read
    assert refused["next"] == 1 and refused["t"] == [0.0, 1.0, 2.0]

    control = _forged("read")  # the same reply read without an expectation
    assert control["grown_mib"] >= 4 * 64 * 0.9, control


def test_the_parent_stays_small_when_a_solution_returns_extra_huge_outputs():
    """The zoo's exploit end to end (four extra 512 MiB outputs per call): wrong_shape, and the
    evaluating process's peak memory stays near what an evaluation costs anyway."""
    script = textwrap.dedent(
        """
        import json, sys
        sys.path.insert(0, "tests/support")
        from resident import peak_mib
        from kernelproof.api import evaluate
        from kernelproof.options import EvalOptions
        v = evaluate("tests/exploits/tasks/scale_shift.py", "tests/exploits/solutions/d8_extra_huge_outputs.py",
                     EvalOptions(device="cpu", db="", seed=3, correctness_only=True, seeds_per_case=1))
        print(json.dumps({"codes": list(v.codes), "peak_mib": peak_mib()}))
        """
    )
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600, cwd=str(REPO)
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert "wrong_shape" in result["codes"], result
    assert result["peak_mib"] < 1536, result  # 2 GiB of extras per run had they been read
