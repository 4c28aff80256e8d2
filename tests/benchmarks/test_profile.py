"""benchmarks/_profile.py wraps the worker's request in place: its wrapper must take every argument
the pipeline passes (a wrapper one argument short turned every profiled evaluation into an
internal_error, and the benchmark's "where the time went" into one line)."""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

import torch

from kernelproof.host import process

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _profile_module():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("_profile")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_the_wrapped_request_passes_every_argument_through(monkeypatch):
    seen = []

    def request(worker, header, tensors=None, timeout_s=600.0, expect=None):
        seen.append((header, tensors, timeout_s, expect))
        return {"steps_s": {"call": 0.25}}, [torch.zeros(4)]

    monkeypatch.setattr(process.WorkerProcess, "request", request)
    prof = _profile_module().Profile()
    with prof:
        reply, outs = process.WorkerProcess.request(None, {"op": "run"}, [torch.ones(2)], 5.0, "expected")
    assert process.WorkerProcess.request is request  # restored on the way out
    ((header, tensors, timeout_s, expect),) = seen
    assert (header, len(tensors), timeout_s, expect) == ({"op": "run"}, 1, 5.0, "expected")
    assert outs[0].shape == (4,)
    assert prof.calls["request run"] == 1
    assert prof.seconds["  request run, in the worker: call"] == 0.25


def test_the_wrapper_takes_the_requests_parameters():
    """Every parameter of WorkerProcess.request, by name and in order, so a new one fails here."""
    wrapped = inspect.signature(process.WorkerProcess.request).parameters
    source = inspect.getsource(_profile_module().Profile.__enter__)
    line = next(ln for ln in source.splitlines() if "def request(" in ln)
    names = [p.split("=")[0].strip() for p in line.split("(", 1)[1].rsplit(")", 1)[0].split(",")]
    assert names == ["worker", *list(wrapped)[1:]]
