"""Applying a containment plan in the child, before anything else runs (I8).

Called first thing by the worker's and the builder's entry points, before torch is imported:
Landlock and seccomp bind the calling thread and what it starts afterwards, and torch, CUDA and
CUPTI start threads. The order is forced: the mounts need root (or a fresh user namespace), the
process limit is set while it still can be, then the uid drops, then Landlock and seccomp close
the door behind it. Each layer that fails is reported with its reason and the others still go
on: each holds on its own, and the parent decides what a missing one means (``--require-sandbox``).

The report travels on a pipe the parent gave (``--contain-report FD``) as one JSON line, written
and closed before any candidate code can run, so what the parent reads is the bootstrap's own word.
"""

from __future__ import annotations

import json
import os
import resource
from dataclasses import asdict

from kernelproof.sandbox import identity, landlock, mounts, seccomp
from kernelproof.sandbox.plan import LAYERS, Layer, Plan

PLAN_FLAG = "--contain"  # the plan's path (a file the parent wrote into the private root)
REPORT_FLAG = "--contain-report"  # the pipe the report goes back on
TMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")  # shared temporary directories, each a bind of rw/tmp


def apply(plan: Plan) -> list[Layer]:
    """Apply `plan` to this process; one Layer per name in LAYERS, in order."""
    if not plan.contained:
        return [Layer(name, False, plan.why_not) for name in LAYERS]
    layers: dict[str, Layer] = {}
    layers["mounts"], bound = _mounts(plan)
    layers["processes"] = _processes(plan)
    layers["identity"] = _identity(plan)
    if plan.workdir:
        try:
            os.chdir(plan.workdir)
        except OSError:
            pass
    # Landlock follows paths through mounts: a bind of rw/tmp at /tmp is not beneath rw/ when
    # reached as /tmp, so the binds that were made get rules of their own.
    layers["landlock"] = _landlock(plan, [(t, "rw") for t in bound])
    layers["seccomp"] = _seccomp(plan)
    return [layers[name] for name in LAYERS]


def _mounts(plan: Plan) -> tuple[Layer, list[str]]:
    """The mounts layer, and the shared temporary directories now bound to the private one."""
    if not plan.mount_namespace:
        return Layer("mounts", False, "not planned"), []
    try:
        if plan.user_namespace:
            mounts.enter_user_namespace()
        else:
            mounts.enter_mount_namespace()
    except OSError as exc:
        reason = f"no mount namespace here ({exc.strerror}): /tmp is denied by Landlock"
        return Layer("mounts", False, reason), []
    covers: list[tuple[str, str | None]] = [(d, None) for d in plan.reveal]
    shared = [t for t in TMP_DIRS if plan.private_tmp and os.path.isdir(t)]
    covers += [(t, plan.private_tmp) for t in shared]
    done, missing, bound = [], [], []
    try:
        mounts.cover(covers, [r.path for r in plan.rules] + ([plan.workdir] if plan.workdir else []))
        bound = shared
        if plan.private_tmp:
            done.append("a private " + ", ".join(shared))
        if plan.reveal:
            done.append("covered " + ", ".join(plan.reveal))
    except OSError as exc:
        missing.append(f"private /tmp ({exc.strerror})")
    if plan.hidepid:
        try:
            mounts.mount_proc_hidepid()
            done.append("/proc with hidepid=invisible")
        except OSError as exc:
            missing.append(f"/proc hidepid ({exc.strerror})")
    else:
        missing.append("/proc hidepid (needs root: a user namespace cannot mount proc)")
    if missing:
        return Layer("mounts", False, "; ".join(done + ["missing: " + ", ".join(missing)])), bound
    return Layer("mounts", True, "; ".join(done)), bound


def _processes(plan: Plan) -> Layer:
    try:
        identity.become_subreaper()
        reaper = "the orphans of its children stay its own (child subreaper)"
    except OSError as exc:
        reaper = f"not a child subreaper ({exc.strerror}): a double fork's orphan leaves its descendants"
    if plan.max_processes <= 0:
        why = "no uid of its own: RLIMIT_NPROC would count the user's processes"
        return Layer("processes", False, f"{why}; {reaper}")
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (plan.max_processes, plan.max_processes))
    except (OSError, ValueError) as exc:
        return Layer("processes", False, f"RLIMIT_NPROC: {exc}; {reaper}")
    return Layer(
        "processes", True, f"at most {plan.max_processes} processes and threads (RLIMIT_NPROC); {reaper}"
    )


def _identity(plan: Plan) -> Layer:
    if plan.uid >= 0:
        try:
            identity.become(plan.uid, plan.gid)
        except OSError as exc:
            return Layer("identity", False, f"switch to uid {plan.uid} failed: {exc}")
        return Layer("identity", True, f"uid {plan.uid}, gid {plan.gid}, no supplementary groups")
    if not plan.parent_nondumpable:
        return Layer(
            "identity",
            False,
            "not root: same uid as the parent, which is dumpable (the CLI makes it non-dumpable; "
            "api callers pass EvalOptions(harden_parent=True))",
        )
    return Layer("identity", True, "not root: same uid, the parent non-dumpable (its /proc entries closed)")


def landlock_rules(plan: Plan, extra: list[tuple[str, str]], pid: int) -> list[tuple[str, str]]:
    """The Landlock rules of process `pid`: the plan's, the binds made for it, and its own /proc
    directory writable. CUDA's initialisation writes there: with /proc read-only,
    cudaGetDeviceCount failed with error 304 on an H200, and with this rule it ran. Resolved in the
    child (the parent's /proc/self is the parent's); other processes' entries stay read-only, and
    hidden where /proc is mounted with hidepid."""
    return [(r.path, r.access) for r in plan.rules] + extra + [(f"/proc/{pid}", "rw")]


def _landlock(plan: Plan, extra: list[tuple[str, str]]) -> Layer:
    rules = landlock_rules(plan, extra, os.getpid())
    try:
        done = landlock.restrict(rules, deny_tcp=True, scope=plan.scope)
    except OSError as exc:
        return Layer("landlock", False, str(exc))
    gaps = []
    if not done.tcp:
        gaps.append(f"TCP rules need ABI 4 (kernel has {done.abi})")
    if plan.scope and not done.scoped:
        gaps.append(f"signal scoping needs ABI 6 (kernel has {done.abi})")
    if gaps:
        return Layer("landlock", False, f"ABI {done.abi}, filesystem rules on; missing: " + "; ".join(gaps))
    scope = "signals and abstract unix sockets scoped" if plan.scope else "no scoping (under a tool)"
    return Layer("landlock", True, f"ABI {done.abi}: {len(rules)} path rules, no TCP, {scope}")


def _seccomp(plan: Plan) -> Layer:
    if not plan.seccomp:
        return Layer("seccomp", False, "not planned")
    try:
        loaded = seccomp.install(allow_sockets=plan.sockets)
    except ImportError as exc:
        return Layer("seccomp", False, f"pyseccomp or libseccomp.so.2 missing ({exc})")
    except (OSError, RuntimeError, ValueError) as exc:
        return Layer("seccomp", False, f"the kernel refused the filter: {exc}")
    sockets = "new sockets allowed (under a tool)" if plan.sockets else "no new socket but AF_UNIX"
    return Layer("seccomp", True, f"{len(loaded.denied)} calls denied, namespace clones denied, {sockets}")


def enter(argv: list[str]) -> list[str]:
    """The entry points' first step: apply the plan named in `argv`, report it, and return `argv`
    without the containment flags. Without them (a process started by hand) nothing is applied."""
    rest, plan_path, report_fd = [], "", -1
    it = iter(argv)
    for arg in it:
        if arg == PLAN_FLAG:
            plan_path = next(it, "")
        elif arg == REPORT_FLAG:
            report_fd = int(next(it, "-1"))
        else:
            rest.append(arg)
    if not plan_path:
        return rest
    with open(plan_path) as f:
        plan = Plan.from_json(f.read())
    layers = apply(plan)
    if report_fd >= 0:
        try:
            os.write(report_fd, (json.dumps([asdict(x) for x in layers]) + "\n").encode())
        finally:
            os.close(report_fd)
    return rest


def parse_report(text: str) -> list[Layer]:
    """The layers a child reported; every layer missing when it reported nothing (it died first)."""
    try:
        doc = json.loads(text.splitlines()[0]) if text.strip() else None
        got = {d["name"]: Layer(str(d["name"]), bool(d["active"]), str(d["detail"])) for d in doc}
    except (ValueError, KeyError, TypeError, IndexError):
        got = {}
    return [got.get(name) or Layer(name, False, "the process reported nothing") for name in LAYERS]
