"""Shared test configuration: GPU tests are skipped where no CUDA device is present; the build
cache of CUDA and native solutions, the results store, the store's signing key and the signing
keys' folder are temporary ones of the session (not the user's, and under pytest-xdist each
worker's own); a long run prints a status line now and then (``progress``); and under
pytest-xdist every process runs one OpenMP thread unless told otherwise."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# Without a GPU, Triton runs only through its interpreter: say so before anything in the test
# process imports Triton. The exploit zoo's naive evaluator runs solutions in this process, and once
# the parent's meta-device estimate has imported torch's compiler stack (it imports Triton), a Triton
# kernel launched later here fails unless the interpreter was chosen from the start.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Helper modules shared by several test packages (tests/support/): importable by name.
sys.path.insert(0, str(Path(__file__).parent / "support"))

import progress  # noqa: E402
from progress import pytest_runtest_logreport, pytest_runtest_logstart  # noqa: E402, F401


@pytest.hookimpl(trylast=True)  # progress: after the terminal plugin has made its reporter
def pytest_configure(config):
    """Under pytest-xdist, one OpenMP thread per process unless OMP_NUM_THREADS says otherwise: with
    as many test processes as cores, each process's own thread pool (and its workers', its
    zygote's, its CLI runs') oversubscribes the machine, and OpenMP's threads spin while they wait.
    Set in the controller, before the xdist workers start, so every process inherits it. On the
    2-core machine it took the legit zoo from 84 s to 67 s (-n 2)."""
    if getattr(config.option, "numprocesses", None):
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    progress.pytest_configure(config)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run scripts/gpu-check on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _session_env(tmp_path_factory, name: str, make) -> Iterator[None]:
    """Set `name` to a path of this session (`make(tmp_path_factory)`) unless it is set already."""
    if os.environ.get(name):
        yield
        return
    os.environ[name] = str(make(tmp_path_factory))
    try:
        yield
    finally:
        os.environ.pop(name, None)


@pytest.fixture(scope="session", autouse=True)
def _private_build_cache(tmp_path_factory):
    """Evaluations that build go to a session cache unless KERNELPROOF_CACHE_DIR is set already."""
    yield from _session_env(tmp_path_factory, "KERNELPROOF_CACHE_DIR", lambda f: f.mktemp("build-cache"))


@pytest.fixture(scope="session", autouse=True)
def _private_store_key(tmp_path_factory):
    """Stores sign their rows with a session key unless KERNELPROOF_STORE_KEY is set already."""
    yield from _session_env(
        tmp_path_factory, "KERNELPROOF_STORE_KEY", lambda f: f.mktemp("store-key") / "store.key"
    )


@pytest.fixture(scope="session", autouse=True)
def _private_store(tmp_path_factory):
    """Evaluations without a --db of their own store to a session database, never the user's (one
    test's stored verdict served to another would make tests depend on their order)."""
    yield from _session_env(
        tmp_path_factory, "KERNELPROOF_DB", lambda f: f.mktemp("store") / "results.sqlite"
    )


@pytest.fixture(scope="session", autouse=True)
def _private_config(tmp_path_factory):
    """Certificate signing keys made without --key go to a session folder, not ~/.config (two
    pytest-xdist workers would both create the same key file)."""
    yield from _session_env(tmp_path_factory, "XDG_CONFIG_HOME", lambda f: f.mktemp("config"))


@pytest.fixture(autouse=True)
def _time_when_busy(monkeypatch):
    """Tests time on a shared, loaded machine: a busy one is flagged there, not the error
    machine_busy (as --time-when-busy does), so that what a test asserts about a verdict does not
    depend on the neighbours' load. Tests of machine_busy itself set the switch back."""
    from kernelproof.measure import parent_clock

    monkeypatch.setattr(parent_clock, "BUSY_IS_ERROR", False)


@pytest.fixture
def seeds_tried(monkeypatch) -> list[int]:
    """Every seed kernelproof/verify/case_plan.py seeds torch with from now on, in order: a fallback from
    the device to the CPU shows as the same seed twice."""
    from kernelproof.verify import case_plan

    tried: list[int] = []
    real = case_plan.seeded

    def seeded(seed):
        tried.append(seed)
        return real(seed)

    monkeypatch.setattr(case_plan, "seeded", seeded)
    return tried
