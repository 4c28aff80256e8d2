"""The build environment: what besides the source decides what a build produces, and the cache key.

A cached build may only be reused where it would have come out the same: same solution bytes,
same torch, CUDA and compiler versions (and which compilers), same target architecture and
flags, same precompiled torch header, same flag allowlist (issue 15, point 6). Everything here is
read in the trusted parent (the device's capability included) and handed to the builder process
as plain values, so the candidate's build never decides its own key.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass

# Bump when the layout of an entry or the build recipe changes. /2: entries hold only the declared
# outputs, compilers run from argument lists, keys cover the compilers' paths and the header's identity.
KEY_VERSION = "kernelproof.build/2"


@dataclass(frozen=True)
class BuildEnv:
    """Build-relevant facts about this machine; part of every cache key."""

    torch_version: str  # torch.__version__
    torch_cuda: str  # torch.version.cuda ("" on a CPU build)
    nvcc_version: str  # last line of `nvcc --version` ("" when nvcc is absent)
    cxx_version: str  # first line of `c++ --version`
    arch: str  # one TORCH_CUDA_ARCH_LIST entry, e.g. "9.0a"; "" for a CPU-only evaluation
    python_abi: str  # e.g. "cpython-311"; extensions are tied to it
    cxx_path: str = ""  # the C++ compiler torch runs ($CXX or c++), resolved to a file
    nvcc_path: str = ""  # the nvcc torch and kernelproof.native run, resolved to a file
    # The host CPU's model and instruction-set flags: -march=native, -mavx2 and OpenMP's code paths
    # produce host code for this CPU, which another machine sharing the cache may not run.
    cpu_model: str = ""

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def arch_for_capability(major: int, minor: int) -> str:
    """The one architecture to build for a device of this compute capability.

    Why a single entry: load_inline's default is every arch torch was built for, which multiplies
    device compile time for code that only ever runs here. Hopper (9.0) and Blackwell (10.x, 12.x)
    get the "a" suffix: their arch-specific features (wgmma, setmaxnreg, TMA multicast) exist only
    under sm_90a/sm_100a, and a kernel written for them does not compile for plain sm_90.
    """
    suffix = "a" if major >= 9 else ""
    return f"{major}.{minor}{suffix}"


def device_arch(device: str) -> str:
    """The arch string for `device` ("cuda", "cuda:N" or "cpu"), read from the device itself.

    Called in the trusted parent; the builder receives the result in TORCH_CUDA_ARCH_LIST.
    """
    if not device.startswith("cuda"):
        return ""
    import torch

    index = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(index)
    return arch_for_capability(major, minor)


def sm_name(arch: str) -> str:
    """ "9.0a" -> "sm_90a", the form nvcc's -gencode and -arch take."""
    return "sm_" + arch.replace(".", "").replace("+PTX", "")


@functools.cache
def _first_line(cmd: tuple[str, ...], last: bool = False) -> str:
    exe = shutil.which(cmd[0])
    if exe is None:
        return ""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return ""
    if not out:
        return ""
    return out[-1] if last else out[0]


def nvcc_path(environ: Mapping[str, str] | None = None) -> str | None:
    """nvcc from CUDA_HOME or PATH (the same search torch.utils.cpp_extension makes), in `environ`
    (default: os.environ)."""
    environ = os.environ if environ is None else environ
    home = environ.get("CUDA_HOME") or environ.get("CUDA_PATH")
    if home and os.path.isfile(os.path.join(home, "bin", "nvcc")):
        return os.path.join(home, "bin", "nvcc")
    found = shutil.which("nvcc", path=environ.get("PATH"))
    if found:
        return found
    default = "/usr/local/cuda/bin/nvcc"
    return default if os.path.isfile(default) else None


def cuda_home() -> str | None:
    """The CUDA toolkit root: CUDA_HOME/CUDA_PATH, /usr/local/cuda, or the folder above nvcc's bin/."""
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.path.isfile(os.path.join(home, "bin", "nvcc")):
            return home
    nvcc = nvcc_path()
    if nvcc is None:
        return None
    home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    return home if os.path.isdir(os.path.join(home, "include")) else None


@functools.cache
def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The first CPU's model name and a hash of its feature flags ("" where the file is absent)."""
    import platform

    try:
        text = open(cpuinfo, encoding="utf-8", errors="replace").read()
    except OSError:
        return platform.processor() or platform.machine()
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor's block
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    model = fields.get("model name") or fields.get("CPU part") or platform.machine()
    features = fields.get("flags") or fields.get("Features") or ""
    digest = hashlib.sha256(" ".join(sorted(features.split())).encode()).hexdigest()[:16]
    return f"{model} [{digest}]"


def current_env(arch: str) -> BuildEnv:
    """Read this machine's build environment (subprocess calls are cached for the process)."""
    import sysconfig

    import torch

    nvcc = nvcc_path()
    cxx = os.environ.get("CXX") or "c++"  # what torch.utils.cpp_extension runs
    cxx_file = shutil.which(cxx.split()[0]) if cxx.split() else None
    return BuildEnv(
        torch_version=torch.__version__,
        torch_cuda=torch.version.cuda or "",
        nvcc_version=_first_line((nvcc, "--version"), last=True) if nvcc else "",
        cxx_version=_first_line((cxx.split()[0], "--version")) if cxx.split() else "",
        arch=arch,
        python_abi=sysconfig.get_config_var("SOABI") or "",
        cxx_path=os.path.realpath(cxx_file) if cxx_file else "",
        nvcc_path=os.path.realpath(nvcc) if nvcc else "",
        cpu_model=cpu_model(),
    )


def build_key(source: bytes, env: BuildEnv, flags: tuple[str, ...] = ()) -> str:
    """sha256 over the solution's bytes, the environment and the build flags: the cache key.

    `flags` holds everything else that feeds a build, as ``name=value`` strings: the build options,
    the allowlist's version and the identity of each precompiled header the build is given
    (kernelproof.build.pool.BuilderPool.key_for).
    """
    h = hashlib.sha256()
    header = {"v": KEY_VERSION, "env": env.to_json(), "flags": list(flags)}
    h.update(json.dumps(header, sort_keys=True).encode())
    h.update(b"\0")
    h.update(source)
    return h.hexdigest()
