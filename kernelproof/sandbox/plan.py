"""What a contained process may do, decided by the parent at spawn (I8).

The parent knows everything the rules need before the child starts: the interpreter, the
libraries and the toolchain (read and execute), the private ``ro/`` it fills and ``rw/`` the child
writes, the devices. It writes a :class:`Plan`, the child applies it at the top of its entry
point (kernelproof.sandbox.contain) and reports back, layer by layer, what holds (:class:`Layer`).

A plan never covers the results store, its key, the build cache or the repository: every rule is
checked against those (:func:`check_protected`) and a plan that would reach one is refused with a
:class:`SandboxError` naming both, before anything starts.
"""

from __future__ import annotations

import glob
import json
import os
import site
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kernelproof.errors import SandboxError
from kernelproof.sandbox import identity
from kernelproof.sandbox.private import PACKAGE_DIR, sandbox_root

SCHEMA = 1  # version of the plan's JSON document
LAYERS = ("identity", "landlock", "mounts", "seccomp", "processes")  # what a report names, in order
MAX_PROCESSES = 512  # RLIMIT_NPROC of a contained uid: threads count too (torch starts one per core)
SYSTEM_EXEC = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/opt")  # toolchains, CUDA, ldconfig
SYSTEM_READ = ("/etc", "/proc", "/sys")  # configuration, device and CPU topology, ld.so.cache
DEV_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
SITE_MARKERS = ("site-packages", "dist-packages")


@dataclass(frozen=True)
class Rule:
    path: str  # a real path (no link on the way)
    access: str  # "r" | "rx" | "rw" | "dev" (kernelproof.sandbox.landlock.ACCESS)


@dataclass(frozen=True)
class Layer:
    name: str  # one of LAYERS
    active: bool  # holds in the contained process
    detail: str  # what it does there, or why it does not hold


@dataclass(frozen=True)
class Plan:
    role: str  # "candidate" | "builder" | "baseline"
    contained: bool  # False: nothing is applied (a baseline runs the task's own reference)
    why_not: str = ""  # when not contained: the sentence every layer reports
    uid: int = -1  # the process's own uid (parent is root); -1: it keeps the parent's
    gid: int = -1
    user_namespace: bool = False  # not root: a user namespace, so that the mounts below can be made
    parent_nondumpable: bool = False  # not root: the parent's /proc entries are closed to its uid
    mount_namespace: bool = False  # private mounts: the covers below and a hidepid /proc
    private_tmp: str = ""  # bound over /tmp, /var/tmp and /dev/shm ("" = none)
    hidepid: bool = False  # /proc mounted with hidepid=invisible: other uids' processes do not exist
    reveal: tuple[str, ...] = ()  # directories the uid cannot traverse (e.g. /root): covered, rules rebound
    rules: tuple[Rule, ...] = ()  # Landlock: everything else is denied
    seccomp: bool = False
    sockets: bool = False  # new non-unix sockets allowed (under a tool such as compute-sanitizer)
    scope: bool = True  # Landlock scoping: signals and abstract unix sockets stay in the domain
    max_processes: int = 0  # RLIMIT_NPROC; 0: none (the uid is shared with others)
    workdir: str = ""  # the directory the process works in after the switch

    def to_json(self) -> str:
        return json.dumps({"schema": SCHEMA, **asdict(self)})

    @classmethod
    def from_json(cls, text: str) -> Plan:
        doc = json.loads(text)
        if doc.pop("schema", None) != SCHEMA:
            raise ValueError("a containment plan of another schema version")
        doc["rules"] = tuple(Rule(**r) for r in doc.get("rules", ()))
        doc["reveal"] = tuple(doc.get("reveal", ()))
        return cls(**doc)


def uncontained(role: str, why: str) -> Plan:
    """A plan that applies nothing (baseline workers: the task's own reference, the parent's uid)."""
    return Plan(role=role, contained=False, why_not=why)


def plan_for(
    role: str,
    readable: Sequence[Path],
    writable: Sequence[Path],
    scratch: Path | None,
    devices: bool,
    relaxed: bool = False,
    protected: Sequence[str | Path] = (),
) -> Plan:
    """The containment of one candidate worker or builder.

    `readable` and `writable` are its private directories (and files); `scratch` becomes its
    /tmp where a mount namespace exists; `devices` adds /dev/nvidia* with the ioctl right;
    `relaxed` (a wrapper tool such as compute-sanitizer talks to its target over sockets) keeps
    new sockets and abstract unix sockets open. Raises SandboxError where a rule would reach a
    protected path.
    """
    root = os.geteuid() == 0
    rules = system_rules(devices)
    rules += [Rule(_real(p), "r") for p in readable]
    rules += [Rule(_real(p), "rw") for p in writable]
    check_protected(rules, [*default_protected(), *protected])
    check_no_exec_where_written(rules)
    uid = gid = -1
    if root:
        uid = gid = identity.claim(sandbox_root())
    workdir = _real(scratch if scratch is not None else writable[0]) if writable else "/"
    return Plan(
        role=role,
        contained=True,
        uid=uid,
        gid=gid,
        user_namespace=not root,
        parent_nondumpable=(not root) and not identity.parent_dumpable(),
        mount_namespace=True,
        private_tmp=_real(scratch / "tmp") if scratch is not None else "",
        hidepid=root,
        reveal=untraversable([r.path for r in rules]) if root else (),
        rules=tuple(rules),
        seccomp=True,
        sockets=relaxed,
        scope=not relaxed,
        max_processes=MAX_PROCESSES if root else 0,
        workdir=workdir,
    )


def release(plan: Plan) -> None:
    """Give the plan's uid back (the process is gone)."""
    if plan.uid >= 0:
        identity.release(sandbox_root(), plan.uid)


def system_rules(devices: bool) -> list[Rule]:
    """What every contained process reads and runs: the system, the interpreter and its packages,
    CUDA and the compilers, kernelproof itself; device nodes read-write with ioctl."""
    rx = [*SYSTEM_EXEC, sys.prefix, sys.base_prefix, sys.exec_prefix]
    rx += [
        p for p in (sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")) if p
    ]
    rx += list(site.getsitepackages()) + [site.getusersitepackages()]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            rx.append(os.environ[var])
    rx += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    rx += library_paths()
    rules = [Rule(_real(p), "rx") for p in rx if os.path.isabs(p) and os.path.exists(p)]
    rules += [Rule(p, "r") for p in SYSTEM_READ if os.path.exists(p)]
    rules.append(Rule(str(PACKAGE_DIR), "r"))
    devs = list(DEV_FILES)
    if devices:
        devs += sorted(glob.glob("/dev/nvidia*"))
    rules += [Rule(_real(p), "dev") for p in devs if os.path.exists(p)]
    out, seen = [], set()
    for r in rules:
        if (r.path, r.access) not in seen:
            seen.add((r.path, r.access))
            out.append(r)
    return out


def library_paths() -> list[str]:
    """The parent's PYTHONPATH entries that are package directories (site-packages, or inside the
    interpreter's prefix). Any other entry, the solution's folder or a checkout, stays off the
    contained process's path: a solution is one file (issue 15, point 7)."""
    prefixes = {_real(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    keep = []
    for p in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if not p or not os.path.isabs(p):
            continue
        real = _real(p)
        if any(m in Path(real).parts for m in SITE_MARKERS) or any(_under(real, x) for x in prefixes):
            keep.append(real)
    return keep


def default_protected() -> list[str]:
    """Where the results store, its key, the build cache and the repository live by default."""
    home = Path.home()
    data = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    paths = [data / "kernelproof", home / ".cache" / "kernelproof"]
    if os.environ.get("KERNELPROOF_CACHE_DIR"):
        paths.append(Path(os.environ["KERNELPROOF_CACHE_DIR"]))
    repo = PACKAGE_DIR.parent
    if (repo / "pyproject.toml").exists() or (repo / ".git").exists():
        paths.append(repo)
    return [_real(p) for p in paths]


def check_protected(rules: Sequence[Rule], protected: Sequence[str | Path]) -> None:
    """Refuse a plan in which a rule reaches the store, its key, the build cache or the repository."""
    for p in protected:
        real = _real(p)
        for r in rules:
            if _under(real, r.path):
                raise SandboxError(
                    f"the sandbox would give a contained process access ({r.access}) to {r.path}, "
                    f"which holds {real} (the results store, its key, the build cache or the "
                    "repository): move one of them"
                )


def check_no_exec_where_written(rules: Sequence[Rule]) -> None:
    """Nothing a contained process can write may also be executable by it (execve)."""
    for w in (r for r in rules if r.access == "rw"):
        for x in (r for r in rules if r.access == "rx"):
            if _under(w.path, x.path) or _under(x.path, w.path):
                raise SandboxError(f"{w.path} would be both writable and executable in the sandbox")


def untraversable(paths: Sequence[str]) -> tuple[str, ...]:
    """The outermost directories on the way to `paths` that another uid cannot traverse (no o+x)."""
    found: list[str] = []
    for p in paths:
        parts = Path(p).parts
        for i in range(2, len(parts) + 1):
            d = str(Path(*parts[:i]))
            if any(_under(d, f) for f in found):
                break
            try:
                mode = os.stat(d).st_mode
            except OSError:
                break
            if os.path.isdir(d) and not mode & 0o001 and d != p:
                found.append(d)
                break
    return tuple(found)


def _real(p: str | Path) -> str:
    return os.path.realpath(os.fspath(p))


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")
