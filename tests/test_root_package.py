"""The root package: the public API, imported on first use, and nothing in kernelproof imports it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / d for d in ("kernelproof", "tests", "benchmarks", "scripts")]


def python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_importing_kernelproof_imports_neither_torch_nor_the_api():
    out = python(
        "import sys, kernelproof; print(sorted(m for m in sys.modules if m.startswith(('torch', 'kernelproof'))))"
    )
    assert out == "['kernelproof', 'kernelproof._version']"


def test_the_public_names_are_the_api_s_own():
    out = python(
        "import kernelproof, kernelproof.api as api, kernelproof.options as o, kernelproof.verdict as v\n"
        "from kernelproof import EvalOptions, ReasonCode, Verdict, evaluate, evaluate_many\n"
        "print(evaluate is api.evaluate, evaluate_many is api.evaluate_many, EvalOptions is o.EvalOptions,"
        " Verdict is v.Verdict, ReasonCode is v.ReasonCode, kernelproof.__version__)"
    )
    assert out == "True True True True True 0.1.0"


def test_evaluate_stays_the_function_after_the_subpackage_of_that_name_is_imported():
    # The subpackage kernelproof.evaluate binds itself on its parent when imported (the api imports
    # it): the public name must not turn into a module, in either order.
    out = python(
        "import kernelproof.evaluate.chain, kernelproof.api\n"
        "from kernelproof import evaluate\n"
        "import kernelproof\n"
        "from kernelproof.evaluate import chain\n"
        "print(callable(evaluate), kernelproof.evaluate is kernelproof.api.evaluate, chain.__name__)"
    )
    assert out == "True True kernelproof.evaluate.chain"


def test_all_is_explicit_and_every_name_in_it_resolves():
    import kernelproof

    assert set(kernelproof.__all__) == {
        "EvalOptions",
        "Outcome",
        "ReasonCode",
        "Verdict",
        "__version__",
        "aevaluate_many",
        "compare",
        "evaluate",
        "evaluate_many",
    }
    assert all(getattr(kernelproof, name) is not None for name in kernelproof.__all__)


def test_no_module_of_kernelproof_imports_the_root_package_for_a_name():
    # A module that imports `kernelproof` itself (for __version__, say) would depend on the root,
    # which reaches the api: the layer contract forbids that below the api.
    submodules = {
        p.stem for p in (ROOT / "kernelproof").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()
    }
    offenders = []
    for path in (ROOT / "kernelproof").rglob("*.py"):
        if path == ROOT / "kernelproof" / "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "kernelproof" for a in node.names):
                offenders.append(f"{path.relative_to(ROOT)}: import kernelproof")
            if isinstance(node, ast.ImportFrom) and node.module == "kernelproof" and node.level == 0:
                offenders += [
                    f"{path.relative_to(ROOT)}: {a.name}" for a in node.names if a.name not in submodules
                ]
    assert not offenders, offenders


def test_nothing_reaches_the_evaluate_subpackage_as_an_attribute_of_the_root():
    # `import kernelproof.evaluate.x as y` and patch targets "kernelproof.evaluate.x" walk the
    # root's attributes, where `evaluate` is the function (kernelproof/__init__.py says why).
    pattern = re.compile(r"import kernelproof\.evaluate\.\w+.* as |[\"']kernelproof\.evaluate\.\w+\.\w+[\"']")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for base in SOURCES
        for path in base.rglob("*.py")
        if path != Path(__file__).resolve()
        for n, text in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(text)
    ]
    assert not offenders, offenders
