"""The device's admission through a pass, read from the service's own gauges once a second.

An evaluation's verdict carries its steps, but not what the device was doing while it waited: on
an H200 the rows of a pass showed 49 s with four evaluations waiting for memory and none of the
answered ones running, and nothing said who held the device then (an evaluation run again alone,
one cut at the deadline, or room the admission did not give out). So the pass polls the
server's ``/metrics`` (kernelproof/serve/prometheus.py, the ``kernelproof_device_*`` gauges) and
keeps each sample in ``admission.jsonl``; the summary gives the share of the pass the device
spent alone, with arrivals waiting for memory, and with nothing admitted.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

POLL_S = 1.0
_SAMPLE = re.compile(r'^kernelproof_device_(\w+)\{device="([^"]*)"(?:,stage="(\w+)")?\} (\S+)$')


def parse(text: str, device: str) -> dict[str, float]:
    """One device's gauges from a ``/metrics`` page: ``running``, ``standing_aside``, ``alone``,
    ``memory_reserved_bytes``, ``memory_capacity_bytes``, ``memory_holders``,
    ``memory_waiting_arrive`` and ``memory_waiting_grow`` (those the page has). `device` as the
    benchmark was given it: ``cuda`` names the service's ``cuda:0`` (one GPU a pass)."""
    want = f"{device}:0" if device == "cuda" else device
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m.group(2) == want:
            name, stage = m.group(1), m.group(3)
            out[f"{name}_{stage}" if stage else name] = float(m.group(4))
    return out


class AdmissionTimeline:
    """Samples the server's device gauges every :data:`POLL_S` until :meth:`stop`; each sample is a
    line of `path` (`tag`, ``t`` in seconds since the pass began, and the gauges)."""

    def __init__(self, url: str, device: str, path: Path, began: float, tag: dict[str, Any]):
        self.samples: list[dict[str, float]] = []
        self._url, self._device, self._path, self._began, self._tag = url, device, path, began, tag
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        import httpx

        with httpx.Client(base_url=self._url, timeout=5.0) as client, self._path.open("a") as log:
            while not self._stop.wait(POLL_S):
                try:
                    text = client.get("/metrics").text
                except httpx.HTTPError:
                    continue  # a busy server's slow answer: this second is missing, not invented
                gauges = parse(text, self._device)
                if not gauges:
                    continue  # no evaluation admitted to the device yet
                sample = {"t": round(time.monotonic() - self._began, 2), **gauges}
                self.samples.append(sample)
                log.write(json.dumps({**self._tag, **sample}) + "\n")
                log.flush()

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(timeout=10)
        return summarize(self.samples)


def summarize(samples: list[dict[str, float]]) -> dict[str, Any]:
    """The shares of the samples in which the device was held alone (or drained for it), in which
    some evaluation waited for memory (to arrive or to grow), and in which no evaluation held a
    slot or a reservation; the mean evaluations running and the mean share of the admission's
    memory reserved. Shares of samples, each a second of the pass once the first evaluation came."""
    n = len(samples)
    if not n:
        return {"samples": 0}

    def share(test) -> float:
        return round(sum(1 for s in samples if test(s)) / n, 3)

    def waiting(s: dict[str, float]) -> float:
        return s.get("memory_waiting_arrive", 0) + s.get("memory_waiting_grow", 0)

    reserved = [
        s["memory_reserved_bytes"] / s["memory_capacity_bytes"]
        for s in samples
        if s.get("memory_capacity_bytes")
    ]
    return {
        "samples": n,
        "alone_share": share(lambda s: s.get("alone", 0) > 0),
        "memory_wait_share": share(lambda s: waiting(s) > 0),
        "nothing_admitted_share": share(
            lambda s: s.get("running", 0) == 0 and s.get("memory_holders", 0) == 0
        ),
        "mean_running": round(sum(s.get("running", 0) for s in samples) / n, 2),
        "mean_standing_aside": round(sum(s.get("standing_aside", 0) for s in samples) / n, 2),
        "mean_reserved_share": round(sum(reserved) / len(reserved), 3) if reserved else None,
        # what the admission gives out (None: memory not counted): the device floor's yardstick
        "capacity_bytes": max((s.get("memory_capacity_bytes", 0) for s in samples), default=0) or None,
    }


def merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Parts' summaries as one, each weighted by its samples."""
    parts = [p for p in parts if p and p.get("samples")]
    n = sum(p["samples"] for p in parts)
    if not n:
        return {"samples": 0}
    out: dict[str, Any] = {"samples": n}
    for key in (
        "alone_share",
        "memory_wait_share",
        "nothing_admitted_share",
        "mean_running",
        "mean_standing_aside",
    ):
        out[key] = round(sum(p[key] * p["samples"] for p in parts) / n, 3)
    weighted = [
        (p["mean_reserved_share"], p["samples"]) for p in parts if p.get("mean_reserved_share") is not None
    ]
    out["mean_reserved_share"] = (
        round(sum(x * w for x, w in weighted) / sum(w for _, w in weighted), 3) if weighted else None
    )
    out["capacity_bytes"] = max((p.get("capacity_bytes") or 0 for p in parts), default=0) or None
    return out


def line(summary: dict[str, Any]) -> str:
    """One line of the terminal report."""
    if not summary.get("samples"):
        return "device admission: not sampled"
    reserved = summary.get("mean_reserved_share")
    return (
        f"device: alone {100 * summary['alone_share']:.0f}%, waiting for memory "
        f"{100 * summary['memory_wait_share']:.0f}%, nothing admitted "
        f"{100 * summary['nothing_admitted_share']:.0f}%; running {summary['mean_running']:.1f}"
        + (f", reserved {100 * reserved:.0f}%" if reserved is not None else "")
        + f" ({summary['samples']} s)"
    )
