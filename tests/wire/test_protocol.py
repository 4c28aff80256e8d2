"""The wire format: tensors cross as raw bytes under a JSON header; malformed frames are refused."""

from __future__ import annotations

import array
import json
import os
import socket
import struct

import pytest
import torch

from kernelproof.wire import protocol


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


# -- bulk tensors: sealed memfds passed with the frame -------------------------------------------

needs_bulk = pytest.mark.skipif(not protocol.BULK_AVAILABLE, reason="memfd with seals is Linux-only")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _send_frame_with_fds(sock, metas, fds) -> None:
    head = json.dumps({"_tensors": metas}).encode()
    frame = protocol.MAGIC + struct.pack("<Q", len(head)) + head
    sock.sendmsg([frame], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


@needs_bulk
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_large_tensors_travel_as_sealed_files_and_arrive_bit_exact(dtype):
    a, b = _pair()
    big = (torch.randn(1024, 1024) * 100).to(dtype)  # >= BULK_MIN_BYTES for every dtype here
    small = torch.arange(5)
    before = _open_fds()
    protocol.send(a, {"op": "x"}, [big, small, big.t()])  # a transposed view is sent contiguous
    header, (got, got_small, got_t) = protocol.recv(b)
    assert header == {"op": "x"}
    assert got.dtype == dtype and torch.equal(got, big)
    assert torch.equal(got_small, small) and torch.equal(got_t, big.t())
    assert _open_fds() == before  # no descriptor left open on either side


@needs_bulk
def test_a_sealed_file_cannot_be_written_or_shrunk_after_it_is_sent():
    fd = protocol.write_sealed(torch.ones(1 << 18))
    try:
        with pytest.raises(PermissionError):
            os.write(fd, b"\0" * 8)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 16)
    finally:
        os.close(fd)


@needs_bulk
def test_an_unsealed_file_is_refused():
    a, b = _pair()
    fd = os.memfd_create("plain", os.MFD_CLOEXEC)
    os.ftruncate(fd, 1 << 20)
    _send_frame_with_fds(a, [{"dtype": "float32", "shape": [1 << 18], "nbytes": 1 << 20, "fd": True}], [fd])
    os.close(fd)
    before = _open_fds()
    with pytest.raises(protocol.ProtocolError, match="not sealed"):
        protocol.recv(b)
    assert _open_fds() <= before  # the received descriptor was closed


@needs_bulk
def test_a_file_of_another_size_than_declared_is_refused():
    a, b = _pair()
    fd = protocol.write_sealed(torch.zeros(1 << 18))  # 1 MiB
    _send_frame_with_fds(a, [{"dtype": "float32", "shape": [1 << 19], "nbytes": 1 << 21, "fd": True}], [fd])
    os.close(fd)
    with pytest.raises(protocol.ProtocolError, match="regular file of"):
        protocol.recv(b)


@needs_bulk
def test_descriptors_that_the_header_does_not_name_are_refused():
    a, b = _pair()
    fd = protocol.write_sealed(torch.zeros(1 << 18))
    _send_frame_with_fds(a, [], [fd])
    os.close(fd)
    before = _open_fds()
    with pytest.raises(protocol.ProtocolError, match="bulk tensors"):
        protocol.recv(b)
    assert _open_fds() <= before


def test_a_header_naming_a_bulk_tensor_that_never_came_is_refused():
    a, b = _pair()
    head = json.dumps({"_tensors": [{"dtype": "float32", "shape": [4], "nbytes": 16, "fd": True}]}).encode()
    a.sendall(protocol.MAGIC + struct.pack("<Q", len(head)) + head)
    with pytest.raises(protocol.ProtocolError, match="bulk tensors"):
        protocol.recv(b)


def test_a_tcp_socket_sends_large_tensors_inline():
    server = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(server.getsockname())
    b, _ = server.accept()
    a.settimeout(5)
    b.settimeout(5)
    t = torch.randn(1 << 18)
    protocol.send(a, {}, [t])
    _, (got,) = protocol.recv(b)
    assert torch.equal(got, t)
    for s in (a, b, server):
        s.close()


@needs_bulk
def test_a_frame_can_be_judged_from_its_header_and_dropped_unread():
    """recv_header reads the header and checks its tensor list; discard consumes the inline bytes
    without keeping them and closes the files, so the next frame reads as usual."""
    a, b = _pair()
    protocol.send(a, {"op": "x"}, [torch.ones(1 << 18), torch.arange(4.0)])  # one memfd, one inline
    protocol.send(a, {"op": "next"}, [torch.arange(3)])
    before = _open_fds()
    incoming = protocol.recv_header(b)
    assert incoming.header == {"op": "x"}
    assert incoming.specs() == [("float32", (1 << 18,)), ("float32", (4,))]
    assert _open_fds() == before + 1  # the memfd, held until read or discarded
    incoming.discard()
    assert _open_fds() == before
    header, tensors = protocol.recv(b)
    assert header == {"op": "next"} and torch.equal(tensors[0], torch.arange(3))


def test_a_tensor_whose_bytes_disagree_with_its_shape_is_refused_before_any_data_is_read():
    a, b = _pair()
    metas = [
        {"dtype": "float32", "shape": [4], "nbytes": 16},
        {"dtype": "float32", "shape": [4], "nbytes": 8},
    ]
    head = json.dumps({"_tensors": metas}).encode()
    a.sendall(protocol.MAGIC + struct.pack("<Q", len(head)) + head)  # no data follows at all
    with pytest.raises(protocol.ProtocolError, match="does not match"):
        protocol.recv_header(b)
