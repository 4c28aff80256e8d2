"""Build environment and keys: one arch per device, keys that change with everything that matters."""

from __future__ import annotations

import dataclasses

from kernelproof.build.env import BuildEnv, arch_for_capability, build_key, sm_name

ENV = BuildEnv("2.11.0+cu130", "13.0", "V13.0.88", "c++ 12.2.0", "9.0a", "cpython-311")


def test_hopper_gets_the_arch_specific_target():
    assert arch_for_capability(9, 0) == "9.0a"
    assert sm_name("9.0a") == "sm_90a"


def test_older_devices_get_the_plain_target():
    assert arch_for_capability(8, 0) == "8.0"


def test_key_changes_with_source_flags_and_every_env_field():
    base = build_key(b"src", ENV)
    assert build_key(b"src", ENV) == base
    assert build_key(b"src2", ENV) != base
    assert build_key(b"src", ENV, ("fast_inline=False",)) != base
    for f in dataclasses.fields(BuildEnv):
        assert build_key(b"src", dataclasses.replace(ENV, **{f.name: "other"})) != base, f.name


def test_environment_names_the_compiler_torch_runs(monkeypatch, tmp_path):
    import os
    import shutil

    from kernelproof.build.env import current_env

    alias = tmp_path / "my-c++"
    alias.symlink_to(shutil.which("c++"))
    monkeypatch.setenv("CXX", str(alias))
    env = current_env("9.0a")
    assert env.cxx_path == os.path.realpath(shutil.which("c++")) and env.cxx_version
