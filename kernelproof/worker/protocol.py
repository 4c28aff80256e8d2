"""The wire format between the trusted parent and a worker: JSON headers and raw tensor bytes.

Never pickle: unpickling bytes written by a candidate's process would run the candidate's code
in the parent that decides the verdict (I1). A message is a length-prefixed JSON header naming
its tensors (dtype, shape, byte length) followed by their raw bytes; the reader checks every
length and dtype against limits before it allocates anything.

Frame: b"KP1" | u64 header length | header JSON | for each tensor: its bytes.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

import torch

MAGIC = b"KP1"
MAX_HEADER_BYTES = 64 * 1024 * 1024  # a header larger than this is a protocol violation
MAX_TENSOR_BYTES = 64 * 1024**3  # larger than any task's tensor; protects the parent's memory

_DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}


class ProtocolError(Exception):
    """The peer sent something that is not a well-formed message (or closed the connection)."""


def encode_tensor(t: torch.Tensor) -> tuple[dict[str, Any], bytes]:
    name = str(t.dtype).replace("torch.", "")
    if name not in _DTYPES:
        raise ProtocolError(f"dtype {name} cannot cross the wire")
    cpu = t.detach().to("cpu").contiguous()
    data = cpu.reshape(-1).view(torch.uint8).numpy().tobytes() if cpu.numel() else b""
    return {"dtype": name, "shape": list(cpu.shape), "nbytes": len(data)}, data


def decode_tensor(meta: dict[str, Any], data: bytes | bytearray) -> torch.Tensor:
    dtype = _DTYPES.get(str(meta.get("dtype")))
    shape = meta.get("shape")
    if dtype is None or not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise ProtocolError(f"bad tensor header {meta!r}")
    numel = 1
    for s in shape:
        numel *= s
    itemsize = torch.empty((), dtype=dtype).element_size()
    if numel * itemsize != len(data):
        raise ProtocolError(f"tensor byte count {len(data)} does not match {shape} {meta.get('dtype')}")
    if not data:
        return torch.empty(shape, dtype=dtype)
    buf = data if isinstance(data, bytearray) else bytearray(data)
    return torch.frombuffer(buf, dtype=torch.uint8).view(dtype).reshape(shape)


def send(sock: socket.socket, header: dict[str, Any], tensors: list[torch.Tensor] | None = None) -> None:
    tensors = tensors or []
    metas, blobs = [], []
    for t in tensors:
        meta, data = encode_tensor(t)
        metas.append(meta)
        blobs.append(data)
    head = json.dumps({**header, "_tensors": metas}, allow_nan=True).encode()
    sock.sendall(MAGIC + struct.pack("<Q", len(head)) + head)
    for data in blobs:
        if data:
            sock.sendall(data)


def recv(sock: socket.socket) -> tuple[dict[str, Any], list[torch.Tensor]]:
    prefix = _recv_exact(sock, len(MAGIC) + 8)
    if prefix[: len(MAGIC)] != MAGIC:
        raise ProtocolError("bad frame magic")
    (length,) = struct.unpack("<Q", prefix[len(MAGIC) :])
    if length > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {length} bytes exceeds the limit")
    try:
        header = json.loads(bytes(_recv_exact(sock, length)))
    except ValueError as exc:
        raise ProtocolError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not an object")
    metas = header.pop("_tensors", [])
    if not isinstance(metas, list):
        raise ProtocolError("bad tensor list")
    tensors = []
    for meta in metas:
        if not isinstance(meta, dict):
            raise ProtocolError("bad tensor header")
        nbytes = meta.get("nbytes")
        if not isinstance(nbytes, int) or nbytes < 0 or nbytes > MAX_TENSOR_BYTES:
            raise ProtocolError(f"tensor of {nbytes!r} bytes refused")
        tensors.append(decode_tensor(meta, _recv_exact(sock, nbytes) if nbytes else bytearray()))
    return header, tensors


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], min(n - got, 1 << 24))
        if k == 0:
            raise ProtocolError("connection closed")
        got += k
    return buf
