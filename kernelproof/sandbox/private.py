"""The private directories of contained processes, under a root only the parent can list (I8).

Each candidate worker gets ``<root>/<name>/`` holding ``ro/`` (what the parent puts there: the
solution's copy, its build output) and ``rw/`` (the only place the worker may write; it is the
worker's /tmp where a mount namespace exists). They are out of /tmp: a world-writable directory
lets one process plant files, links or names for another, and /tmp is where every tool looks.

The root is the parent's: created mode 0711 (others may traverse to their own directory, never
list the others), and refused when someone else owns it or can write to it.

A directory is removed by its creator when it is done with it; one whose creator died first
(killed, or ended by a framework that skips exit handlers, as Ray does with its workers) is
removed by the next process that creates one: each creator holds a lock on the directory's
:data:`OWNER` file for as long as it lives, and the kernel releases it however the process ends.
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import stat
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernelproof.errors import SandboxError

ROOT_ENV = "KERNELPROOF_SANDBOX_DIR"  # where the private directories go (default: sandbox_root())
ROOT_MODE = 0o711  # traverse, never list
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the kernelproof package: read, never its repository
OWNER = "owner.lock"  # locked by the creating process for as long as it lives
PREFIXES = ("worker-", "zygote-", "probe-")  # the directories of PrivateDir.create's callers
LEGACY_AGE_S = 24 * 3600.0  # a directory without an OWNER file (an older version's) is stale after this
_swept: set[Path] = set()  # roots this process has swept
_sweep_lock = threading.Lock()


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
    owner: io.FileIO | None = field(default=None, compare=False, repr=False)  # holds the OWNER lock

    @classmethod
    def create(cls, prefix: str) -> PrivateDir:
        base = sandbox_root()
        _sweep_once(base)
        root = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        owner = _hold_owner_lock(root)
        os.chmod(root, 0o755)  # the contained uid reads ro/ through it
        ro, rw = root / "ro", root / "rw"
        ro.mkdir(mode=0o755)
        rw.mkdir(mode=0o700)
        (rw / "tmp").mkdir(mode=0o700)
        return cls(root, ro, rw, owner)

    def hand_over(self, uid: int, gid: int) -> None:
        """Give rw/ (and everything under it) to the contained process's own uid."""
        hand_over([self.rw], uid, gid)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        if self.owner is not None:
            self.owner.close()


def _hold_owner_lock(root: Path) -> io.FileIO:
    """Lock `root`'s OWNER file for this process's life. Locked under another name, then renamed:
    an OWNER file a sweep can see is always locked already."""
    staged = root / (OWNER + ".new")
    owner = io.FileIO(os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "w")
    fcntl.flock(owner.fileno(), fcntl.LOCK_EX)
    owner.write(f"{os.getpid()}\n".encode())  # for a person looking: the lock is what counts
    os.rename(staged, root / OWNER)
    return owner


def _sweep_once(base: Path) -> None:
    with _sweep_lock:
        if base in _swept:
            return
        _swept.add(base)
    sweep_stale(base)


def sweep_stale(base: Path | None = None) -> list[Path]:
    """Remove the private directories under `base` whose creating process is gone; their paths.

    Gone: nobody holds the lock on the directory's OWNER file. A directory without one is being
    created right now (left alone) or is an older version's (removed once a day old).
    """
    base = sandbox_root() if base is None else base
    removed = []
    now = time.time()
    with os.scandir(base) as found:
        entries = [e for e in found if e.name.startswith(PREFIXES) and e.is_dir(follow_symlinks=False)]
    for entry in entries:
        path = Path(entry.path)
        try:
            fd = os.open(path / OWNER, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            try:
                old = now - entry.stat(follow_symlinks=False).st_mtime > LEGACY_AGE_S
            except OSError:
                continue
            if old:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
            continue
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its creator is alive
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        finally:
            os.close(fd)
    return removed


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
