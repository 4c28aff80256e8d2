"""The wire format: tensors cross as raw bytes under a JSON header; malformed frames are refused."""

from __future__ import annotations

import socket
import struct

import pytest
import torch

from kernelproof.worker import protocol


def _pair():
    a, b = socket.socketpair()
    a.settimeout(5)
    b.settimeout(5)
    return a, b


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool, torch.float64]
)
def test_tensors_round_trip_bit_exactly(dtype):
    a, b = _pair()
    t = (torch.randn(3, 5) * 100).to(dtype)
    protocol.send(a, {"op": "x", "n": 1}, [t, torch.empty(0, dtype=dtype)])
    header, tensors = protocol.recv(b)
    assert header == {"op": "x", "n": 1}
    assert tensors[0].dtype == dtype and torch.equal(tensors[0], t)
    assert tensors[1].numel() == 0


def test_a_frame_without_the_magic_is_refused():
    a, b = _pair()
    a.sendall(b"XXX" + struct.pack("<Q", 2) + b"{}")
    with pytest.raises(protocol.ProtocolError, match="magic"):
        protocol.recv(b)


def test_a_byte_count_that_does_not_match_the_shape_is_refused():
    a, b = _pair()
    head = b'{"_tensors": [{"dtype": "float32", "shape": [4], "nbytes": 8}]}'
    a.sendall(protocol.MAGIC + struct.pack("<Q", len(head)) + head + b"\0" * 8)
    with pytest.raises(protocol.ProtocolError, match="does not match"):
        protocol.recv(b)


def test_an_unknown_dtype_is_refused_without_evaluating_anything():
    a, b = _pair()
    head = b'{"_tensors": [{"dtype": "__import__(\'os\')", "shape": [1], "nbytes": 4}]}'
    a.sendall(protocol.MAGIC + struct.pack("<Q", len(head)) + head + b"\0" * 4)
    with pytest.raises(protocol.ProtocolError):
        protocol.recv(b)


def test_a_closed_connection_is_a_protocol_error():
    a, b = _pair()
    a.close()
    with pytest.raises(protocol.ProtocolError, match="closed"):
        protocol.recv(b)


def test_zero_dimensional_tensors_cross_the_wire():
    a, b = _pair()
    protocol.send(a, {}, [torch.tensor(7, dtype=torch.int64), torch.tensor(2.5)])
    _, (i, f) = protocol.recv(b)
    assert i.shape == () and int(i) == 7 and float(f) == 2.5
