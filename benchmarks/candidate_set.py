"""The candidate set that looks like training traffic: list it, validate it, run it against its expectations.

benchmarks/candidates/ holds, for KernelBench level 1 and level 2 tasks, the kinds of solution a
training run submits: honest Triton and CUDA kernels, plain-PyTorch rewrites, subtly wrong kernels,
kernels that do not compile, precision downgrades and exploits adapted from the zoo
(tests/exploits). ``manifest.json`` (schema ``kernelproof.candidates/1``) names each candidate's
task (KernelBench's relative path, ``level1/19_ReLU.py``), its kind and the verdict it must get,
twice: ``gpu`` for the timed run with every check on (what a trainer asks for), ``cpu`` for a
correctness-only run on the CPU (Triton's interpreter; ``null`` where only the timing phase can
decide, as for a pointer cache or a decoy kernel, or where the CPU cannot show the fault, as for a
TF32 dot the interpreter computes in fp32).

    python benchmarks/candidate_set.py --list
    python benchmarks/candidate_set.py --validate
    python benchmarks/candidate_set.py --smoke                         # CI: 4 tasks, 12 candidates, CPU
    python benchmarks/candidate_set.py --nvcc [--nvcc-whole]           # the CUDA ones through nvcc, sm_90
    python benchmarks/candidate_set.py --kernelbench .kernelbench --device cpu --only 19_ReLU
    python benchmarks/candidate_set.py --kernelbench .kernelbench --device cuda --per-device 2

A CPU run writes each task with its size constants scaled down (the manifest's ``cpu_sizes``, a
``KERNELPROOF`` variant appended to a copy of the task: kernelproof rewrites the constants itself)
and evaluates correctness only. The smoke set uses the task files under
``benchmarks/candidates/tasks/`` (the same operators, with their CPU shapes), so it needs no
KernelBench checkout. The run prints each verdict against its expectation and exits 1 on any
verdict that is not expected.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from _common import ROOT

HERE = ROOT / "benchmarks" / "candidates"
MANIFEST = HERE / "manifest.json"
SCHEMA = "kernelproof.candidates/1"
KINDS = (
    "honest_triton",
    "honest_cuda",
    "plain_torch",
    "wrong_tail",
    "wrong_math",
    "wrong_broadcast",
    "nocompile_cuda",
    "nocompile_triton",
    "downgrade_bf16",
    "downgrade_tf32",
    "exploit",
)
VERDICTS = ("pass", "fail", "error")
BACKENDS = ("triton", "cuda", "torch")
MIN_CANDIDATES = 200
MIN_TASKS = 20


@dataclass(frozen=True)
class Expectation:
    verdict: str
    codes: tuple[str, ...]  # any one of them among the verdict's reasons (empty for a pass)
    flags: tuple[str, ...] = ()  # each must open one of the verdict's flags

    def met_by(self, verdict: str, codes: list[str], flags: list[str]) -> bool:
        if verdict != self.verdict:
            return False
        if self.codes and not set(self.codes) & set(codes):
            return False
        return all(any(f == want or f.startswith(want + ":") for f in flags) for want in self.flags)

    def __str__(self) -> str:
        text = self.verdict + (f" ({'|'.join(self.codes)})" if self.codes else "")
        return text + (f" flagged {', '.join(self.flags)}" if self.flags else "")


@dataclass(frozen=True)
class Candidate:
    id: str
    task: str  # KernelBench relative path
    file: Path
    kind: str
    backend: str
    gpu: Expectation
    cpu: Expectation | None


def load(manifest: Path = MANIFEST) -> tuple[dict, list[Candidate]]:
    """The manifest's document and its candidates (paths resolved beside it)."""
    doc = json.loads(manifest.read_text())
    out = []
    for row in doc.get("candidates", []):
        exp = row.get("expect", {})
        out.append(
            Candidate(
                id=row["id"],
                task=row["task"],
                file=manifest.parent / row["file"],
                kind=row["kind"],
                backend=row["backend"],
                gpu=_expectation(exp.get("gpu")),
                cpu=_expectation(exp.get("cpu")) if exp.get("cpu") is not None else None,
            )
        )
    return doc, out


def _expectation(raw: dict | None) -> Expectation:
    raw = raw or {}
    return Expectation(str(raw.get("verdict")), tuple(raw.get("codes", ())), tuple(raw.get("flags", ())))


def problems(doc: dict, candidates: list[Candidate]) -> list[str]:
    """Everything wrong with the manifest and its files; empty when the set is well formed."""
    from kernelproof.verdict import ReasonCode

    known = {c.value for c in ReasonCode}
    out = []
    if doc.get("schema") != SCHEMA:
        out.append(f"schema is {doc.get('schema')!r}, not {SCHEMA!r}")
    tasks = doc.get("tasks", {})
    if len(candidates) < MIN_CANDIDATES:
        out.append(f"{len(candidates)} candidates, fewer than {MIN_CANDIDATES}")
    if len({c.task for c in candidates}) < MIN_TASKS:
        out.append(f"{len({c.task for c in candidates})} tasks, fewer than {MIN_TASKS}")
    seen: set[str] = set()
    for c in candidates:
        where = c.id
        if c.id in seen:
            out.append(f"{where}: the id appears twice")
        seen.add(c.id)
        if c.task not in tasks or not tasks[c.task].get("cpu_sizes"):
            out.append(f"{where}: task {c.task} has no entry with cpu_sizes under tasks")
        if c.kind not in KINDS:
            out.append(f"{where}: kind {c.kind!r} is not one of {KINDS}")
        if c.backend not in BACKENDS:
            out.append(f"{where}: backend {c.backend!r} is not one of {BACKENDS}")
        for label, exp in (("gpu", c.gpu), ("cpu", c.cpu)):
            if exp is None:
                continue
            if exp.verdict not in VERDICTS:
                out.append(f"{where}: {label} verdict {exp.verdict!r} is not one of {VERDICTS}")
            if (exp.verdict == "pass") == bool(exp.codes):
                out.append(
                    f"{where}: {label} expectation {exp} (a pass has no codes, anything else has some)"
                )
            for code in exp.codes:
                if code not in known:
                    out.append(
                        f"{where}: {label} code {code!r} is not a reason code of kernelproof/verdict.py"
                    )
        if not c.file.is_file():
            out.append(f"{where}: {c.file} does not exist")
            continue
        out.extend(f"{where}: {p}" for p in _file_problems(c))
    return out


def _file_problems(c: Candidate) -> list[str]:
    """A candidate's file parses and defines ModelNew; its backend matches what it holds."""
    import ast

    text = c.file.read_text()
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return [f"does not parse: {exc}"]
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    out = [] if "ModelNew" in names else ["defines no ModelNew"]
    if ast.get_docstring(tree) is None:
        out.append("has no docstring")
    holds = "cuda" if "load_inline" in text else "triton" if "@triton.jit" in text else "torch"
    if holds != c.backend:
        out.append(f"backend {c.backend!r} but the file holds {holds}")
    return out


def scaled_task(source: Path, sizes: dict, dest: Path) -> Path:
    """A copy of `source` whose CPU shape is `sizes`: a KERNELPROOF variant appended (kernelproof
    rewrites the module's constants itself; docs/tasks.md). A task with its own dict is copied as is."""
    text = source.read_text()
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not re.search(r"^KERNELPROOF\s*=", text, re.MULTILINE):
        text += f"\n\nKERNELPROOF = {{'variants': {{'cpu': {sizes!r}}}, 'cpu': ['cpu']}}\n"
    dest.write_text(text)
    return dest


def smoke_pairs(doc: dict, candidates: list[Candidate]) -> list[tuple[Path, Candidate]]:
    """The smoke set: (task file under candidates/tasks/, candidate) for the ids the manifest names."""
    by_id = {c.id: c for c in candidates}
    return [
        (HERE / "tasks" / s["task_file"], by_id[i]) for s in doc.get("smoke", []) for i in s["candidates"]
    ]


def evaluate(pairs: list[tuple[Path, Candidate]], device: str, per_device: int, db: str):
    """Each pair's (candidate, verdict) as it is decided, through kernelproof.api.evaluate_many (correctness
    only on the CPU, where the interpreter's speed is no claim and the timing phase has nothing to show)."""
    from kernelproof.api import evaluate_many
    from kernelproof.options import EvalOptions

    options = EvalOptions(
        device=device,
        correctness_only=device == "cpu",
        shape_variants="task" if device == "cpu" else "probe",
        per_device=per_device,
        db=db,
        fresh=not db,
    )
    by_path = {str(c.file): c for _, c in pairs}
    for v in evaluate_many([(t, c.file) for t, c in pairs], options):
        yield by_path[v.solution.path], v


def report(results, device: str) -> int:
    """One line per verdict against its expectation, as each arrives; the number of unexpected verdicts."""
    bad = n = 0
    tally: Counter = Counter()
    for c, v in results:
        exp = c.cpu if device == "cpu" else c.gpu
        if exp is None:
            status = "n/a"
        else:
            status = "ok" if exp.met_by(v.verdict.value, v.codes, list(v.flags)) else "UNEXPECTED"
        bad += status == "UNEXPECTED"
        n += 1
        tally[(c.kind, status)] += 1
        got = v.verdict.value + (f" ({', '.join(v.codes)})" if v.codes else "")
        print(f"{status:10s} {c.id:60s} {got:40s} expected {exp}  [{v.elapsed_s:.1f} s]", flush=True)
    print(", ".join(f"{k} {s}: {m}" for (k, s), m in sorted(tally.items())))
    print(f"{n} verdicts, {bad} unexpected")
    return bad


CUDA_HEAD = "#include <torch/extension.h>\n"  # what each candidate's load_inline puts before KERNEL


def nvcc_check(candidates: list[Candidate], whole: bool, out: Path) -> int:
    """Compile each CUDA candidate's device code with ``nvcc -arch=sm_90 -c``: its ``KERNEL`` string
    alone (seconds), or with ``whole`` the source load_inline builds (torch's headers: a minute each).
    A ``nocompile_cuda`` candidate must fail, every other must compile. The number that did not."""
    import ast
    import subprocess

    from torch.utils import cpp_extension

    includes = []
    if whole:
        import sysconfig

        for path in [
            *cpp_extension.include_paths(),
            sysconfig.get_paths()["include"],
            "/usr/local/cuda/include",
        ]:
            includes += ["-I", path]
    out.mkdir(parents=True, exist_ok=True)
    bad = 0
    for c in candidates:
        if c.backend != "cuda":
            continue
        strings = {
            t.id: n.value.value
            for n in ast.parse(c.file.read_text()).body
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        source = CUDA_HEAD + strings["KERNEL"] + strings["LAUNCH"] if whole else strings["KERNEL"]
        cu = out / (c.id.replace("/", "__") + ".cu")
        cu.write_text(source)
        r = subprocess.run(
            ["nvcc", "-arch=sm_90", "-std=c++17", "-c", str(cu), "-o", str(cu.with_suffix(".o")), *includes],
            capture_output=True,
            text=True,
        )
        first = next((ln for ln in r.stderr.splitlines() if "error" in ln), "")
        ok = (r.returncode != 0) == (c.kind == "nocompile_cuda")
        bad += not ok
        print(
            f"{'ok' if ok else 'UNEXPECTED':10s} {c.id:60s} nvcc exit {r.returncode} {first[-120:]}",
            flush=True,
        )
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="print the candidates and the counts by kind")
    ap.add_argument("--validate", action="store_true", help="check the manifest and its files")
    ap.add_argument(
        "--smoke", action="store_true", help="the CI set: 4 tasks at their CPU sizes, correctness only"
    )
    ap.add_argument(
        "--kernelbench", type=Path, help="a prepared KernelBench folder (kernelbench_sweep.py --prepare)"
    )
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--per-device", type=int, default=1)
    ap.add_argument("--only", action="append", default=[], help="candidate ids containing this text")
    ap.add_argument("--kind", action="append", default=[], help="only these kinds")
    ap.add_argument("--db", default="", help="a store to resume from (default: none, every verdict fresh)")
    ap.add_argument(
        "--nvcc", action="store_true", help="compile the CUDA candidates' kernels with nvcc for sm_90"
    )
    ap.add_argument("--nvcc-whole", action="store_true", help="with --nvcc: the whole load_inline source")
    ns = ap.parse_args()
    doc, candidates = load()
    if ns.list:
        for c in candidates:
            print(f"{c.id:60s} {c.kind:18s} gpu: {c.gpu}; cpu: {c.cpu}")
        print(
            Counter(c.kind for c in candidates),
            f"{len(candidates)} candidates, {len({c.task for c in candidates})} tasks",
        )
        return 0
    found = problems(doc, candidates)
    for p in found:
        print(p)
    if ns.validate or found:
        print(f"{len(candidates)} candidates: {'valid' if not found else f'{len(found)} problem(s)'}")
        return 1 if found else 0
    if ns.nvcc:
        chosen = [c for c in candidates if not ns.only or any(o in c.id for o in ns.only)]
        bad = nvcc_check(chosen, ns.nvcc_whole, Path(tempfile.mkdtemp(prefix="kp-candidates-nvcc-")))
        print(f"{sum(c.backend == 'cuda' for c in chosen)} CUDA candidates, {bad} unexpected")
        return 1 if bad else 0
    if ns.smoke:
        pairs = smoke_pairs(doc, candidates)
        device = "cpu"
    else:
        if ns.kernelbench is None:
            ap.error("--kernelbench DIR (or --smoke, --list, --validate) is required")
        chosen = [
            c
            for c in candidates
            if (not ns.only or any(o in c.id for o in ns.only)) and (not ns.kind or c.kind in ns.kind)
        ]
        device = ns.device
        root = ns.kernelbench / "KernelBench" if (ns.kernelbench / "KernelBench").is_dir() else ns.kernelbench
        tmp = Path(tempfile.mkdtemp(prefix="kp-candidates-"))
        pairs = []
        for c in chosen:
            task = root / c.task
            if device == "cpu":
                task = scaled_task(task, doc["tasks"][c.task]["cpu_sizes"], tmp / c.task)
            pairs.append((task, c))
    return 1 if report(evaluate(pairs, device, ns.per_device, ns.db), device) else 0


if __name__ == "__main__":
    sys.exit(main())
