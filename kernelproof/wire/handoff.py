"""Large outputs handed over on the GPU: the worker copies them into device buffers the parent owns.

Why: through host memory, a large case's 768 MiB output costs a copy to the host in the worker, a
sealed memfd, the parent's read and a copy back to the device for the comparison: 12.4 s of a
level1 evaluation's 17.2 s went to four such cases on the H200 (results/h200-2026-11-30). On the
device the same bytes move in well under a millisecond.

How: the parent allocates one buffer per large output with a cudaMalloc of its own (CuPy's runtime
bindings) and sends the buffer's CUDA IPC handle with the request (``"into"``). The worker maps each
handle once, copies the output in after the call has synchronised, synchronises again and says
which outputs it delivered; every other output travels over the wire as before. The parent clones
a delivered buffer into its own tensor as soon as the reply arrives.

Inputs the parent must send (the "task" distribution, drawn by the task's own ``get_inputs()`` in
the parent) go the other way (``"from"``): the parent copies each large one into a buffer of its
own, and the worker clones it into its own memory before anything of the candidate's runs. The
worker could write into that buffer too; the parent never reads it back.

Why a cudaMalloc of its own: an IPC handle maps the whole allocation it points into. A block of
torch's caching allocator shares its segment with other tensors of the parent (the reference's
outputs among them), and the worker would see them. A buffer of its own exposes only itself, and
it only ever holds what the candidate itself produced. The parent frees its buffers only after the
worker is gone, so no mapping outlives them.

What native code in the worker could still do: keep writing into a mapped buffer after its reply.
That is the candidate changing its own answer, which it could have given directly; the fingerprint
of run 2, taken before any of this, is still compared with the clone of run 1.

Off where CuPy is missing, for CPU devices, under compute-sanitizer, and with
``KERNELPROOF_HANDOFF=0``: outputs then take the wire (sealed memfds).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import torch

from kernelproof.inputs import dtype_name
from kernelproof.wire.protocol import _DTYPES, BULK_MIN_BYTES, ProtocolError


def available() -> bool:
    """Can this process take part (CUDA, CuPy importable, not switched off)?"""
    if os.environ.get("KERNELPROOF_HANDOFF", "1") == "0":
        return False
    return torch.cuda.is_available() and importlib.util.find_spec("cupy") is not None


class _DevicePointer:
    """A raw device allocation as a byte array torch can view (``__cuda_array_interface__``)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 3,
            "strides": None,
            "stream": None,  # written and read only after a device synchronisation
        }


def _view(ptr: int, nbytes: int, dtype: torch.dtype, shape: list[int], device: torch.device) -> torch.Tensor:
    raw = torch.as_tensor(_DevicePointer(ptr, nbytes), device=device)
    return raw.view(dtype).reshape(shape)


class Inbox:
    """The parent's side: buffers of its own the worker writes large outputs into."""

    def __init__(self, device: torch.device):
        self.device = device
        # (direction, slot, nbytes) -> (pointer, handle); "out": an output slot, "in": an input's
        self._slots: dict[tuple[str, int, int], tuple[int, bytes]] = {}
        # Large tensors that took the wire because no buffer could be made for them (out of device
        # memory): slower by seconds a tensor, so the verdict says so (WorkerProcess.handoff_note).
        self.short_tensors = 0
        self.short_bytes = 0

    def offer(self, like: list[torch.Tensor]) -> list[dict[str, Any]]:
        """Descriptors for outputs shaped like ``like`` (the reference's); [] when none is large."""
        offered = []
        for i, t in enumerate(like):
            try:
                found = self._describe("out", i, t)
            except Exception:  # noqa: BLE001 - no device memory for it: this output takes the wire
                self._short(t)
                continue
            if found is not None:
                offered.append({"i": i, **found[1]})
        return offered

    def collect(
        self, offered: list[dict[str, Any]], reply: dict[str, Any], wire: list[torch.Tensor]
    ) -> list[torch.Tensor]:
        """The outputs in order: delivered ones cloned from their buffers, the others from the wire."""
        by_slot = {d["i"]: d for d in offered}
        delivered = reply.get("delivered") or []
        if (
            not isinstance(delivered, list)
            or not all(isinstance(i, int) and i in by_slot for i in delivered)
            or len(set(delivered)) != len(delivered)
        ):
            raise ProtocolError(f"the worker claims deliveries it was not offered: {delivered!r}")
        total = len(wire) + len(delivered)
        if delivered and max(delivered) >= total:
            raise ProtocolError("a delivered output lies past the outputs the worker returned")
        rest = iter(wire)
        outs = []
        for i in range(total):
            if i in delivered:
                d = by_slot[i]
                ptr, _ = self._slots[("out", i, d["nbytes"])]
                outs.append(_view(ptr, d["nbytes"], _DTYPES[d["dtype"]], d["shape"], self.device).clone())
            else:
                outs.append(next(rest))
        if delivered:  # the clones are done before the worker may write into the buffers again
            torch.cuda.synchronize(self.device)
        return outs

    def lend(self, tensors: list[torch.Tensor]) -> list[dict[str, Any]]:
        """Descriptors of device copies of the large ``tensors`` (inputs), made and synchronised now."""
        lent = []
        for k, t in enumerate(tensors):
            try:
                found = self._describe("in", k, t)
                if found is None:
                    continue
                _view(found[0], found[1]["nbytes"], t.dtype, list(t.shape), self.device).copy_(t)
            except Exception:  # noqa: BLE001 - this input takes the wire
                self._short(t)
                continue
            lent.append({"t": k, **found[1]})
        if lent:
            torch.cuda.synchronize(self.device)
        return lent

    def held_bytes(self) -> int:
        """The device memory this process's buffers take: outside torch's allocator, so no
        measurement of the parent's tensors sees them (admission counts them: evaluate/setup.py
        predicts them, evaluate/timing.py adds any beyond the prediction)."""
        return sum(nbytes for (_, _, nbytes) in self._slots)

    def _short(self, t: torch.Tensor) -> None:
        self.short_tensors += 1
        self.short_bytes += t.numel() * t.element_size()

    def _describe(self, direction: str, slot: int, t: torch.Tensor) -> tuple[int, dict[str, Any]] | None:
        """A buffer of this process's own for a tensor like ``t`` and what the worker needs to map
        it; None for a tensor too small to be worth it or of a dtype the wire does not carry."""
        nbytes = t.numel() * t.element_size()
        if nbytes < BULK_MIN_BYTES or dtype_name(t.dtype) not in _DTYPES:
            return None
        ptr, handle = self._buffer(direction, slot, nbytes)
        return ptr, {
            "handle": handle.hex(),
            "nbytes": nbytes,
            "dtype": dtype_name(t.dtype),
            "shape": list(t.shape),
        }

    def _buffer(self, direction: str, slot: int, nbytes: int) -> tuple[int, bytes]:
        found = self._slots.get((direction, slot, nbytes))
        if found is None:
            from cupy.cuda import runtime

            with _on(self.device):
                ptr = runtime.malloc(nbytes)
                try:
                    handle = bytes(runtime.ipcGetMemHandle(ptr))
                except BaseException:
                    runtime.free(ptr)
                    raise
            found = self._slots[(direction, slot, nbytes)] = (ptr, handle)
        return found

    def close(self) -> None:
        """Free every buffer; call only once the worker that mapped them has exited."""
        if not self._slots:
            return
        from cupy.cuda import runtime

        with _on(self.device):
            for ptr, _ in self._slots.values():
                try:
                    runtime.free(ptr)
                except Exception:  # noqa: BLE001, S110 - a context already torn down frees it anyway
                    pass
        self._slots.clear()


class Outbox:
    """The worker's side: copies outputs into the parent's buffers it was offered."""

    def __init__(self, device: torch.device):
        self.device = device
        self._mapped: dict[str, int] = {}  # handle (hex) -> pointer; a handle maps once per process

    def deliver(
        self, outputs: list[torch.Tensor], into: list[dict[str, Any]] | None
    ) -> tuple[list[int], list[torch.Tensor]]:
        """(slots delivered, the outputs that still take the wire), after a device synchronisation."""
        by_slot = {d.get("i"): d for d in into or [] if isinstance(d, dict)}
        delivered: list[int] = []
        wire: list[torch.Tensor] = []
        for i, t in enumerate(outputs):
            d = by_slot.get(i)
            if d is not None and self._fits(t, d):
                try:
                    dst = _view(
                        self._open(str(d["handle"])), int(d["nbytes"]), t.dtype, list(t.shape), t.device
                    )
                    dst.copy_(t.detach())
                    delivered.append(i)
                    continue
                except Exception:  # noqa: BLE001, S110 - the wire still works
                    pass
            wire.append(t.detach())
        if delivered:
            torch.cuda.synchronize(self.device)
        return delivered, wire

    def borrow(self, d: dict[str, Any]) -> torch.Tensor:
        """A copy, in this process's own memory, of an input the parent lent (``Inbox.lend``)."""
        dtype = _DTYPES[str(d["dtype"])]
        shape = [int(x) for x in d["shape"]]
        copy = _view(self._open(str(d["handle"])), int(d["nbytes"]), dtype, shape, self.device).clone()
        torch.cuda.synchronize(self.device)
        return copy

    def _fits(self, t: torch.Tensor, d: dict[str, Any]) -> bool:
        return (
            type(t) is torch.Tensor
            and t.device == self.device
            and dtype_name(t.dtype) == d.get("dtype")
            and list(t.shape) == d.get("shape")
            and t.numel() * t.element_size() == d.get("nbytes")
        )

    def _open(self, handle: str) -> int:
        ptr = self._mapped.get(handle)
        if ptr is None:
            from cupy.cuda import runtime

            with _on(self.device):
                ptr = runtime.ipcOpenMemHandle(bytes.fromhex(handle), runtime.cudaIpcMemLazyEnablePeerAccess)
            self._mapped[handle] = ptr
        return ptr


class _on:
    """CuPy's current device set to ``device`` for the block (CuPy keeps its own)."""

    def __init__(self, device: torch.device):
        self.index = device.index if device.index is not None else torch.cuda.current_device()

    def __enter__(self) -> None:
        import cupy

        self._ctx = cupy.cuda.Device(self.index)
        self._ctx.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(*exc)
