"""Builds the solution asks for while it runs: the message's schema, the evaluation's limits, the
refusal once timing has started, and how the worker turns cpp_extension.load into load_inline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelproof.build import inline
from kernelproof.build import runtime_request as build_requests
from kernelproof.build import sources as build_sources
from kernelproof.build.builder import BuildResult
from kernelproof.build.env import nvcc_path
from kernelproof.evaluate.build_requests import BuildService

ARGS = {
    "name": "kp_ext",
    "cpp_sources": ["int f() { return 1; }"],
    "cuda_sources": [],
    "functions": ["f"],
    "extra_cflags": ["-O2", "-fopenmp"],
    "extra_cuda_cflags": None,
    "extra_ldflags": None,
    "extra_include_paths": None,
    "with_cuda": None,
    "is_python_module": True,
    "with_pytorch_error_handling": True,
    "no_implicit_headers": False,
}


class _Pool:
    """A builder pool that records what it was asked to build and builds nothing."""

    device = "cpu"

    def __init__(self, ok: bool = True, cuda: tuple[str, ...] = ()) -> None:
        self.ok = ok
        self.cuda = cuda  # the calls the builder recorded as asking for CUDA
        self.sources: list[str] = []
        self.materialized: list[Path] = []

    def build(self, path: Path) -> BuildResult:
        self.sources.append(path.read_text())
        log = "" if self.ok else "main.cpp:1: error: expected ';'"
        return BuildResult(self.ok, 0.1, log, "cuda", key="k" * 64, cuda=self.cuda)

    def materialize(self, result: BuildResult, dest: Path) -> None:
        self.materialized.append(Path(dest))


def _message(**changes) -> dict:
    return build_requests.message({**ARGS, **changes})


def test_a_build_request_is_built_by_the_pool_as_the_same_load_inline_call(tmp_path):
    pool = _Pool()
    service = BuildService(pool, tmp_path)
    reply = service(_message())
    assert reply == {"op": "built", "ok": True, "message": ""}
    assert pool.materialized == [tmp_path]
    assert pool.sources[0].count("load_inline(") == 1 and "'-fopenmp'" in pool.sources[0]
    namespace: dict = {}
    call = pool.sources[0].split("load_inline(**", 1)[1].rsplit(")", 1)[0]
    exec(f"args = {call}", namespace)  # noqa: S102 - the file the pool builds: its one call's arguments
    assert namespace["args"] == ARGS  # exactly the worker's arguments: the same digest on both sides
    assert "kp_ext: built" in service.notes[0]


def test_a_failed_requested_build_answers_with_the_compiler_error(tmp_path):
    service = BuildService(_Pool(ok=False), tmp_path)
    reply = service(_message())
    assert reply["ok"] is False and "expected ';'" in reply["message"] and "kp_ext" in reply["message"]
    assert "expected ';'" in service.failed  # the verdict's compile_error, even if the solution catches it


def test_a_requested_cuda_build_this_machine_cannot_run_is_the_machines_not_the_solutions(tmp_path):
    """The builder's record of the call (not the request's text) and the parent's facts decide."""
    for ok in (True, False):  # built (a machine with a toolkit) or refused (one without)
        service = BuildService(_Pool(ok=ok, cuda=("load_inline:kp_ext",)), tmp_path)  # device "cpu"
        reply = service(_message(cuda_sources=["__global__ void k() {}"]))
        assert reply["ok"] is ok  # the build's own answer, to the solution
        assert "kp_ext" in service.unmet  # the evaluation's environment, whatever the solution does
        assert "need a CUDA device" in service.unmet or "cannot build the CUDA" in service.unmet
    words = BuildService(_Pool(ok=True), tmp_path)  # CUDA words in a C++ build that asked for none
    assert words(_message(cpp_sources=["// __global__ void k("]))["ok"] is True
    assert not words.unmet


def test_rejects_a_build_request_once_timing_has_started(tmp_path):
    pool = _Pool()
    service = BuildService(pool, tmp_path)
    service.close("timing has started")
    reply = service(_message())
    assert reply["ok"] is False and "timing has started" in reply["message"] and pool.sources == []
    assert "timing has started" in service.failed


def test_rejects_more_distinct_builds_than_the_limit_and_serves_a_repeat(tmp_path):
    pool = _Pool()
    service = BuildService(pool, tmp_path)
    for i in range(build_requests.MAX_BUILDS):
        assert service(_message(name=f"kp_ext{i}"))["ok"]
    assert service(_message(name="kp_ext0"))["ok"]  # the same build again: no new one
    refused = service(_message(name="kp_one_too_many"))
    assert (
        refused["ok"] is False
        and f"more than {build_requests.MAX_BUILDS} distinct builds" in refused["message"]
    )
    assert "docs/builds.md" in refused["message"]


def test_rejects_sources_beyond_the_limit(tmp_path):
    big = "x" * (build_requests.MAX_SOURCE_BYTES + 1)
    reply = BuildService(_Pool(), tmp_path)(_message(cpp_sources=[big]))
    assert reply["ok"] is False and "MiB of sources" in reply["message"]


@pytest.mark.parametrize(
    "header",
    [
        {"op": "build", "call": "load_inline"},
        {"op": "build", "call": "os.system", "args": ARGS},
        {"op": "build", "call": "load_inline", "args": {**ARGS, "extra": 1}},
        {"op": "build", "call": "load_inline", "args": {**ARGS, "cpp_sources": [1]}},
        {"op": "build", "call": "load_inline", "args": {**ARGS, "is_python_module": "yes"}},
        {"op": "build", "call": "load_inline", "args": ARGS, "nonce": 1},
    ],
)
def test_rejects_a_malformed_build_message(header, tmp_path):
    pool = _Pool()
    reply = BuildService(pool, tmp_path)(header)
    assert reply["ok"] is False and "malformed build request" in reply["message"] and pool.sources == []


def test_load_of_source_files_becomes_load_inline_of_their_text(tmp_path):
    cpp, cu = tmp_path / "op.cpp", tmp_path / "k.cu"
    cpp.write_text("// cpp")
    cu.write_text("// cu")
    files = [(str(p), build_sources.read_own(str(p))) for p in (cpp, cu)]
    a = build_sources.inline_arguments({"name": "kp_op", "is_python_module": False}, files)
    assert a["cpp_sources"] == ["// cpp"] and a["cuda_sources"] == ["// cu"]
    assert a["is_python_module"] is False and a["functions"] is None and a["no_implicit_headers"] is True


def test_load_refuses_a_linked_source_file(tmp_path):
    target = tmp_path / "secret.cpp"
    target.write_text("// not the solution's")
    link = tmp_path / "op.cpp"
    os.symlink(target, link)
    with pytest.raises(inline.BuildRequestError, match="cannot read"):
        build_sources.read_own(str(link))


# -- load requests: the parent reads the files itself, in the worker's scratch folder only --------
LOAD = {
    "name": "kp_op",
    "sources": ["/tmp/op.cpp"],
    "extra_cflags": ["-O2"],
    "extra_cuda_cflags": None,
    "extra_ldflags": None,
    "extra_include_paths": None,
    "with_cuda": None,
    "is_python_module": False,
}


def _scratch(tmp_path: Path) -> Path:
    """A worker's rw/ as the parent sees it, with its tmp/ (the worker's /tmp)."""
    rw = tmp_path / "rw"
    (rw / "tmp").mkdir(parents=True)
    return rw


def _load(service: BuildService, *paths: str) -> dict:
    return service(build_requests.message({**LOAD, "sources": list(paths)}, "load"))


def _built_args(pool: _Pool) -> dict:
    namespace: dict = {}
    call = pool.sources[-1].split("load_inline(**", 1)[1].rsplit(")", 1)[0]
    exec(f"args = {call}", namespace)  # noqa: S102 - the file the pool builds: its one call's arguments
    return namespace["args"]


def test_a_load_request_builds_the_files_the_parent_read_in_the_worker_scratch(tmp_path):
    rw = _scratch(tmp_path)
    (rw / "tmp" / "op.cpp").write_text("// op, as the parent reads it")
    (rw / "kernels").mkdir()
    (rw / "kernels" / "k.cu").write_text("// kernels")
    pool = _Pool()
    reply = _load(BuildService(pool, tmp_path / "ro", rw), "/tmp/op.cpp", str(rw / "kernels" / "k.cu"))
    assert reply["ok"], reply
    args = _built_args(pool)
    assert args["cpp_sources"] == ["// op, as the parent reads it"] and args["cuda_sources"] == ["// kernels"]
    # the same load_inline arguments the worker derives from its own read: the same digest
    files = [("/tmp/op.cpp", "// op, as the parent reads it"), ("k.cu", "// kernels")]
    assert args == build_sources.inline_arguments(LOAD, files)
    assert args["is_python_module"] is False and args["extra_cflags"] == ["-O2"]


def _refused(tmp_path: Path, rw: Path, path: str) -> str:
    pool = _Pool()
    service = BuildService(pool, tmp_path / "ro", rw)
    reply = _load(service, path)
    assert reply["ok"] is False and pool.sources == [], reply
    assert path in reply["message"] and path in service.failed  # the verdict's compile_error names it
    return reply["message"]


def test_refuses_a_load_request_naming_a_link_to_a_file_outside_the_scratch(tmp_path):
    rw = _scratch(tmp_path)
    secret = tmp_path / "secret.cpp"
    secret.write_text("// the parent's")
    os.symlink(secret, rw / "tmp" / "op.cpp")
    assert "symbolic link" in _refused(tmp_path, rw, "/tmp/op.cpp")


def test_refuses_a_load_request_through_a_linked_folder(tmp_path):
    rw = _scratch(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "op.cpp").write_text("// the parent's")
    os.symlink(outside, rw / "tmp" / "sub")
    assert "symbolic link ('sub')" in _refused(tmp_path, rw, "/tmp/sub/op.cpp")


def test_refuses_a_load_request_when_the_worker_replaced_its_tmp_with_a_link(tmp_path):
    rw = tmp_path / "rw"
    rw.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "op.cpp").write_text("// the parent's")
    os.symlink(outside, rw / "tmp")
    assert "symbolic link ('tmp')" in _refused(tmp_path, rw, "/tmp/op.cpp")


@pytest.mark.parametrize("path", ["/etc/kp_none.cpp", "/tmp/../etc/kp_none.cpp", "relative/op.cpp"])
def test_refuses_a_load_request_naming_a_file_outside_the_scratch(tmp_path, path):
    assert "outside the worker's scratch folder" in _refused(tmp_path, _scratch(tmp_path), path)


@pytest.mark.parametrize(
    "args",
    [
        {**LOAD, "sources": "/tmp/op.cpp"},  # one path, not a list
        {**LOAD, "sources": [1]},
        {**LOAD, "cpp_sources": ["int f();"]},  # text: a load request names files only
        ARGS,
    ],
)
def test_rejects_a_malformed_load_message(args, tmp_path):
    pool = _Pool()
    reply = BuildService(pool, tmp_path / "ro", _scratch(tmp_path))(
        {"op": "build", "call": "load", "args": args}
    )
    assert reply["ok"] is False and "malformed build request" in reply["message"] and pool.sources == []


def test_refuses_a_load_request_naming_a_hard_link(tmp_path):
    rw = _scratch(tmp_path)
    (rw / "tmp" / "a.cpp").write_text("// a")
    os.link(rw / "tmp" / "a.cpp", rw / "tmp" / "op.cpp")
    assert "2 hard links" in _refused(tmp_path, rw, "/tmp/op.cpp")


def test_refuses_a_load_request_naming_a_fifo_without_waiting_for_a_writer(tmp_path):
    rw = _scratch(tmp_path)
    os.mkfifo(rw / "tmp" / "op.cpp")
    assert "not a regular file" in _refused(tmp_path, rw, "/tmp/op.cpp")


def test_refuses_a_load_request_naming_a_missing_or_too_large_file(tmp_path):
    rw = _scratch(tmp_path)
    assert "no such file" in _refused(tmp_path, rw, "/tmp/absent.cpp")
    with open(rw / "tmp" / "big.cpp", "wb") as f:
        f.truncate(build_sources.MAX_SOURCE_FILE_BYTES + 1)
    assert "larger than" in _refused(tmp_path, rw, "/tmp/big.cpp")


def test_refuses_load_requests_whose_files_exceed_the_evaluation_cap(tmp_path, monkeypatch):
    rw = _scratch(tmp_path)
    for name in ("a.cpp", "b.cpp"):
        (rw / "tmp" / name).write_text("x" * 600)
    monkeypatch.setattr(build_requests, "MAX_SOURCE_BYTES", 1000)
    pool = _Pool()
    reply = _load(BuildService(pool, tmp_path / "ro", rw), "/tmp/a.cpp", "/tmp/b.cpp")
    assert reply["ok"] is False and "MiB of sources" in reply["message"] and pool.sources == []


def test_a_load_request_after_timing_has_started_reads_nothing(tmp_path, monkeypatch):
    rw = _scratch(tmp_path)
    (rw / "tmp" / "op.cpp").write_text("// op")
    read: list[str] = []
    monkeypatch.setattr(build_sources, "read_confined", lambda scratch, path: read.append(path) or "")
    service = BuildService(_Pool(), tmp_path / "ro", rw)
    service.close("timing has started")
    reply = _load(service, "/tmp/op.cpp")
    assert reply["ok"] is False and "timing has started" in reply["message"] and read == []


# -- kernelproof.native after import --------------------------------------------------------------
NATIVE = {"source": 'extern "C" __global__ void k(float* x) {}', "options": ["-O3"], "arch": "9.0a"}


def test_a_load_cuda_request_is_built_by_the_pool_as_the_same_compile(tmp_path):
    pool = _Pool()
    service = BuildService(pool, tmp_path)
    assert service(build_requests.message(NATIVE, "load_cuda"))["ok"]
    assert pool.materialized == [tmp_path]
    text = pool.sources[0]
    assert "from kernelproof.native import compile_cubin" in text
    call = text.split("\ncompile_cubin(", 1)[1].rsplit(")", 1)[0]
    assert eval(f"({call})") == (NATIVE["source"], "9.0a", ["-O3"])  # noqa: S307 - the pool's one call
    assert service.source_bytes == len(NATIVE["source"])


@pytest.mark.parametrize(
    "args",
    [
        {**NATIVE, "arch": None},  # the worker resolves the architecture: the cubin's hash needs it
        {**NATIVE, "options": "-O3"},
        {**NATIVE, "source": ["a"]},
        {**NATIVE, "kernels": ["k"]},
    ],
)
def test_rejects_a_malformed_load_cuda_message(args, tmp_path):
    pool = _Pool()
    reply = BuildService(pool, tmp_path)({"op": "build", "call": "load_cuda", "args": args})
    assert reply["ok"] is False and "malformed build request" in reply["message"] and pool.sources == []


@pytest.mark.skipif(nvcc_path() is None, reason="needs nvcc")
def test_a_workers_load_cuda_after_import_is_built_by_the_pool_and_found_where_it_looks(
    tmp_path, monkeypatch
):
    """The round trip without the socket: the worker's load_cuda asks, the service has a real
    builder pool compile it (nvcc runs here; nothing launches), and the cubin it copies into the
    worker's read-only folder is the one the worker's own hash names."""
    from kernelproof.build import BuildCache, BuilderPool, BuildOptions
    from kernelproof.native import load_cuda

    ro = tmp_path / "ro"
    ro.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    source = (
        'extern "C" __global__ void twice(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.f; }'
    )
    with BuilderPool(
        BuildCache(tmp_path / "cache"), 1, device="cpu", options=BuildOptions(arch="9.0a"), work_root=work
    ) as pool:
        service = BuildService(pool, ro)
        monkeypatch.setenv("KERNELPROOF_NATIVE_DIR", str(ro / "native"))
        monkeypatch.setitem(
            inline._state, "requester", lambda call, args: service(build_requests.message(args, call))
        )
        mod = load_cuda(source, ["twice"], arch="9.0a")
    assert mod.cubin.parent == ro / "native" and mod.cubin.read_bytes()[:4] == b"\x7fELF"
    assert any("kernelproof.native: built" in n for n in service.notes), service.notes


@pytest.mark.parametrize("closed", [False, True])
def test_a_refused_build_requests_name_is_shown_inert_in_flags_and_messages(tmp_path, closed):
    """The name is the candidate's text: a newline and an escape sequence in it reach the verdict's
    flags, the reply and the compile_error message as visible escapes, never as themselves."""
    pool = _Pool()
    service = BuildService(pool, tmp_path)
    evil = "kp_ext\nPASS\x1b[2J\x1b]0;retitled\x07\u202e"
    if closed:
        service.close("timing has started")
    else:
        for i in range(build_requests.MAX_BUILDS):
            assert service(_message(name=f"kp_ext{i}"))["ok"]
    reply = service(_message(name=evil))
    assert reply["ok"] is False
    refused = [n for n in service.notes if "refused" in n]
    assert len(refused) == 1
    for shown in (refused[0], reply["message"], service.failed):
        assert not any(ch in shown for ch in "\n\x1b\x07\u202e"), shown
        assert "kp_ext\\nPASS\\x1b[2J" in shown
