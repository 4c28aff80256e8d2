"""The wire format between the trusted parent and a worker: JSON headers and raw tensor bytes.

Never pickle: unpickling bytes written by a candidate's process would run the candidate's code
in the parent that decides the verdict (I1). A message is a length-prefixed JSON header naming
its tensors (dtype, shape, byte length) followed by their raw bytes; the reader checks every
length and dtype against limits before it allocates anything.

Frame: b"KP1" | u64 header length | header JSON | for each inline tensor: its bytes.

Large tensors do not cross the socket: with a 768 MiB output going through it, a large case's
request took about 3 s on the H200 host, most of the case's cost. Each tensor of BULK_MIN_BYTES
or more is written into its own memfd, which the sender seals against every change (shrinking,
growing, writing) before the file descriptor travels with the frame's first bytes (SCM_RIGHTS). The reader accepts only a
regular file of exactly the declared size carrying those seals, so what it reads cannot change
under it (no check-then-use race) and is the bytes the sender wrote. Platforms without memfd, and
non-Unix sockets, send everything inline.
"""

from __future__ import annotations

import array
import json
import mmap
import os
import socket
import stat
import struct
from typing import Any

import torch

from kernelproof.errors import PeerClosed, ProtocolError  # defined in the one tree, raised here
from kernelproof.inputs import dtype_name

MAGIC = b"KP1"
EXIT_HARNESS = 3  # the worker's exit status when its own code failed (its traceback is in its log)
MAX_HEADER_BYTES = 64 * 1024 * 1024  # a header larger than this is a protocol violation
MAX_TENSOR_BYTES = 64 * 1024**3  # larger than any task's tensor; protects the parent's memory
BULK_MIN_BYTES = 1 << 20  # tensors this large travel as sealed memfds, not through the socket
MAX_BULK_PER_FRAME = 64  # descriptors one frame may carry (the kernel allows 253)

try:  # Linux: memfd with seals
    import fcntl

    _SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
    BULK_AVAILABLE = hasattr(os, "memfd_create") and hasattr(fcntl, "F_ADD_SEALS")
except (ImportError, AttributeError):  # pragma: no cover - not Linux
    _SEALS = 0
    BULK_AVAILABLE = False
_FD_SIZE = array.array("i").itemsize

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


def encode_tensor(t: torch.Tensor) -> tuple[dict[str, Any], bytes]:
    name = dtype_name(t.dtype)
    if name not in _DTYPES:
        raise ProtocolError(f"dtype {name} cannot cross the wire")
    cpu = t.detach().to("cpu").contiguous()
    data = cpu.reshape(-1).view(torch.uint8).numpy().tobytes() if cpu.numel() else b""
    return {"dtype": name, "shape": list(cpu.shape), "nbytes": len(data)}, data


def _checked_meta(meta: dict[str, Any]) -> tuple[torch.dtype, list[int], int]:
    """dtype, shape and byte count of a tensor header, refused unless they agree."""
    dtype = _DTYPES.get(str(meta.get("dtype")))
    shape = meta.get("shape")
    nbytes = meta.get("nbytes")
    if (
        dtype is None
        or not isinstance(shape, list)
        or not all(isinstance(s, int) and s >= 0 for s in shape)
        or not isinstance(nbytes, int)
    ):
        raise ProtocolError(f"bad tensor header {meta!r}")
    numel = 1
    for s in shape:
        numel *= s
    itemsize = torch.empty((), dtype=dtype).element_size()
    if numel * itemsize != nbytes:
        raise ProtocolError(f"tensor byte count {nbytes} does not match {shape} {meta.get('dtype')}")
    return dtype, shape, nbytes


def decode_tensor(meta: dict[str, Any], data: bytes | bytearray) -> torch.Tensor:
    dtype, shape, _ = _checked_meta({**meta, "nbytes": len(data)})
    if not data:
        return torch.empty(shape, dtype=dtype)
    buf = data if isinstance(data, bytearray) else bytearray(data)
    return torch.frombuffer(buf, dtype=torch.uint8).view(dtype).reshape(shape)


def write_sealed(t: torch.Tensor) -> int:
    """A sealed memfd holding ``t``'s bytes (one copy, straight from the device for a GPU tensor)."""
    nbytes = t.numel() * t.element_size()
    fd = os.memfd_create("kernelproof-tensor", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, nbytes)
        with mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)) as mm:
            dst = torch.frombuffer(mm, dtype=torch.uint8).view(t.dtype).reshape(t.shape)
            dst.copy_(t.detach())
            del dst  # the mapping cannot close while a tensor still points into it
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS | fcntl.F_SEAL_SEAL)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_sealed(fd: int, meta: dict[str, Any]) -> torch.Tensor:
    """The tensor a peer sent as a sealed memfd, refused unless it is exactly that.

    Read into the reader's own memory (one copy from the page cache): a mapping would keep a
    descriptor open for as long as its tensor lives.
    """
    dtype, shape, nbytes = _checked_meta(meta)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size != nbytes:
        raise ProtocolError(f"a bulk tensor's file is not a regular file of {nbytes} bytes")
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        seals = 0
    if seals & _SEALS != _SEALS:
        raise ProtocolError("a bulk tensor's file is not sealed against change")
    out = torch.empty(nbytes, dtype=torch.uint8)
    view = memoryview(out.numpy())
    got = 0
    while got < nbytes:  # one read returns at most about 2 GiB
        k = os.preadv(fd, [view[got:]], got)
        if k <= 0:
            raise ProtocolError("a bulk tensor's file ended early")
        got += k
    return out.view(dtype).reshape(shape)


def send(sock: socket.socket, header: dict[str, Any], tensors: list[torch.Tensor] | None = None) -> None:
    tensors = tensors or []
    bulk_ok = BULK_AVAILABLE and sock.family == socket.AF_UNIX
    metas, blobs, fds = [], [], []
    try:
        for t in tensors:
            nbytes = t.numel() * t.element_size()
            name = dtype_name(t.dtype)
            if bulk_ok and nbytes >= BULK_MIN_BYTES and len(fds) < MAX_BULK_PER_FRAME and name in _DTYPES:
                fds.append(write_sealed(t))
                metas.append({"dtype": name, "shape": list(t.shape), "nbytes": nbytes, "fd": True})
                continue
            meta, data = encode_tensor(t)
            metas.append(meta)
            blobs.append(data)
        head = json.dumps({**header, "_tensors": metas}, allow_nan=True).encode()
        frame = MAGIC + struct.pack("<Q", len(head)) + head
        if fds:
            # The descriptors ride on the frame's first bytes; the rest follows as a stream.
            sent = sock.sendmsg([frame], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            if sent < len(frame):
                sock.sendall(frame[sent:])
        else:
            sock.sendall(frame)
    finally:
        for fd in fds:  # the peer holds its own copies once sent
            os.close(fd)
    for data in blobs:
        if data:
            sock.sendall(data)


def recv(sock: socket.socket) -> tuple[dict[str, Any], list[torch.Tensor]]:
    incoming = recv_header(sock)
    return incoming.header, incoming.read()


class Incoming:
    """A frame whose header has been read and checked, and whose tensor data has not been read yet.

    The reader decides from the header (count, dtypes, shapes, bytes) whether to :meth:`read` the
    data or :meth:`discard` it; either consumes the rest of the frame and closes every descriptor
    that came with it. One of them must be called.
    """

    def __init__(
        self, sock: socket.socket, header: dict[str, Any], metas: list[dict[str, Any]], fds: list[int]
    ):
        self.header = header  # the JSON header, without its tensor list
        self.metas = metas  # per tensor: dtype, shape, nbytes (checked to agree), fd (a sealed memfd)
        self._sock = sock
        self._fds = fds

    def specs(self) -> list[tuple[str, tuple[int, ...]]]:
        """(dtype name, shape) of each tensor, in order."""
        return [(str(m["dtype"]), tuple(m["shape"])) for m in self.metas]

    def read(self) -> list[torch.Tensor]:
        try:
            tensors = []
            bulk = iter(self._fds)
            for meta in self.metas:
                if meta.get("fd"):
                    tensors.append(read_sealed(next(bulk), meta))
                else:
                    nbytes = meta["nbytes"]
                    tensors.append(
                        decode_tensor(meta, _recv_exact(self._sock, nbytes) if nbytes else bytearray())
                    )
            return tensors
        finally:
            self._close()

    def drop(self) -> None:
        """Close the frame's files and read nothing more: its sender is being ended (the stream
        is out of step from here on)."""
        self._close()

    def discard(self) -> None:
        """Consume the inline tensor bytes without keeping them (a bounded buffer) and close the files."""
        try:
            left = sum(m["nbytes"] for m in self.metas if not m.get("fd"))
            scratch = bytearray(min(left, 1 << 20))
            view = memoryview(scratch)
            while left:
                k = self._sock.recv_into(view[: min(left, len(scratch))])
                if k == 0:
                    raise PeerClosed("connection closed")
                left -= k
        finally:
            self._close()

    def _close(self) -> None:
        for fd in self._fds:  # read, refused or never named: closed either way
            os.close(fd)
        self._fds = []


def recv_header(sock: socket.socket, max_header_bytes: int = MAX_HEADER_BYTES) -> Incoming:
    """Read a frame's header and check its tensor list; the data stays unread (:class:`Incoming`)."""
    prefix, fds = _recv_prefix(sock)
    try:
        header, metas = _recv_header_rest(sock, prefix, fds, max_header_bytes)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return Incoming(sock, header, metas, fds)


def _recv_prefix(sock: socket.socket) -> tuple[bytearray, list[int]]:
    """The frame's fixed prefix, and any descriptors sent with its first bytes."""
    n = len(MAGIC) + 8
    if sock.family != socket.AF_UNIX:
        return _recv_exact(sock, n), []
    data, anc, flags, _ = sock.recvmsg(n, socket.CMSG_SPACE(MAX_BULK_PER_FRAME * _FD_SIZE))
    fds: list[int] = []
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(array.array("i", payload[: len(payload) - len(payload) % _FD_SIZE]))
    if flags & socket.MSG_CTRUNC or not data:
        for fd in fds:
            os.close(fd)
        if not data:
            raise PeerClosed("connection closed")
        raise ProtocolError("too many descriptors in one frame")
    try:
        rest = _recv_exact(sock, n - len(data)) if len(data) < n else bytearray()
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return bytearray(data) + rest, fds


def _recv_header_rest(
    sock: socket.socket, prefix: bytearray, fds: list[int], max_header_bytes: int = MAX_HEADER_BYTES
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if prefix[: len(MAGIC)] != MAGIC:
        raise ProtocolError("bad frame magic")
    (length,) = struct.unpack("<Q", prefix[len(MAGIC) :])
    if length > max_header_bytes:
        raise ProtocolError(f"header of {length} bytes exceeds the limit of {max_header_bytes}")
    try:
        header = json.loads(bytes(_recv_exact(sock, length)))
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than the parser goes
        raise ProtocolError(f"header is not JSON: {str(exc)[:200]}") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not an object")
    metas = header.pop("_tensors", [])
    if not isinstance(metas, list):
        raise ProtocolError("bad tensor list")
    if sum(1 for m in metas if isinstance(m, dict) and m.get("fd")) != len(fds):
        raise ProtocolError(f"the frame names a different number of bulk tensors than the {len(fds)} sent")
    for meta in metas:
        if not isinstance(meta, dict):
            raise ProtocolError("bad tensor header")
        nbytes = meta.get("nbytes")
        if not isinstance(nbytes, int) or nbytes < 0 or nbytes > MAX_TENSOR_BYTES:
            raise ProtocolError(f"tensor of {nbytes!r} bytes refused")
        _checked_meta(meta)  # dtype known, shape and byte count agree: before anything is read
    return header, metas


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], min(n - got, 1 << 24))
        if k == 0:
            raise PeerClosed("connection closed")
        got += k
    return buf
