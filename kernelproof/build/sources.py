"""The source files ``cpp_extension.load`` names: read, and turned into one load_inline call.

``load(name, sources=[...])`` is built as ``load_inline`` of its files' text (kernelproof.build.inline):
C++ files into the C++ sources, CUDA files into the CUDA sources, in their order. Both sides of a
build request do this with :func:`inline_arguments`, so that both hash the same arguments into the
build's digest:

- **the worker** reads the files itself (:func:`read_own`: its own process, its own paths), only to
  know which build it asks for and where the artefact will appear;
- **the parent** reads them again, from the worker's own scratch folder only (:func:`read_confined`),
  and builds what it read, never text the worker sent. A path outside that folder, a symbolic link
  anywhere on the way, a file with another hard link, anything but a regular file, or a file over
  :data:`MAX_SOURCE_FILE_BYTES` is refused with a reason naming the path.

The worker writes only in its scratch folder (``rw/``), which is also its ``/tmp``, ``/var/tmp`` and
``/dev/shm`` where a mount namespace exists (kernelproof.sandbox.contain); those are the only paths
the parent maps. Where the worker has no private ``/tmp``, its writes there are refused (guards), and
the parent finds no such file in the scratch folder: it never reads the shared ``/tmp``.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelproof.errors import BuildRequestError

CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++", ".c")
CUDA_SUFFIXES = (".cu", ".cuh")
MAX_SOURCE_FILE_BYTES = 4 * 2**20  # one source file cpp_extension.load names
MAX_SOURCE_FILES = 64  # files one load call names (published extensions use a handful)
TMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")  # each the worker's rw/tmp (kernelproof.sandbox.contain)
_WHERE = "cpp_extension.load"


def source_paths(sources: Any) -> list[str]:
    """load's ``sources`` argument as a list of path strings (one path, or a list of them)."""
    if isinstance(sources, (str, os.PathLike)):
        return [os.fspath(sources)]
    return [os.fspath(p) for p in sources or []]


def check_suffix(path: str) -> None:
    if not path.endswith(CPP_SUFFIXES + CUDA_SUFFIXES):
        raise BuildRequestError(f"{_WHERE}: {path!r} is not a C++ or CUDA source file")


def read_own(path: str) -> str:
    """A source file as the worker (or the builder) reads it: a regular file, no final link followed,
    at most MAX_SOURCE_FILE_BYTES."""
    check_suffix(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise BuildRequestError(f"{_WHERE}: cannot read {path!r}: {exc.strerror}") from None
    return _read_regular(fd, path)


def read_confined(scratch: str | Path, path: str) -> str:
    """The parent's read of a file the worker named: only inside `scratch` (the worker's rw/ as the
    parent sees it; /tmp and its kin map to rw/tmp), every component opened without following a link.

    BuildRequestError naming `path` when it is outside, linked, not a regular file, hard-linked
    elsewhere, or too large.
    """
    check_suffix(path)
    parts = _scratch_parts(scratch, path)
    if not parts:
        raise BuildRequestError(
            f"{_WHERE}: {path!r} is outside the worker's scratch folder "
            f"(its home, {', '.join(TMP_DIRS)}): the parent reads sources only there"
        )
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:  # the parent's own path: rw/ itself is not the worker's to replace
        fd = os.open(scratch, flags_dir)
    except OSError as exc:
        raise BuildRequestError(f"{_WHERE}: the worker's scratch folder is gone: {exc.strerror}") from None
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = (
                (os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
                if last
                else flags_dir
            )
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                raise BuildRequestError(_refusal(fd, part, path, exc)) from None
            os.close(fd)
            fd = nxt
        opened, fd = fd, -1  # _read_regular closes it, whatever happens
        return _read_regular(opened, path, single_link=True)
    finally:
        if fd >= 0:
            os.close(fd)


def _scratch_parts(scratch: str | Path, path: str) -> list[str]:
    """The components of `path` below `scratch` (a /tmp path: below its tmp/); [] when outside."""
    if "\0" in path or not path.startswith("/"):
        return []
    norm = posixpath.normpath(path)  # lexical: with no link followed, that is where it leads
    roots = [(r, []) for r in dict.fromkeys((str(scratch), os.path.realpath(scratch)))]
    roots += [(t, ["tmp"]) for t in TMP_DIRS]
    for root, prefix in roots:
        if norm.startswith(root.rstrip("/") + "/"):
            rest = [p for p in norm[len(root.rstrip("/")) + 1 :].split("/") if p]
            return prefix + rest if rest and ".." not in rest else []
    return []


def _refusal(dir_fd: int, part: str, path: str, exc: OSError) -> str:
    try:
        linked = stat.S_ISLNK(os.stat(part, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        linked = False
    if linked or exc.errno == errno.ELOOP:
        return f"{_WHERE}: {path!r} is or passes through a symbolic link ({part!r}): the parent follows none"
    if exc.errno == errno.ENOENT:
        return f"{_WHERE}: {path!r} is not in the worker's scratch folder (no such file)"
    return f"{_WHERE}: cannot read {path!r}: {exc.strerror}"


def _read_regular(fd: int, path: str, single_link: bool = False) -> str:
    """The text of the open file `fd` (closed here): a regular file of at most the size limit."""
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise BuildRequestError(f"{_WHERE}: {path!r} is not a regular file")
        if single_link and st.st_nlink != 1:
            raise BuildRequestError(
                f"{_WHERE}: {path!r} has {st.st_nlink} hard links (a file the solution wrote has one)"
            )
        data = f.read(MAX_SOURCE_FILE_BYTES + 1)
    if len(data) > MAX_SOURCE_FILE_BYTES:
        raise BuildRequestError(f"{_WHERE}: {path!r} is larger than {MAX_SOURCE_FILE_BYTES} bytes")
    return data.decode("utf-8", errors="replace")


def inline_arguments(a: dict[str, Any], texts: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """load's arguments `a` as load_inline's, given each source file's (path, text) in order."""
    if len(texts) > MAX_SOURCE_FILES:
        raise BuildRequestError(f"{_WHERE}: more than {MAX_SOURCE_FILES} source files")
    cpp = [text for path, text in texts if not path.endswith(CUDA_SUFFIXES)]
    cuda = [text for path, text in texts if path.endswith(CUDA_SUFFIXES)]
    return {
        "name": a["name"],
        "cpp_sources": cpp,
        "cuda_sources": cuda,
        "functions": None,  # the sources bind their own functions (PYBIND11_MODULE or TORCH_LIBRARY)
        "extra_cflags": a.get("extra_cflags"),
        "extra_cuda_cflags": a.get("extra_cuda_cflags"),
        "extra_ldflags": a.get("extra_ldflags"),
        "extra_include_paths": a.get("extra_include_paths"),
        "with_cuda": a.get("with_cuda"),
        "is_python_module": a.get("is_python_module", True),
        "with_pytorch_error_handling": True,  # load_inline's default, named: every key both sides hash
        "no_implicit_headers": True,  # the files include what they need, as load compiles them
    }
