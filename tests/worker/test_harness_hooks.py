"""What a solution leaves active in the harness's torch calls is named before the next harness step.

Each case runs in a process of its own that has just imported what a worker imports
(fresh_process: forked from a forkserver that imported them): watching installs wrappers on torch's
registration functions and the attacks leave modes and kernels behind, which this test process
must not keep.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import fresh_process
import pytest


def found_after(attack: str, full: bool = True, imported: tuple[str, ...] = ()) -> list[str]:
    """What ``watch()`` names after ``attack`` ran in a fresh worker-like interpreter (``imported``:
    the modules the harness's source imports, as the worker passes them)."""
    source = textwrap.dedent(
        f"""
        import json, sys, torch
        import kernelproof.worker.message_loop
        from kernelproof.worker.checks import hooks
        left_active = hooks.watch(imported={imported!r})
        """
    )
    source += textwrap.dedent(attack) + f"\nprint(json.dumps(left_active({full})))\n"
    out = fresh_process.run(source, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_nothing_is_named_when_nothing_was_left():
    assert found_after("x = torch.ones(3) * 2\n") == []


def test_a_function_mode_entered_and_never_left_is_named():
    attack = """
    from torch.overrides import TorchFunctionMode
    TorchFunctionMode().__enter__()
    """
    assert found_after(attack) == ["1 torch function mode(s)"]


def test_a_dispatch_mode_entered_and_never_left_is_named():
    attack = """
    from torch.utils._python_dispatch import TorchDispatchMode
    class Spy(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    Spy().__enter__()
    """
    assert found_after(attack) == [
        "1 torch dispatch mode(s)",
        "a change to the dispatch keys included or excluded for this thread",  # the Python key
    ]


def test_a_library_kernel_for_a_harness_operator_is_named_even_after_it_removed_itself():
    attack = """
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("detach", lambda t: torch.ops.aten.alias.default(t), "CPU")
    lib._destroy()  # gone from the dispatcher before anyone compares its tables
    """
    assert found_after(attack, full=False) == ["a torch.library kernel for aten::detach (CPU)"]


def test_a_kernel_registered_below_torch_library_is_named():
    attack = """
    m = torch._C._dispatch_library("IMPL", "aten", "")
    m.impl("fill_.Scalar", "CompositeImplicitAutograd", lambda t, v: t, False)
    """
    assert found_after(attack, full=False) == [
        "a torch.library kernel for aten::fill_.Scalar (CompositeImplicitAutograd)"
    ]


def test_an_override_through_one_of_torchs_own_aten_libraries_is_named():
    """torch keeps aten libraries of its own alive (a Meta one among them); a kernel put on a
    harness operator through one, at a key the harness reaches, counts as the solution's."""
    attack = """
    import gc
    libs = [o for o in gc.get_objects() if isinstance(o, torch.library.Library) and o.ns == "aten"]
    own = [lib for lib in libs if lib.dispatch_key in ("CPU", "CUDA")]
    if own:
        own[0].m.impl("sum", own[0].dispatch_key, lambda *a, **k: None, False)
    else:
        left_active = lambda full: ["none of torch's own aten libraries has an eager key here"]
    """
    found = found_after(attack, full=False)
    if found and found[0].startswith("none of"):
        pytest.skip(found[0])  # torch 2.11 keeps none; 2.13 keeps one for CUDA (torch._native)
    assert len(found) == 1 and found[0].startswith("a torch.library kernel for aten::sum (")


def test_the_dispatchers_tables_show_a_change_the_record_does_not():
    """A registration the record leaves out (here a Meta kernel, which the harness never reaches;
    a native extension's static registration at load would be another) still changes the
    operator's table, which the full check compares with the snapshot."""
    script = textwrap.dedent(
        """
        import json, torch
        import kernelproof.worker.message_loop
        from kernelproof.worker.checks import hooks
        left_active = hooks.watch(("aten::clone",))
        lib = torch.library.Library("aten", "IMPL")
        lib.impl("clone", lambda t, memory_format=None: t, "Meta")
        print(json.dumps([left_active(False), left_active(True)]))
        """
    )
    out = fresh_process.run(script, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    quick, full = json.loads(out.stdout.strip().splitlines()[-1])
    assert quick == []
    assert full == ["an override of aten::clone"]


def test_kernels_for_the_solutions_own_operators_and_other_keys_are_not_named():
    attack = """
    lib = torch.library.Library("kp_test", "DEF")
    lib.define("detach(Tensor x) -> Tensor")
    lib.impl("detach", lambda t: t.clone(), "CPU")  # its own namespace, the name of a harness op
    aten = torch.library.Library("aten", "IMPL")
    aten.impl("mm", lambda a, b: a, "CPU")  # an aten operator the harness never calls

    @torch.library.custom_op("kp_test::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2
    """
    assert found_after(attack) == []


def test_a_replaced_tensor_method_is_named():
    assert found_after("torch.Tensor.detach = lambda self: self\n") == ["a replaced torch.Tensor.detach"]


def test_the_python_dispatcher_and_autocast_are_named_as_changed_dispatch_keys():
    assert found_after("guard = torch._C._EnablePythonDispatcher()\n") == [
        "a change to the dispatch keys included or excluded for this thread"
    ]
    assert found_after("torch.set_autocast_enabled('cpu', True)\n") == [
        "a change to the dispatch keys included or excluded for this thread"
    ]


def test_a_profile_hook_and_a_gc_callback_are_named():
    attack = """
    import gc
    sys.setprofile(lambda *a: None)
    gc.callbacks.append(lambda *a: None)
    """
    assert found_after(attack) == ["a sys.setprofile hook", "a gc callback"]


def test_a_signal_handler_is_named_even_after_it_put_the_old_one_back():
    # d4_sigio_handler_deferral: the handler runs inside the harness's wait for the parent's next
    # message, after the timed window; one that restores the default after running leaves nothing
    # in place, and the record still names it.
    attack = """
    import signal
    signal.signal(signal.SIGALRM, lambda *a: None)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    """
    assert found_after(attack, full=False) == ["a signal handler for SIGALRM"]


def test_a_signal_handler_installed_through_the_builtin_module_is_named():
    attack = """
    import _signal, signal
    _signal.signal(int(signal.SIGIO), lambda *a: None)
    """
    assert found_after(attack, full=False) == ["a signal handler for SIGIO"]


def test_ignoring_a_signal_is_not_a_handler():
    assert found_after("import signal\nsignal.signal(signal.SIGUSR1, signal.SIG_IGN)\n") == []


def test_a_module_planted_in_sys_modules_is_named():
    # d4_planted_profiler_module: `from torch.autograd.profiler import profile` inside a harness
    # function finds whatever sys.modules holds under that name when the line runs.
    attack = """
    import types
    sys.modules["torch.autograd.profiler"] = types.ModuleType("torch.autograd.profiler")
    """
    quick = found_after(attack, full=False, imported=("torch.autograd.profiler",))
    assert quick == ["a replaced sys.modules['torch.autograd.profiler']"]
    assert found_after(attack, full=True) == ["a replaced sys.modules['torch.autograd.profiler']"]
    assert found_after(attack, full=False) == []  # the quick check covers the harness's own imports


def test_a_replaced_builtin_is_named():
    # d4_builtins_patch: the harness's isinstance, issubclass and type are looked up in builtins
    # each time its line runs.
    attack = """
    import builtins
    original = builtins.issubclass
    builtins.issubclass = lambda c, k: original(c, k)
    """
    assert found_after(attack, full=False) == ["a replaced builtin issubclass"]


def test_a_builtins_name_set_on_a_harness_module_is_named():
    attack = """
    import kernelproof.worker.calls as calls
    calls.type = lambda obj: torch.Tensor  # shadows the builtin in that module's lines
    calls.some_note = 1  # not a builtin's name: left alone
    """
    assert found_after(attack, full=False) == ["kernelproof.worker.calls.type over the builtin"]


def test_importing_new_modules_is_not_a_plant():
    assert found_after("import json, fractions, torch.utils.benchmark\n") == []


def test_the_worker_watches_the_modules_its_functions_import():
    import kernelproof.worker.message_loop  # noqa: F401 - every module the worker runs, as in a worker
    from kernelproof.worker import surface

    names = set(surface.harness_imports())
    assert {"torch.profiler", "torch.autograd.profiler", "json"} <= names


QUIET = """
import json, torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from kernelproof.worker.checks.hooks import quiet

calls = {"function": 0, "dispatch": 0}

class Function(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        calls["function"] += 1
        return func(*args, **(kwargs or {}))

class Dispatch(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        calls["dispatch"] += 1
        return func(*args, **(kwargs or {}))

x = torch.ones(3)
seen = {}
with Function(), Dispatch():
    for name, switch in (("DisableTorchFunction", torch._C.DisableTorchFunction),
                         ("_disable_current_modes", _disable_current_modes), ("quiet", quiet)):
        calls.update(function=0, dispatch=0)
        with switch():
            x * 2
        seen[name] = dict(calls)
print(json.dumps(seen))
"""


def test_quiet_silences_function_and_dispatch_modes_where_one_switch_alone_does_not():
    seen = _in_fresh_interpreter(QUIET)
    assert seen["DisableTorchFunction"] == {"function": 0, "dispatch": 1}  # the dispatch mode still ran
    assert seen["_disable_current_modes"] == {"function": 1, "dispatch": 0}  # the function mode still ran
    assert seen["quiet"] == {"function": 0, "dispatch": 0}


COVERAGE = """
import json, sys, torch
from torch.utils._python_dispatch import TorchDispatchMode
import harness_steps
from kernelproof.worker.checks.hooks import HARNESS_OPS

device = sys.argv[1]
with torch.autograd.profiler.profile() as prof:
    harness_steps.run_all(device)
called = {e.name for e in prof.function_events if e.name.startswith("aten::")}

class Recording(TorchDispatchMode):
    ops = set()
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        Recording.ops.add(func.name())
        return func(*args, **(kwargs or {}))

with Recording():
    harness_steps.run_all(device)
watched = set(HARNESS_OPS)
print(json.dumps({"overloads": sorted(Recording.ops - watched),
                  "operators": sorted(called - {op.split(".")[0] for op in watched})}))
"""


def test_the_watch_list_covers_every_operator_the_harness_steps_call():
    """Operators the steps reach through the dispatcher by exact overload, and every operator any
    step calls at any depth (the profiler's names) by one of its overloads."""
    assert _in_fresh_interpreter(COVERAGE, "cpu") == {"overloads": [], "operators": []}


@pytest.mark.gpu
def test_the_watch_list_covers_the_harness_steps_on_the_gpu():
    assert _in_fresh_interpreter(COVERAGE, "cuda") == {"overloads": [], "operators": []}


def _in_fresh_interpreter(script: str, *args: str) -> dict:
    """The JSON a script prints last, run where a dispatch mode cannot outlive it: a torch dispatch
    mode used once in a process breaks Triton's interpreter in it afterwards."""
    out = fresh_process.run(textwrap.dedent(script), *args, path=[str(Path(__file__).parent)], timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_pickling_a_tensor_is_not_a_replaced_tensor_method():
    """torch.save caches __slotnames__ on torch.Tensor (copyreg): Python's own cache, not a hook."""
    code = (
        "import io, torch\n"
        "from kernelproof.worker.checks.hooks import watch\n"
        "check = watch(())\n"
        "torch.save(torch.ones(2), io.BytesIO())\n"
        "print(check(full=False))\n"
    )
    done = fresh_process.run(code, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
