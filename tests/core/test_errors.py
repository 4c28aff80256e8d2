"""One error tree: every exception kernelproof raises on purpose is a KernelproofError, defined in
kernelproof/errors.py, still importable where it was raised, drawn in the module's docstring and
in docs/architecture.md, and carrying the exit code the command line uses for it."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

from kernelproof import errors
from kernelproof.errors import KernelproofError

ROOT = Path(__file__).resolve().parents[2]

# Where each class was defined before the tree held it: those imports must keep working.
OLD_HOMES = {
    "WorkerDied": "kernelproof.host.process",
    "ProtocolError": "kernelproof.wire.protocol",
    "NativeCompileError": "kernelproof.native",
    "CertificateError": "kernelproof.certificate",
    "KeyFileError": "kernelproof.signing",
    "ReportInputError": "kernelproof.report.load",
    "CacheTamperError": "kernelproof.build.cache",
    "PublishError": "kernelproof.build.cache",
    "AgentError": "kernelproof.agent.agent_errors",
    "ConfigError": "kernelproof.agent.agent_errors",
    "MissingDependencyError": "kernelproof.agent.agent_errors",
    "ReplayError": "kernelproof.agent.agent_errors",
    "BackendError": "kernelproof.agent.agent_errors",
}
ALSO_EXPORTED = {  # packages that re-export them
    "CertificateError": "kernelproof.certify",
    "ReportInputError": "kernelproof.report",
    "CacheTamperError": "kernelproof.build",
    "BackendError": "kernelproof.agent",
}


def tree_classes() -> dict[str, type]:
    return {
        name: obj
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == errors.__name__
    }


def test_every_class_of_the_tree_is_a_kernelproof_error_defined_in_errors_py():
    classes = tree_classes()
    assert set(OLD_HOMES) <= set(classes)
    assert all(issubclass(cls, KernelproofError) for cls in classes.values())


@pytest.mark.parametrize("name", sorted(OLD_HOMES))
def test_the_old_import_path_names_the_same_class(name):
    assert getattr(importlib.import_module(OLD_HOMES[name]), name) is getattr(errors, name)
    if name in ALSO_EXPORTED:
        assert getattr(importlib.import_module(ALSO_EXPORTED[name]), name) is getattr(errors, name)


def test_no_module_defines_an_exception_outside_the_tree_but_the_private_ones():
    allowed = {
        "MalformedReply",
        "_NoFast",
        "_Refuse",
        "_Unmapped",
        "Refused",
        "LandlockError",
    }  # errors.py says why each
    found = set()
    for path in (ROOT / "kernelproof").rglob("*.py"):
        if path.name == "errors.py" and path.parent.name == "kernelproof":
            continue
        for m in re.finditer(r"^class (\w+)\((\w*(?:Error|Exception)\w*)", path.read_text(), re.M):
            found.add(m.group(1))
    assert found <= allowed, sorted(found - allowed)


def test_the_drawn_tree_names_every_class_in_the_module_and_in_the_architecture_page():
    drawn_module = errors.__doc__ or ""
    page = (ROOT / "docs" / "architecture.md").read_text()
    for name in tree_classes():
        assert re.search(rf"\b{name}\b", drawn_module), f"{name} is not drawn in errors.py's docstring"
        assert re.search(rf"\b{name}\b", page), f"{name} is not in docs/architecture.md"


def test_worker_died_and_protocol_error_keep_their_fields_and_every_catch_by_type_still_works():
    from kernelproof.host.process import WorkerDied
    from kernelproof.wire.protocol import ProtocolError

    died = WorkerDied("timeout", "the worker did not answer", "detail")
    assert (died.code, died.message, died.detail, str(died)) == (
        "timeout",
        "the worker did not answer",
        "detail",
        "the worker did not answer",
    )
    for exc in (died, ProtocolError("bad frame")):
        with pytest.raises(type(exc)):
            raise exc
        assert isinstance(exc, KernelproofError) and errors.UsageError not in type(exc).__mro__
    try:  # the api's rule: a usage error propagates, anything else becomes an internal_error verdict
        raise WorkerDied("crash", "gone")
    except errors.UsageError:  # pragma: no cover - must not be taken
        pytest.fail("WorkerDied is not misuse")
    except Exception as exc:
        assert isinstance(exc, WorkerDied)


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (errors.UsageError("x"), 2),
        (errors.TaskError("x", path="t.py", line=3), 2),
        (errors.SandboxError("x"), 2),
        (errors.CertificateError("x"), 2),
        (errors.KeyFileError("x"), 2),
        (errors.ReportInputError("x"), 2),
        (errors.ConfigError("x"), 2),
        (errors.MissingDependencyError("x"), 2),
        (errors.ReplayError("x"), 2),
        (errors.BackendError("refused", retryable=False, status=401), 2),
        (errors.BackendError("down", retryable=True, status=503), 4),
        (errors.StoreError("x"), 2),
        (errors.WorkerError("x"), 3),
        (errors.WorkerDied("crash", "x"), 3),
        (errors.ProtocolError("x"), 3),
        (errors.CacheTamperError("k" * 64, "changed"), 3),
        (errors.PublishError("x"), 3),
        (errors.NativeCompileError("x"), 3),
        (errors.AgentError("x"), 3),
        (ValueError("not ours"), 3),
    ],
)
def test_each_error_maps_to_its_exit_code(exc, code):
    from kernelproof import exits

    assert exits.of_error(exc) == code


def test_a_task_error_says_where():
    assert str(errors.TaskError("no Model", path="t.py", line=3)) == "t.py:3: no Model"
