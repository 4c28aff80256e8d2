"""The README's table of the files kernelproof writes names each default the code computes: a path
moved in the code without the table is a newcomer looking in the wrong place."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kernelproof import signing, store, store_key
from kernelproof.build import default_cache_root
from kernelproof.measure import ceilings
from kernelproof.native import _cache_dir as native_cache_dir
from kernelproof.sandbox.private import sandbox_root

REPO = Path(__file__).resolve().parents[2]
MOVED_BY = (
    "KERNELPROOF_DB",
    "KERNELPROOF_STORE_KEY",
    "KERNELPROOF_CACHE_DIR",
    "KERNELPROOF_NATIVE_DIR",
    "KERNELPROOF_SANDBOX_DIR",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_RUNTIME_DIR",
)


def files_table() -> str:
    readme = (REPO / "README.md").read_text()
    return readme.split("### What kernelproof writes, and where\n", 1)[1].split("\n## ", 1)[0]


def as_written(path: Path | str, home: Path) -> str:
    return "~/" + str(Path(path).relative_to(home))


@pytest.fixture
def bare_home(tmp_path, monkeypatch):
    """A user with no kernelproof or XDG variables set: the defaults the table must name."""
    for name in MOVED_BY:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_the_table_names_every_default_location(bare_home):
    table = files_table()
    defaults = {
        "store": store.default_db_path(),
        "store key": store_key.key_path(),
        "signing key": signing.default_key_path(),
        "build cache": default_cache_root(),
        "native cache": native_cache_dir(),
    }
    for what, path in defaults.items():
        assert f"`{as_written(path, bare_home)}`" in table, what
    assert f"`{as_written(ceilings.cache_path('x').parent, bare_home)}/`" in table


def test_the_table_names_each_variable_that_moves_a_location():
    table = files_table()
    for name in MOVED_BY:
        if name != "XDG_RUNTIME_DIR" or os.geteuid() != 0:
            assert f"${name}" in table, name


def test_the_table_names_the_sandbox_folder_root_uses(monkeypatch, tmp_path):
    monkeypatch.delenv("KERNELPROOF_SANDBOX_DIR", raising=False)
    if os.geteuid() != 0:
        pytest.skip("the folder as root is computed only as root")
    assert str(sandbox_root()) in files_table()


def test_the_install_step_makes_a_virtual_environment_and_takes_the_cpu_build():
    install = (REPO / "README.md").read_text().split("## Install\n", 1)[1].split("\n## ", 1)[0]
    first_block = re.search(r"```bash\n(.+?)\n```", install, re.S).group(1)
    assert "python -m venv" in first_block and "torch==" in first_block
    # on ordinary Linux a plain `pip install torch` is the CUDA build: the CPU wheel index is named
    torch_line = next(ln for ln in first_block.splitlines() if "install torch" in ln)
    assert "--index-url https://download.pytorch.org/whl/cpu" in torch_line
    ci = (REPO / ".ci" / "run").read_text()
    assert 'install --quiet "torch==2.13.0"' in ci  # the same version, from the CI machine's own disk
    assert "CPU" in install and "CUDA build" in install
