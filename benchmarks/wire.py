"""The wire between parent and worker: seconds to move one tensor, inline through the socket and as a
sealed memfd, between two processes, from the device and back to it.

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

from kernelproof.worker import protocol


def _peer(sock: socket.socket, mib: int, device: str) -> None:
    """The worker's side: answer each request with the same device tensor (made once, not timed)."""
    t = torch.randn(mib * 2**20 // 4, device=device)
    while True:
        try:
            header, _ = protocol.recv(sock)
        except protocol.ProtocolError:  # the parent closed the socket: done
            break
        protocol.BULK_AVAILABLE = header["bulk"] and _BULK
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
    for bulk in (False, True):
        if bulk and not _BULK:
            rows.append(["sealed memfd", "-", "-", "not available on this platform"])
            continue
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            protocol.send(a, {"bulk": bulk})
            _, (t,) = protocol.recv(a)
            t = t.to(args.device)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        name = "sealed memfd" if bulk else "inline (socket)"
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
    print(f"{args.mib} MiB from a {args.device} tensor in another process to a {args.device} tensor here:")
    print(table(rows, ["route", "median s", "GiB/s", "spread"]))
    if len(doc) == 2:
        ratio = statistics.median(doc["inline (socket)"]) / statistics.median(doc["sealed memfd"])
        print(f"memfd is {ratio:.2f}x the speed of the socket (medians of {args.repeats}, this run)")
    write_json("wire.json", {"mib": args.mib, "device": args.device, "seconds": doc})


if __name__ == "__main__":
    main()
