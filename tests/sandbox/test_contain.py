"""The OS layers one by one, in small child processes (no torch): each holds on its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelproof.errors import SandboxError
from kernelproof.sandbox import contain, landlock
from kernelproof.sandbox import plan as sandbox_plan
from kernelproof.sandbox.plan import Plan, Rule
from kernelproof.sandbox.private import PrivateDir, package_link

ROOT = os.geteuid() == 0
needs_landlock = pytest.mark.skipif(landlock.abi_version() < 6, reason="needs Landlock ABI 6")


def run_child(code: str, plan: Plan | None, tmp_path: Path) -> tuple[str, list]:
    """Run `code` in a child that applies `plan` first; return its stdout and its report."""
    args = [
        sys.executable,
        "-P",
        "-c",
        "import sys\nfrom kernelproof.sandbox.contain import enter\n"
        "sys.argv[1:] = enter(sys.argv[1:])\n" + code,
    ]
    r, w = os.pipe()
    if plan is not None:
        (tmp_path / "plan.json").write_text(plan.to_json())
        args += [contain.PLAN_FLAG, str(tmp_path / "plan.json"), contain.REPORT_FLAG, str(w)]
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(package_link(tmp_path)), "HOME": str(tmp_path)}
    done = subprocess.run(args, capture_output=True, text=True, pass_fds=(w,), env=env, timeout=60)
    os.close(w)
    report = os.read(r, 1 << 20).decode() if plan is not None else ""
    os.close(r)
    assert done.returncode == 0, done.stderr
    return done.stdout, contain.parse_report(report)


@pytest.fixture
def worker_dirs():
    dirs = PrivateDir.create("test-")
    yield dirs
    dirs.remove()


def _plan(dirs: PrivateDir) -> Plan:
    p = sandbox_plan.plan_for("candidate", [dirs.ro], [dirs.rw], dirs.rw, devices=False)
    if p.uid >= 0:
        dirs.hand_over(p.uid, p.gid)
    return p


@needs_landlock
def test_landlock_allows_the_rules_and_denies_everything_else(worker_dirs, tmp_path):
    p = _plan(worker_dirs)
    code = (
        "import os\n"
        f"open({str(worker_dirs.rw / 'ok')!r}, 'w').write('x')\n"
        "for path in ('/etc/kp-test', os.path.expanduser('~root') + '/kp-test'):\n"
        "    try:\n        open(path, 'w'); print('WROTE', path)\n"
        "    except OSError as e:\n        print('denied', e.errno)\n"
    )
    out, layers = run_child(code, p, tmp_path)
    sandbox_plan.release(p)
    assert "WROTE" not in out and out.count("denied") == 2
    assert (worker_dirs.rw / "ok").read_text() == "x"
    assert all(x.active for x in layers), layers


@needs_landlock
def test_uncontained_plan_reports_every_layer_missing_with_its_reason(tmp_path):
    out, layers = run_child("print('ran')", sandbox_plan.uncontained("candidate", "just because"), tmp_path)
    assert out.strip() == "ran"
    assert [x.name for x in layers] == list(sandbox_plan.LAYERS)
    assert all(not x.active and x.detail == "just because" for x in layers)


@pytest.mark.skipif(not ROOT, reason="a uid of its own needs root")
@needs_landlock
def test_contained_child_runs_as_its_own_uid_and_sees_no_other_process(worker_dirs, tmp_path):
    p = _plan(worker_dirs)
    code = "import os\nprint(os.getuid(), os.getgid(), os.getgroups(), os.path.exists(f'/proc/{os.getppid()}'))\n"
    out, layers = run_child(code, p, tmp_path)
    sandbox_plan.release(p)
    assert out.split() == [str(p.uid), str(p.gid), "[]", "False"]
    ident = next(x for x in layers if x.name == "identity")
    assert ident.active and str(p.uid) in ident.detail


@needs_landlock
def test_seccomp_denies_namespaces_and_inet_sockets_but_not_unix_ones(tmp_path):
    p = Plan(role="candidate", contained=True, seccomp=True, rules=tuple(sandbox_plan.system_rules(False)))
    code = (
        "import socket, subprocess\n"
        "socket.socketpair(); print('unix ok')\n"
        "try:\n    socket.socket(socket.AF_INET); print('INET')\nexcept OSError as e:\n    print('inet', e.errno)\n"
        "print(subprocess.run(['unshare', '-m', 'true'], capture_output=True).returncode != 0)\n"
        "print(subprocess.run(['sh', '-c', 'echo child'], capture_output=True, text=True).stdout.strip())\n"
    )
    out, layers = run_child(code, p, tmp_path)
    assert out.split("\n")[:4] == ["unix ok", "inet 1", "True", "child"], out
    assert next(x for x in layers if x.name == "seccomp").active


def test_a_rule_over_the_store_is_refused(tmp_path):
    store = tmp_path / "data" / "results.sqlite"
    with pytest.raises(SandboxError, match="results store"):
        sandbox_plan.check_protected([Rule(str(tmp_path / "data"), "r")], [str(store)])
    sandbox_plan.check_protected([Rule(str(tmp_path / "other"), "rw")], [str(store)])  # elsewhere: fine


def test_no_folder_is_both_writable_and_executable(tmp_path):
    with pytest.raises(SandboxError, match="writable and executable"):
        sandbox_plan.check_no_exec_where_written(
            [Rule(str(tmp_path), "rx"), Rule(str(tmp_path / "rw"), "rw")]
        )


def test_plans_never_reach_the_repository_or_the_default_store():
    p = sandbox_plan.plan_for("candidate", [], [], None, devices=False)
    sandbox_plan.release(p)
    repo = str(Path(sandbox_plan.PACKAGE_DIR).parent)
    assert not any(repo == r.path or repo.startswith(r.path + "/") for r in p.rules)
    assert any(r.path == str(sandbox_plan.PACKAGE_DIR) and r.access == "r" for r in p.rules)


def test_plan_survives_its_json_round_trip(worker_dirs):
    p = _plan(worker_dirs)
    sandbox_plan.release(p)
    assert Plan.from_json(p.to_json()) == p


def test_untraversable_finds_the_outermost_closed_directory(tmp_path):
    closed = tmp_path / "closed"
    (closed / "inner" / "lib").mkdir(parents=True)
    closed.chmod(0o700)
    found = sandbox_plan.untraversable([str(closed / "inner" / "lib")])
    assert str(closed) in found or any(str(closed).startswith(f) for f in found)


def test_parse_report_marks_every_layer_missing_when_the_child_said_nothing():
    layers = contain.parse_report("")
    assert [x.active for x in layers] == [False] * len(sandbox_plan.LAYERS)
    assert json.dumps([x.detail for x in layers])


def test_a_contained_process_may_write_its_own_proc_directory_and_no_other():
    """CUDA's initialisation writes into the process's own /proc directory: read-only, it made
    cudaGetDeviceCount fail with error 304 on an H200. That directory alone is writable."""
    p = Plan(role="candidate", contained=True, rules=(Rule("/proc", "r"), Rule("/usr", "rx")))
    rules = contain.landlock_rules(p, [("/tmp/bound", "rw")], 4242)
    assert ("/proc/4242", "rw") in rules and ("/proc", "r") in rules
    assert [r for r in rules if r[0].startswith("/proc") and r[1] != "r"] == [("/proc/4242", "rw")]


@needs_landlock
def test_a_contained_process_is_a_child_subreaper_the_candidate_cannot_clear(tmp_path):
    """Orphans of its children stay its descendants (a stop reaches them, kernelproof.host.members)."""
    p = Plan(role="candidate", contained=True, seccomp=True, rules=tuple(sandbox_plan.system_rules(False)))
    code = (
        "import ctypes\nfrom kernelproof.sandbox import identity\n"
        "print(identity.is_subreaper())\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.prctl(identity.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0), ctypes.get_errno())\n"
        "print(identity.is_subreaper())\n"
    )
    out, layers = run_child(code, p, tmp_path)
    assert out.split("\n")[:3] == ["True", "-1 1", "True"], out  # EPERM: the mark stays
    assert "child subreaper" in next(x for x in layers if x.name == "processes").detail
