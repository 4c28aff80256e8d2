"""Timing of single calls inside a worker: device-side spans on CUDA, monotonic clocks on the CPU.

On CUDA every timed call is preceded by fresh inputs, an L2 flush (twice the L2 size, outside the
window) and a device synchronize; a short spin kernel then holds the stream while the host queues
the call, so host launch latency before the first kernel stays out (nvbench's blocking kernel).
The time is the device-side span, from the profiler's activity records, of every kernel, copy and
memset that started inside the call's window, on any stream (I5): work hidden on a side stream is
counted. CUDA events around the call are kept beside it; a span far above the event time means
work escaped the caller's stream.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from kernelproof.worker.checks.hooks import quiet

_perf_counter_ns = time.perf_counter_ns  # bound before any solution is imported (identity-checked)
_perf_counter = time.perf_counter
MIN_SPIN_US = 30.0  # shortest hold of the stream before a call
MAX_SPIN_US = 50_000.0  # longest hold (a call whose host side takes longer is host-bound anyway)
SPIN_MARGIN = 1.5  # the hold outlasts the slowest recent host-side queueing time by this factor
RANGE_PREFIX = "kernelproof_call_"


@dataclass
class CallSample:
    span_ms: float  # device-side span (CUDA) or wall time (CPU): the figure used
    event_ms: float  # CUDA event time on the caller's stream (CPU: same as span)
    kernels: int  # device activities seen in the window (CUDA; -1 on CPU)
    host_ms: float = 0.0  # host time inside the call (queueing on CUDA; everything on the CPU)


class CpuClock:
    name = "cpu-perf-counter"

    def run(
        self,
        calls: list[Callable[[], object]],
        prepare: Callable[[int], None] | None = None,
        after: Callable[[int, object], None] | None = None,
    ) -> tuple[list[object], list[CallSample]]:
        """Each call between two reads of the monotonic clock; ``prepare(i)`` writes call i's
        inputs before its window, ``after(i, out)`` checks its output after it (both untimed)."""
        outs, samples = [], []
        for i, call in enumerate(calls):
            if prepare is not None:
                prepare(i)
            t0 = _perf_counter_ns()
            out = call()
            t1 = _perf_counter_ns()
            if after is not None:
                after(i, out)
            ms = (t1 - t0) / 1e6
            outs.append(out)
            samples.append(CallSample(ms, ms, -1, ms))
        return outs, samples


class CudaClock:
    """Cold-regime clock for CUDA: flushed L2, spin-held stream, profiler spans over all streams."""

    name = "cuda-kineto-span"

    def __init__(self, device: torch.device):
        self.device = device
        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 50 * 2**20) or 50 * 2**20)
        self.flush = torch.empty(2 * l2, dtype=torch.uint8, device=device)  # 2x L2: evicts every line
        self.reset_persisting = _persisting_l2_reset()
        self.cycles_per_us = float(getattr(props, "clock_rate", 0) or 1_980_000) / 1000.0  # clock_rate is kHz
        self.host_us: list[float] = []  # host time to queue a call: the spin must outlast it
        self.breakdown_ms: dict[str, float] = {}  # the last batch's harness time per call, by part

    def flush_l2(self) -> None:
        if self.reset_persisting is not None:
            self.reset_persisting()
        self.flush.zero_()

    def spin_cycles(self) -> int:
        """Hold the stream longer than the host needs to queue the whole call (nvbench's blocking kernel)."""
        recent = self.host_us[-8:]
        host = max(recent) if recent else 200.0
        us = min(max(MIN_SPIN_US, SPIN_MARGIN * host + 20.0), MAX_SPIN_US)
        return int(us * self.cycles_per_us)

    def run(
        self,
        calls: list[Callable[[], object]],
        prepare: Callable[[int], None] | None = None,
        after: Callable[[int, object], None] | None = None,
    ):
        """Each call in its own window; ``prepare(i)`` writes call i's inputs before its window and
        ``after(i, out)`` checks its output after the window has closed, before the next prepare."""
        from torch.profiler import ProfilerActivity, profile, record_function

        outs: list[object] = []
        events = []
        # Where the batch's host time goes outside the calls' windows (reported, never trusted for a
        # decision): profiler start, fresh inputs, L2 flush, the hold, the checks and fingerprint
        # after each call, profiler stop, span extraction.
        parts = dict.fromkeys(
            ("profiler_start", "prepare", "flush", "hold", "after", "profiler_stop", "spans"), 0.0
        )
        t = _perf_counter()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            torch.cuda._sleep(1000)  # the profiler's start-up cost lands here, not in the first call
            torch.cuda.synchronize(self.device)
            parts["profiler_start"] += _perf_counter() - t
            for i, call in enumerate(calls):
                t = _perf_counter()
                if prepare is not None:
                    prepare(i)
                t1 = _perf_counter()
                with quiet():
                    self.flush_l2()
                torch.cuda.synchronize(self.device)
                t2 = _perf_counter()
                parts["prepare"] += t1 - t
                parts["flush"] += t2 - t1
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                cycles = self.spin_cycles()
                parts["hold"] += cycles / self.cycles_per_us / 1e6
                with record_function(f"{RANGE_PREFIX}{i}"):
                    torch.cuda._sleep(cycles)
                    start.record()
                    h0 = _perf_counter()
                    out = call()
                    self.host_us.append((_perf_counter() - h0) * 1e6)
                    end.record()
                    torch.cuda.synchronize(self.device)
                outs.append(out)
                events.append((start, end))
                if after is not None:
                    t = _perf_counter()
                    after(i, out)
                    parts["after"] += _perf_counter() - t
            t = _perf_counter()
        parts["profiler_stop"] += _perf_counter() - t
        t = _perf_counter()
        spans = _spans_from_profile(prof, len(calls))
        parts["spans"] += _perf_counter() - t
        self.breakdown_ms = {k: round(v * 1e3 / max(1, len(calls)), 4) for k, v in parts.items()}
        samples = []
        host = self.host_us[-len(calls) :]
        for (start, end), (span, count), h_us in zip(events, spans, host):
            event_ms = start.elapsed_time(end)
            samples.append(CallSample(span if count else event_ms, event_ms, count, h_us / 1e3))
        return outs, samples


def _spans_from_profile(prof, n: int) -> list[tuple[float, int]]:
    events = prof.profiler.kineto_results.events()
    windows: dict[int, tuple[int, int]] = {}
    device_acts = []
    for ev in events:
        name = ev.name()
        dt = str(ev.device_type())
        if name.startswith(RANGE_PREFIX) and "CPU" in dt:
            try:
                idx = int(name[len(RANGE_PREFIX) :])
            except ValueError:
                continue
            windows[idx] = (ev.start_ns(), ev.end_ns())
        elif "CUDA" in dt and not name.startswith(RANGE_PREFIX) and not _is_annotation(ev):
            device_acts.append((ev.start_ns(), ev.end_ns(), name))
    out = []
    for i in range(n):
        lo, hi = windows.get(i, (None, None))
        if lo is None:
            out.append((0.0, 0))
            continue
        inside = [(s, e, nm) for (s, e, nm) in device_acts if lo <= s <= hi]
        # Our own spin kernel opens the window; it is not the candidate's time.
        spins = [a for a in inside if "spin_kernel" in a[2]]
        if spins:
            first_spin = min(spins)
            inside.remove(first_spin)
        if not inside:
            out.append((0.0, 0))
            continue
        start = min(s for s, _, _ in inside)
        stop = max(e for _, e, _ in inside)
        out.append(((stop - start) / 1e6, len(inside)))
    return out


def _is_annotation(ev) -> bool:
    try:
        return bool(ev.is_user_annotation())
    except Exception:  # noqa: BLE001 - older torch: annotations are recognised by name only
        return False


def kernels_of_call(prof) -> list[tuple[str, int, float, int]]:
    """(name, stream, gpu_ms, bytes) of every device activity in the profile, our spin kernel
    excluded; bytes: what a memcpy or memset moved (-1 where the profiler does not say)."""
    out = []
    for ev in prof.profiler.kineto_results.events():
        if "CUDA" in str(ev.device_type()) and "spin_kernel" not in ev.name() and not _is_annotation(ev):
            ms = (ev.end_ns() - ev.start_ns()) / 1e6
            out.append((ev.name(), int(ev.device_resource_id()), ms, _moved_bytes(ev)))
    return out


def _moved_bytes(ev) -> int:
    """The bytes of a memcpy or memset activity (CUPTI records them), -1 for anything else or unknown."""
    name = ev.name()
    if not (name.startswith("Memcpy") or name.startswith("Memset")):
        return -1
    try:
        n = int(ev.nbytes())
        if n > 0:
            return n
    except Exception:  # noqa: BLE001 - an older profiler without nbytes
        pass
    try:
        import json

        meta = json.loads("{" + ev.metadata_json() + "}") if ev.metadata_json() else {}
        return int(meta.get("bytes", -1))
    except Exception:  # noqa: BLE001
        return -1


def _persisting_l2_reset():
    """A callable that resets persisting L2 lines, where the CUDA runtime exposes it."""
    try:
        cudart = torch.cuda.cudart()
        fn = getattr(cudart, "cudaCtxResetPersistingL2Cache", None)
        return fn
    except Exception:
        return None


def _methods(cls: type) -> tuple[tuple[str, object], ...]:
    """The functions a clock class defines, by name, as they are now."""
    return tuple((name, value) for name, value in vars(cls).items() if callable(value))


def replaced(
    clock: object,
    _classes: tuple[type, ...] = (CpuClock, CudaClock),
    _methods_then: tuple[tuple[tuple[str, object], ...], ...] = (_methods(CpuClock), _methods(CudaClock)),
    _counters: tuple[object, ...] = (
        _perf_counter_ns,
        _perf_counter,
        time.perf_counter_ns,
        time.perf_counter,
    ),
) -> str:
    """What of the harness's clock is not what this module made, or "" (#45, I5).

    The solution reaches the worker's state (a torch helper walks frames for it), so the clock a
    timed request reads there may be one of its own, reporting what it likes. Checked where the
    clock is used, after the one read of it: the object is exactly one of this module's clock
    classes, no method is shadowed on it, every method and the bound counters are those seen when
    this module was imported, before any solution ran. The originals are held in this function's
    defaults, tuples the solution cannot change in place (rebinding them is an audited
    ``object.__setattr__`` that kernelproof.sandbox.guards refuses to solution code).

    Not proof: a counter rebound and restored within one batch is not seen here; the parent's own
    clock bounds what such a window can claim (kernelproof.measure.parent_clock, docs/timing.md).
    """
    kind = type(clock)
    if kind not in _classes:
        return f"the timed request's clock is a {kind.__name__[:60]}, not the harness's"
    shadowed = sorted(set(getattr(clock, "__dict__", {})) & {name for name, _ in _methods(kind)})
    if shadowed:
        return f"the harness's clock has its own {', '.join(shadowed)}"
    then = dict(_methods_then[_classes.index(kind)])
    changed = [name for name, value in _methods(kind) if then.get(name) is not value]
    if changed or len(then) != len(_methods(kind)):
        return f"the harness's clock class {kind.__name__} changed: {', '.join(changed) or 'methods removed'}"
    now = (_perf_counter_ns, _perf_counter, time.perf_counter_ns, time.perf_counter)
    if any(a is not b for a, b in zip(now, _counters)):
        return "the harness's clock counters were replaced"
    return ""
