"""Shared test configuration: GPU tests are skipped where no CUDA device is present, and the
build cache of CUDA and native solutions and the store's signing key are temporary ones (not
the user's)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

# Helper modules shared by several test packages (tests/support/): importable by name.
sys.path.insert(0, str(Path(__file__).parent / "support"))


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run scripts/gpu-check on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _private_build_cache(tmp_path_factory):
    """Evaluations that build go to a session cache unless KERNELPROOF_CACHE_DIR is set already."""
    if os.environ.get("KERNELPROOF_CACHE_DIR"):
        yield
        return
    os.environ["KERNELPROOF_CACHE_DIR"] = str(tmp_path_factory.mktemp("build-cache"))
    try:
        yield
    finally:
        os.environ.pop("KERNELPROOF_CACHE_DIR", None)


@pytest.fixture(scope="session", autouse=True)
def _private_store_key(tmp_path_factory):
    """Stores sign their rows with a session key unless KERNELPROOF_STORE_KEY is set already."""
    if os.environ.get("KERNELPROOF_STORE_KEY"):
        yield
        return
    os.environ["KERNELPROOF_STORE_KEY"] = str(tmp_path_factory.mktemp("store-key") / "store.key")
    try:
        yield
    finally:
        os.environ.pop("KERNELPROOF_STORE_KEY", None)
