"""Entry point of the builder process: import one solution so that its builds happen here.

Run by kernelproof.build.builder as ``python -m kernelproof.build.builder_main SOLUTION STAGING``,
with the containment flags of kernelproof.sandbox.contain, which are applied first, before torch is
imported (Landlock and seccomp bind only threads started afterwards). This process runs untrusted code (the solution's module level); the parent trusts nothing it
writes except the artifacts it publishes after its own checks, and reads result.json only to show it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import traceback
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from kernelproof.sandbox.contain import enter

    argv = enter(list(sys.argv[1:] if argv is None else argv))
    parser = argparse.ArgumentParser(prog="kernelproof.build.builder_main")
    parser.add_argument("solution")
    parser.add_argument("staging")
    parser.add_argument("--pch-dir", default=None)
    parser.add_argument("--no-fast", action="store_true")
    parser.add_argument("--no-guard", action="store_true")
    args = parser.parse_args(argv)

    from kernelproof.build import inline

    inline.install(pch_dir=args.pch_dir, fast=not args.no_fast, staging=args.staging)
    if not args.no_guard:
        _arm_guards(args.solution, args.staging)
    account: dict[str, object] = {"ok": False}
    code = 1
    try:
        spec = importlib.util.spec_from_file_location("kp_solution", args.solution)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {args.solution}")
        module = importlib.util.module_from_spec(spec)
        sys.modules["kp_solution"] = module
        spec.loader.exec_module(module)
        if not hasattr(module, "ModelNew"):
            print("the solution defines no ModelNew class", file=sys.stderr)
        account["ok"] = True
        code = 0
    except BaseException:  # noqa: BLE001 - every failure of the import is the build's result
        traceback.print_exc()
    finally:
        account["inline"] = inline.records()
        native = sys.modules.get("kernelproof.native")  # loaded by the solution's import, if it uses it
        if native is not None:
            try:
                account["native"] = native.records()
            except Exception:  # noqa: BLE001 - the solution's own module state: shown only
                pass
        refused = _refusals(account)
        if refused:
            # A refused flag fails the build even if the solution caught the error and went on;
            # the message, last in the log, is what the verdict quotes.
            account["ok"] = False
            code = 1
            print(refused[0], file=sys.stderr)
        Path(args.staging, "result.json").write_text(json.dumps(account, default=str))
        sys.stdout.flush()
        sys.stderr.flush()
    return code


def _refusals(account: dict[str, object]) -> list[str]:
    """The messages of the build calls refused: flags kernelproof.compiler_flags refused, or CUDA
    builds this machine cannot do (kernelproof/build/cuda.py)."""
    out = []
    for key in ("inline", "native"):
        records = account.get(key)
        for rec in records if isinstance(records, list) else []:
            if isinstance(rec, dict) and rec.get("refused"):
                out.append(str(rec["refused"]))
            elif isinstance(rec, dict) and rec.get("unavailable"):  # a CUDA build this machine cannot do
                out.append(f"a CUDA build was asked for and this machine cannot do it: {rec['unavailable']}")
    return out


def _arm_guards(solution: str, staging: str) -> None:
    """The worker's runtime guards, armed here too: the import that builds is the same untrusted
    code the worker imports, and a write outside the staging directory (the shared build cache,
    say) ends this process with the guards' violation status before the parent publishes anything."""
    from kernelproof.sandbox.guards import GuardConfig, install

    switch = install(GuardConfig(solution_path=solution, private_dir=staging))
    switch(True)


if __name__ == "__main__":
    sys.exit(main())
