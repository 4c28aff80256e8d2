"""Task ids to task files: the task sets the operator started the service with.

Why by id: the reference runs in the trusted parent (I1), so which references run is the
operator's choice, not a client's. A client names a task by its id, the path of its file under
one of the ``--tasks`` folders without ``.py`` (``level1/09_gelu``); the file's stem alone
(``09_gelu``) also names it where no other task shares that stem.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from kernelproof.errors import UsageError


class TaskCatalog:
    def __init__(self, folders: Iterable[Path]):
        folders = [Path(f) for f in folders]
        self._by_id: dict[str, Path] = {}
        stems: dict[str, list[Path]] = {}
        for folder in folders:
            if not folder.is_dir():
                raise UsageError(f"--tasks {folder} is not a folder")
            for path in sorted(folder.rglob("*.py")):
                rel = path.relative_to(folder)
                if any(part.startswith(("_", ".")) for part in rel.parts):
                    continue  # helpers and hidden files are not tasks (as suite_pairs reads a suite)
                task_id = rel.with_suffix("").as_posix()
                if task_id in self._by_id:
                    raise UsageError(
                        f"task id {task_id!r} is in two --tasks folders ({self._by_id[task_id]} and {path}): "
                        "serve one of them, or give them folders that name them apart"
                    )
                self._by_id[task_id] = path.resolve()
                stems.setdefault(path.stem, []).append(path.resolve())
        if not self._by_id:
            shown = ", ".join(str(f) for f in folders) or "(none)"
            raise UsageError(f"no task file (*.py) under --tasks {shown}")
        self._by_stem = {stem: paths[0] for stem, paths in stems.items() if len(paths) == 1}
        self._by_digest: dict[str, str] = {}
        for task_id, path in self._by_id.items():
            self._by_digest.setdefault(hashlib.sha256(path.read_bytes()).hexdigest(), task_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def ids(self) -> list[str]:
        return sorted(self._by_id)

    def holding(self, source: str) -> str | None:
        """The id of the served task whose file holds exactly this source text, or None."""
        return self._by_digest.get(hashlib.sha256(source.encode()).hexdigest())

    def find(self, task_id: str) -> Path | None:
        """The task file of an id (``.py`` allowed at its end), or None."""
        key = task_id[:-3] if task_id.endswith(".py") else task_id
        return self._by_id.get(key) or self._by_stem.get(key)
