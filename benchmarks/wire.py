"""The wire between parent and worker: seconds to move one tensor, inline through the socket, as a
sealed memfd, and (CUDA) handed over on the device, between two processes, from the device and
back to it.

This is the cost a large correctness case pays to bring a candidate's output to the parent (about
3 s per 768 MiB output through the socket on the H200 host, measured with ``cost.py --profile``).
Each row is the median of ``--repeats`` round trips (device to host, across, host to device); the ratio is measured in
the same run.

    python benchmarks/wire.py                      # 768 MiB, CUDA if present
    python benchmarks/wire.py --mib 64 --device cpu
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import socket
import statistics
import time

import torch
from _common import table, write_json

from kernelproof.wire import handoff, protocol

ROUTES = ("inline (socket)", "sealed memfd", "device handoff")


def _peer(sock: socket.socket, mib: int, device: str) -> None:
    """The worker's side: answer each request with the same device tensor (made once, not timed)."""
    t = torch.randn(mib * 2**20 // 4, device=device)
    outbox = handoff.Outbox(t.device) if t.is_cuda else None
    while True:
        try:
            header, _ = protocol.recv(sock)
        except protocol.ProtocolError:  # the parent closed the socket: done
            break
        protocol.BULK_AVAILABLE = header["route"] != ROUTES[0] and _BULK
        if header.get("into") and outbox is not None:
            delivered, wire = outbox.deliver([t], header["into"])
            protocol.send(sock, {"ok": True, "delivered": delivered}, wire)
        else:
            protocol.send(sock, {"ok": True}, [t])
    sock.close()


_BULK = protocol.BULK_AVAILABLE


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=768)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    a, b = socket.socketpair()
    # Spawned, not forked: torch.cuda.is_available() above has already initialised the driver here.
    peer = mp.get_context("spawn").Process(target=_peer, args=(b, args.mib, args.device))
    peer.start()
    b.close()
    a.settimeout(600)
    if args.device.startswith("cuda"):
        torch.zeros(1, device=args.device)  # the parent's CUDA context, outside the figures
    rows, doc = [], {}
    cuda = args.device.startswith("cuda")
    inbox = handoff.Inbox(torch.device(args.device)) if cuda and handoff.available() else None
    like = [torch.empty(args.mib * 2**20 // 4, device=args.device)]
    for name in ROUTES:
        why = {
            ROUTES[1]: "" if _BULK else "not available on this platform",
            ROUTES[2]: "" if inbox is not None else "needs CUDA and CuPy",
        }.get(name, "")
        if why:
            rows.append([name, "-", "-", why])
            continue
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            offered = inbox.offer(like) if name == ROUTES[2] else []
            protocol.send(a, {"route": name, "into": offered})
            reply, outs = protocol.recv(a)
            (t,) = inbox.collect(offered, reply, outs) if offered else outs
            t = t.to(args.device)
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        doc[name] = times
        rows.append(
            [
                name,
                f"{med:.3f}",
                f"{args.mib / 1024 / med:.2f}",
                f"min {min(times):.3f}, max {max(times):.3f}",
            ]
        )
    a.close()
    peer.join(60)
    if inbox is not None:
        inbox.close()  # the peer has exited: nothing maps the buffer any more
    print(f"{args.mib} MiB from a {args.device} tensor in another process to a {args.device} tensor here:")
    print(table(rows, ["route", "median s", "GiB/s", "spread"]))
    socket_s = statistics.median(doc[ROUTES[0]])
    for name in ROUTES[1:]:
        if name in doc:
            ratio = socket_s / statistics.median(doc[name])
            print(f"{name} is {ratio:.2f}x the speed of the socket (medians of {args.repeats}, this run)")
    write_json("wire.json", {"mib": args.mib, "device": args.device, "seconds": doc})


if __name__ == "__main__":
    main()
