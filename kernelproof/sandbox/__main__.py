"""``python -m kernelproof.sandbox``: the containment layers on this machine, and what they stop.

Starts one process under the plan a candidate worker gets (kernelproof.sandbox.probe), prints
each layer with whether it holds and why, then each attempt the probe made from inside. Exit
status 0 when every layer holds and every attempt was stopped, 1 otherwise.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kernelproof.host import spawn
from kernelproof.sandbox import plan as sandbox_plan
from kernelproof.sandbox.private import PrivateDir, package_link

SAFE_PATH = ("-P",) if sys.version_info >= (3, 11) else ()


def main() -> int:
    dirs = PrivateDir.create("probe-")
    plan = sandbox_plan.plan_for("candidate", [dirs.ro], [dirs.rw], dirs.rw, devices=True)
    try:
        if plan.uid >= 0:
            dirs.hand_over(plan.uid, plan.gid)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": os.pathsep.join([str(package_link(dirs.ro)), *sandbox_plan.library_paths()]),
            "HOME": str(dirs.rw),
            "TMPDIR": str(dirs.rw / "tmp"),
        }
        cmd = [
            sys.executable,
            *SAFE_PATH,
            "-m",
            "kernelproof.sandbox.probe",
            str(os.getpid()),
            str(Path.home()),
        ]
        done = spawn.run(cmd, plan, dirs.root / "plan.json", env, dirs.root / "probe.log", 60.0, cwd=dirs.rw)
        lines = (dirs.root / "probe.log").read_text(errors="replace").splitlines()
    finally:
        dirs.remove()
        sandbox_plan.release(plan)
    print("containment layers of a candidate worker here:")
    for layer in done.layers:
        print(f"  {'active  ' if layer.active else 'MISSING '} {layer.name}: {layer.detail}")
    print("tried from inside:")
    for line in lines:
        print(f"  {line}")
    ok = all(x.active for x in done.layers) and lines and not any("ALLOWED" in ln for ln in lines)
    return 0 if ok and done.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
