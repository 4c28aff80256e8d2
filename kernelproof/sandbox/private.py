"""The private directories of contained processes, under a root only the parent can list (I8).

Each candidate worker gets ``<root>/<name>/`` holding ``ro/`` (what the parent puts there: the
solution's copy, its build output) and ``rw/`` (the only place the worker may write; it is the
worker's /tmp where a mount namespace exists). They are out of /tmp: a world-writable directory
lets one process plant files, links or names for another, and /tmp is where every tool looks.

The root is the parent's: created mode 0711 (others may traverse to their own directory, never
list the others), and refused when someone else owns it or can write to it.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kernelproof.errors import SandboxError

ROOT_ENV = "KERNELPROOF_SANDBOX_DIR"  # where the private directories go (default: sandbox_root())
ROOT_MODE = 0o711  # traverse, never list
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the kernelproof package: read, never its repository


def sandbox_root() -> Path:
    """$KERNELPROOF_SANDBOX_DIR; as root /var/lib/kernelproof/sandbox; else $XDG_RUNTIME_DIR's or
    ~/.cache's kernelproof-sandbox. Created on first use and checked on every use."""
    env = os.environ.get(ROOT_ENV)
    if env:
        root = Path(env)
    elif os.geteuid() == 0:
        root = Path("/var/lib/kernelproof/sandbox")
    elif os.environ.get("XDG_RUNTIME_DIR"):
        root = Path(os.environ["XDG_RUNTIME_DIR"]) / "kernelproof-sandbox"
    else:
        root = Path.home() / ".cache" / "kernelproof-sandbox"
    root = Path(os.path.abspath(root))
    for d in reversed([root, *root.parents]):
        if not d.exists():
            try:
                d.mkdir(mode=ROOT_MODE)
            except FileExistsError:
                pass
            except OSError as exc:
                raise SandboxError(f"cannot create the sandbox directory {d}: {exc.strerror}") from None
    _check_owned(root)
    return root


def _check_owned(root: Path) -> None:
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode):
        raise SandboxError(f"the sandbox directory {root} is not a directory (set ${ROOT_ENV})")
    if st.st_uid != os.geteuid():
        raise SandboxError(f"the sandbox directory {root} belongs to uid {st.st_uid}, not to this process")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SandboxError(
            f"the sandbox directory {root} is writable by others (mode {st.st_mode & 0o777:o})"
        )
    if st.st_mode & (stat.S_IRGRP | stat.S_IROTH):
        os.chmod(root, ROOT_MODE)  # ours: others may traverse it, not list it


@dataclass(frozen=True)
class PrivateDir:
    root: Path  # <sandbox root>/<name>: the parent's
    ro: Path  # filled by the parent; read-only to the contained process
    rw: Path  # the contained process's only writable directory

    @classmethod
    def create(cls, prefix: str) -> PrivateDir:
        root = Path(tempfile.mkdtemp(prefix=prefix, dir=sandbox_root()))
        os.chmod(root, 0o755)  # the contained uid reads ro/ through it
        ro, rw = root / "ro", root / "rw"
        ro.mkdir(mode=0o755)
        rw.mkdir(mode=0o700)
        (rw / "tmp").mkdir(mode=0o700)
        return cls(root, ro, rw)

    def hand_over(self, uid: int, gid: int) -> None:
        """Give rw/ (and everything under it) to the contained process's own uid."""
        hand_over([self.rw], uid, gid)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def package_link(ro: Path) -> Path:
    """``ro/lib`` holding a link to the kernelproof package, for the contained process's sys.path.

    Its repository (the parent of the package when run from a checkout) is neither readable nor
    on the path: it may hold results, caches and the solution's own folder.
    """
    lib = ro / "lib"
    lib.mkdir(mode=0o755, exist_ok=True)
    link = lib / "kernelproof"
    if not link.is_symlink():
        link.symlink_to(PACKAGE_DIR, target_is_directory=True)
    return lib


def hand_over(paths: list[Path], uid: int, gid: int) -> None:
    """Give each path, and everything under a directory among them, to `uid`/`gid`."""
    for p in paths:
        os.lchown(p, uid, gid)
        for dirpath, dirnames, filenames in os.walk(p):
            for name in dirnames + filenames:
                os.lchown(os.path.join(dirpath, name), uid, gid)
