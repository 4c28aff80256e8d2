"""The service's counters, written in the Prometheus text format (version 0.0.4) by hand.

Why no client library: the GPU image carries only pure-Python dependencies, and what is exported
is a handful of typed counters and gauges: queue depth, evaluations in flight per device,
evaluations per second (over the last minute, and as a counter for ``rate()``), verdicts by
outcome and first reason code, and the seconds spent building and evaluating; and for each device,
its admission as it stands: evaluations running, standing aside (waiting for a build or for memory,
their slots lent), whether one has the device alone, the memory reserved and who waits for it. A
throughput that falls short shows there why: a device held alone, arrivals queued for memory.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kernelproof.verdict import Verdict

if TYPE_CHECKING:
    from kernelproof.executors.local import DeviceState

RATE_WINDOW_S = 60.0


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued = 0
        self._running = 0
        self._in_flight: dict[str, int] = {}
        self._verdicts: dict[tuple[str, str], int] = {}
        self._evaluations = 0  # judged by an evaluation (not answered from the store)
        self._from_store = 0
        self._refused_full = 0
        self._cancelled = 0
        self._refused_auth = 0
        self._refused_size = 0
        self._build_s = 0.0
        self._builds = 0
        self._evaluation_s = 0.0
        self._recent: deque[float] = deque()

    def set_slots(self, slots: list[str]) -> None:
        with self._lock:
            for s in slots:
                self._in_flight.setdefault(s, 0)

    def set_depth(self, queued: int, running: int) -> None:
        with self._lock:
            self._queued, self._running = queued, running

    def started(self, slot: str) -> None:
        with self._lock:
            self._in_flight[slot] = self._in_flight.get(slot, 0) + 1

    def stopped(self, slot: str) -> None:
        with self._lock:
            self._in_flight[slot] = max(0, self._in_flight.get(slot, 0) - 1)

    def finished(self, verdict: Verdict, from_store: bool) -> None:
        code = verdict.codes[0] if verdict.codes else ""
        now = time.monotonic()
        with self._lock:
            key = (verdict.verdict.value, code)
            self._verdicts[key] = self._verdicts.get(key, 0) + 1
            if from_store:
                self._from_store += 1
                return
            self._evaluations += 1
            self._evaluation_s += float(verdict.elapsed_s)
            if verdict.build is not None and not verdict.build.cached:
                self._builds += 1
                self._build_s += float(verdict.build.build_s)
            self._recent.append(now)
            while self._recent and self._recent[0] < now - RATE_WINDOW_S:
                self._recent.popleft()

    def refused_full(self) -> None:
        with self._lock:
            self._refused_full += 1

    def refused_auth(self) -> None:
        with self._lock:
            self._refused_auth += 1

    def refused_size(self) -> None:
        with self._lock:
            self._refused_size += 1

    def cancelled(self) -> None:
        with self._lock:
            self._cancelled += 1

    def render(self, devices: Sequence[DeviceState] = ()) -> str:
        now = time.monotonic()
        with self._lock:
            while self._recent and self._recent[0] < now - RATE_WINDOW_S:
                self._recent.popleft()
            lines: list[str] = []

            def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
                lines.extend(_family(name, kind, help_text, samples))

            metric("kernelproof_queue_depth", "gauge", "Jobs queued, not yet started.", [("", self._queued)])
            metric("kernelproof_running", "gauge", "Jobs being evaluated.", [("", self._running)])
            metric(
                "kernelproof_in_flight",
                "gauge",
                "Evaluations in flight per device.",
                [(_labels(device=d), n) for d, n in sorted(self._in_flight.items())],
            )
            metric(
                "kernelproof_evaluations_per_second",
                "gauge",
                f"Evaluations finished per second over the last {RATE_WINDOW_S:.0f} s.",
                [("", len(self._recent) / RATE_WINDOW_S)],
            )
            metric("kernelproof_evaluations_total", "counter", "Evaluations run.", [("", self._evaluations)])
            metric(
                "kernelproof_served_from_store_total",
                "counter",
                "Jobs answered from the results store by content hash.",
                [("", self._from_store)],
            )
            metric(
                "kernelproof_verdicts_total",
                "counter",
                "Verdicts by outcome and first reason code.",
                [(_labels(outcome=o, code=c), n) for (o, c), n in sorted(self._verdicts.items())],
            )
            metric(
                "kernelproof_evaluation_seconds_total",
                "counter",
                "Wall seconds of the evaluations run.",
                [("", self._evaluation_s)],
            )
            metric(
                "kernelproof_build_seconds_total",
                "counter",
                "Seconds the builders ran.",
                [("", self._build_s)],
            )
            metric(
                "kernelproof_builds_total",
                "counter",
                "Builds run (cache hits not counted).",
                [("", self._builds)],
            )
            metric(
                "kernelproof_refused_total",
                "counter",
                "Requests refused, by why.",
                [
                    (_labels(why="queue_full"), self._refused_full),
                    (_labels(why="unauthorized"), self._refused_auth),
                    (_labels(why="too_large"), self._refused_size),
                ],
            )
            metric(
                "kernelproof_cancelled_total", "counter", "Queued jobs cancelled.", [("", self._cancelled)]
            )
        lines += _device_lines(devices)
        return "\n".join(lines) + "\n"


def _labels(**labels: str) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + body + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> list[str]:
    """One metric family in the text format: its HELP and TYPE lines, then a line per sample."""
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"] + [
        f"{name}{labels} {_number(value)}" for labels, value in samples
    ]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _device_lines(devices: Sequence[DeviceState]) -> list[str]:
    """The devices' admission gauges (a device appears once an evaluation was admitted to it)."""
    families: dict[str, tuple[str, list[tuple[str, float]]]] = {
        "kernelproof_device_slots": ("Evaluations a device runs at once (--per-device).", []),
        "kernelproof_device_running": ("Evaluations holding one of a device's slots.", []),
        "kernelproof_device_standing_aside": (
            "Evaluations waiting for a build or for memory, their device slots lent.",
            [],
        ),
        "kernelproof_device_alone": (
            "1 while an evaluation has the device alone or waits for it to empty.",
            [],
        ),
        "kernelproof_device_memory_capacity_bytes": ("Device memory the admission gives out.", []),
        "kernelproof_device_memory_reserved_bytes": ("Device memory reserved by evaluations.", []),
        "kernelproof_device_memory_holders": ("Evaluations holding a reservation of device memory.", []),
        "kernelproof_device_memory_waiting": ("Evaluations waiting for device memory, by stage.", []),
    }
    for d in devices:
        dev = _labels(device=d.device)
        if d.slots is not None:
            families["kernelproof_device_slots"][1].append((dev, d.slots.slots))
            families["kernelproof_device_running"][1].append((dev, d.slots.running))
            families["kernelproof_device_standing_aside"][1].append((dev, d.slots.aside))
            families["kernelproof_device_alone"][1].append((dev, int(d.slots.alone)))
        m = d.memory
        if m is not None and m.capacity_bytes is not None:  # no admission by memory on the CPU
            families["kernelproof_device_memory_capacity_bytes"][1].append((dev, m.capacity_bytes))
            families["kernelproof_device_memory_reserved_bytes"][1].append((dev, m.reserved_bytes))
            families["kernelproof_device_memory_holders"][1].append((dev, m.holders))
            waiting = families["kernelproof_device_memory_waiting"][1]
            waiting.append((_labels(device=d.device, stage="arrive"), m.arriving))
            waiting.append((_labels(device=d.device, stage="grow"), m.growing))
    lines: list[str] = []
    for name, (help_text, samples) in families.items():
        if samples:  # a family with no device yet is left out
            lines += _family(name, "gauge", help_text, samples)
    return lines
