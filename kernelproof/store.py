"""The results store: every verdict in SQLite, so nothing measured is ever lost.

One row per evaluation with the hashes it was keyed on and its whole verdict document. WAL mode
and a busy timeout let several processes (a bench on two GPUs, an agent, a report) write and read
at once; each call opens its own connection, so threads never share one. Other modules (agent
memory) keep their own tables in the same file.

The store belongs to the parent alone (issue 15), and these rules hold even if something else
wrote to the file:

- Every row carries an HMAC-SHA256 (kernelproof/store_key.py) over its evaluation key and its
  content: the task, solution and options digests, the kernelproof version, the time limits it
  ran under and the whole document. A row that does not verify (an older unsigned row, a row
  changed with ``sqlite3``, malformed JSON, a document that does not read as a verdict) is
  never served; :meth:`Store.rows` lists it as unverified, and nothing crashes on it.
- A database that holds triggers or views is refused (kernelproof never creates them; a
  trigger planted by a solution rewrote every later verdict to pass), and every connection
  runs with ``PRAGMA trusted_schema=OFF``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelproof import jsonsafe, store_key
from kernelproof._version import __version__
from kernelproof.errors import StoreError
from kernelproof.options import EvalOptions
from kernelproof.submission import EvaluationKey
from kernelproof.verdict import ReasonCode, Stored, Verdict, from_json

TABLE = "verdicts"
# Signed columns, in the order the signature covers them (every column but id and hmac).
COLUMNS = (
    "key",
    "created_at",
    "task_path",
    "task_sha256",
    "solution_path",
    "solution_sha256",
    "backend",
    "outcome",
    "codes",
    "device",
    "speedup_best",
    "elapsed_s",
    "doc",
    "options_sha256",
    "kernelproof_version",
    "limits_json",
)
REAL_COLUMNS = ("speedup_best", "elapsed_s")  # non-finite values stored as jsonsafe's strings
SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS verdicts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    created_at TEXT NOT NULL,
    task_path TEXT NOT NULL,
    task_sha256 TEXT NOT NULL,
    solution_path TEXT NOT NULL,
    solution_sha256 TEXT NOT NULL,
    backend TEXT NOT NULL,
    outcome TEXT NOT NULL,
    codes TEXT NOT NULL,
    device TEXT NOT NULL,
    speedup_best REAL,
    elapsed_s REAL NOT NULL,
    doc TEXT NOT NULL,
    options_sha256 TEXT NOT NULL DEFAULT '',
    kernelproof_version TEXT NOT NULL DEFAULT '',
    limits_json TEXT NOT NULL DEFAULT '{}',
    hmac TEXT
);
CREATE INDEX IF NOT EXISTS verdicts_key ON verdicts(key);
CREATE INDEX IF NOT EXISTS verdicts_task ON verdicts(task_sha256);
"""
# Columns added since the first release: an older database gets them on open, its rows with no
# hmac (so they are listed as unverified and evaluated again, never served).
MIGRATIONS = (
    ("options_sha256", "TEXT NOT NULL DEFAULT ''"),
    ("kernelproof_version", "TEXT NOT NULL DEFAULT ''"),
    ("limits_json", "TEXT NOT NULL DEFAULT '{}'"),
    ("hmac", "TEXT"),
)
BUSY_TIMEOUT_MS = 60_000  # concurrent writers wait up to a minute rather than fail
NOTE_ROWS = 20  # unverified rows named one by one under the `results` listing
PROBLEM_CHARS = 4000  # of why a row does not verify: our own words, never cut in practice
CLAIM_CHARS = 300  # of a tampered row's claimed path or time shown (a path is rarely longer)


@dataclass(frozen=True)
class Row:
    """One stored evaluation as listed, verified or not. Unverified rows' claims are not trusted."""

    id: int  # the row's id in the table
    created_at: str  # when it claims to have been decided
    task_path: str  # the task it claims
    solution_path: str  # the solution it claims
    outcome: str  # the outcome it claims
    verified: bool  # its signature verifies and its document reads as a verdict
    problem: str = ""  # why it is unverified ("" when verified)
    doc: dict[str, Any] | None = None  # the verdict document, verified rows only
    verdict: Verdict | None = None  # the same, read (verified rows only)
    limits: dict[str, float] = field(default_factory=dict)  # time limits it ran under (verified rows)

    def marked(self) -> dict[str, Any]:
        """An unverified row as ``Store.query(unverified=True)`` lists it."""
        return {
            "unverified": self.problem,
            "row": self.id,
            "created_at": self.created_at,
            "task_path": self.task_path,
            "solution_path": self.solution_path,
            "outcome": self.outcome,
        }


def served(store: Any, key: str, conditions: Mapping[str, float] | None = None) -> Verdict | None:
    """The stored verdict an evaluation with this key is answered with, or None (evaluate it).

    - An ``internal_error`` says kernelproof failed, not the solution: it is stored (nothing is
      lost) but evaluated again on the next request.
    - A ``timeout`` or a ``crash`` depends on the conditions it was reached under
      (``conditions``, from ``EvalOptions.serving_conditions``): it is served only when every time
      limit of the new request is equal to or smaller than the stored evaluation's, and its
      ``per_device`` equal or larger. A verdict that timed out at 20 s says nothing about 600 s; an
      out-of-memory crash with four evaluations sharing the GPU says nothing about one alone.
      Unknown conditions serve neither.
    - Any other verdict is served whatever the conditions.

    One rule for every executor; ``store`` needs only ``get(key)``.
    """
    found = store.get(key)
    if found is None or ReasonCode.INTERNAL_ERROR.value in found.codes:
        return None
    if CONDITION_BOUND_CODES.intersection(found.codes) and not _as_hard(conditions, found.stored):
        return None
    return found


# Errors of the machine (and its neighbours) at the time, never of the evaluation's bytes: never stored.
NEVER_STORED = frozenset(
    {ReasonCode.TOO_LARGE.value, ReasonCode.ENVIRONMENT.value, ReasonCode.MACHINE_BUSY.value}
)


def storable(verdict: Verdict) -> bool:
    """Is the verdict one the store keeps? Not when it is an error of this machine: ``too_large``,
    ``machine_busy`` or ``environment`` first, or ``environment`` anywhere."""
    codes = verdict.codes
    return not (codes and (codes[0] in NEVER_STORED or ReasonCode.ENVIRONMENT.value in codes))


def options_digest(options: EvalOptions) -> str:
    """sha256 of the settings an evaluation is keyed on (signed with its stored row)."""
    return hashlib.sha256(json.dumps(options.cache_key_fields(), sort_keys=True).encode()).hexdigest()


def keep(store: Any, key: str | EvaluationKey, verdict: Verdict, options: EvalOptions) -> bool:
    """Store a finished evaluation's verdict as every executor does (local, Ray): with the digest
    of its settings and the time limits it ran under (``limits``, checked by :func:`served`), and
    never an error of the machine (:func:`storable`). True when it was stored."""
    if store is None or not storable(verdict):
        return False
    store.put(key, verdict, options_sha256=options_digest(options), limits=options.serving_conditions())
    return True


def as_requested(verdict: Verdict, task: str, solution: str) -> Verdict:
    """A served verdict naming the files this request asked for; the paths it was first judged at
    are kept in ``stored`` as history only.

    Why: the store is keyed by the files' bytes, so a byte-identical copy at another path (or other
    bytes later written at the first path) must never be reported under the first path's name.
    """
    then = verdict.stored
    if then is not None:
        then = dataclasses.replace(
            then,
            task_path_then=then.task_path_then or verdict.task.path,
            solution_path_then=then.solution_path_then or verdict.solution.path,
        )
    return dataclasses.replace(
        verdict,
        task=dataclasses.replace(verdict.task, path=str(task)),
        solution=dataclasses.replace(verdict.solution, path=str(solution)),
        stored=then,
    )


CONDITION_BOUND_CODES = frozenset({ReasonCode.TIMEOUT.value, ReasonCode.CRASH.value})
SHARING = "per_device"  # the one condition where more is harder


def _as_hard(conditions: Mapping[str, float] | None, stored: Stored | None) -> bool:
    """Whether the new request's conditions are at least as hard as the stored evaluation's."""
    if conditions is None or stored is None:
        return False
    then = stored.limits_then
    for name, value in conditions.items():
        if name not in then:
            return False
        as_hard = float(value) >= then[name] if name == SHARING else float(value) <= then[name]
        if not as_hard:
            return False
    return True


def default_db_path() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "kernelproof", "results.sqlite")


def open_connection(
    path: str, busy_timeout_ms: int = BUSY_TIMEOUT_MS, *, readonly: bool = False
) -> sqlite3.Connection:
    """A connection to a store file that may have been tampered with: schema distrusted, checked.

    Autocommit mode (``isolation_level=None``): callers write inside ``BEGIN IMMEDIATE``, and call
    :func:`refuse_foreign_objects` again once the write lock is held, so nothing is planted between
    the check and the write. Shared by the agent's tables (agent/memory.py).

    ``readonly``: opened for reading only (``results``, ``report``), so a store on a read-only
    mount or in a folder this user cannot write is still read. A WAL store whose ``-shm`` file
    cannot be made there is read as immutable (nothing can write it either).
    """
    if readonly:
        return _open_readonly(path, busy_timeout_ms)
    con = sqlite3.connect(path, timeout=busy_timeout_ms / 1000, isolation_level=None)
    try:
        con.execute("PRAGMA trusted_schema=OFF")  # no SQL functions with side effects from the schema
        con.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        con.execute("PRAGMA journal_mode=WAL")
        refuse_foreign_objects(con, path)
    except BaseException:
        con.close()
        raise
    return con


def _open_readonly(path: str, busy_timeout_ms: int) -> sqlite3.Connection:
    uri = "file:" + urllib.parse.quote(os.path.abspath(path))
    for mode in ("?mode=ro", "?mode=ro&immutable=1"):
        con = sqlite3.connect(uri + mode, uri=True, timeout=busy_timeout_ms / 1000, isolation_level=None)
        try:
            con.execute("PRAGMA trusted_schema=OFF")
            con.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            refuse_foreign_objects(con, path)
            return con
        except sqlite3.OperationalError:
            con.close()
            if mode.endswith("immutable=1"):
                raise
        except BaseException:
            con.close()
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def refuse_foreign_objects(con: sqlite3.Connection, path: str) -> None:
    """StoreError if the database holds a trigger or a view: kernelproof never creates either."""
    found = con.execute(
        "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view') ORDER BY type, name"
    ).fetchall()
    if not found:
        return
    names = ", ".join(f"{kind} {name!r}" for kind, name in found)
    recover = f"move it aside (mv '{path}' '{path}.suspect') to start a new store"
    if all(re.fullmatch(r"\w+", str(name), re.ASCII) for _, name in found):  # never echo a crafted name
        drops = " ".join(f'DROP {kind.upper()} "{name}";' for kind, name in found)
        recover += (
            f", or remove them (sqlite3 '{path}' '{drops}'): signed rows that still verify are then "
            "served, the rest are listed as unverified"
        )
    raise StoreError(
        f"the results database {path} holds {names}. kernelproof never creates triggers or views, so "
        "something else changed this file (a solution that reached it can rewrite stored verdicts this "
        f"way). Refusing to use it. To recover, {recover}"
    )


def db_path(db: str | os.PathLike | None) -> str | None:
    """Which results store, the one rule every verb and executor follows: ``""`` none, a path
    that file, ``None`` ``$KERNELPROOF_DB`` when set, else :func:`default_db_path`."""
    if db is not None:
        return str(db) or None
    return os.environ.get("KERNELPROOF_DB") or default_db_path()


class Store:
    _init_lock = threading.Lock()

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        key: bytes | None = None,
        readonly: bool = False,
        make_folder: bool = True,
    ):
        """Open (or create) the store at ``path``; StoreError, in one line, if it cannot be used.

        ``readonly``: read it only (it must exist); nothing is created or migrated. ``make_folder``:
        create the folder it lies in when missing; :func:`open_store` (every verb) does so for the
        default store alone: a folder named in ``--db`` that does not exist is a typing error to
        report, not to paper over.
        """
        self.path = str(path)
        self.readonly = readonly
        folder = Path(self.path).parent
        try:
            if make_folder and not readonly:
                folder.mkdir(parents=True, exist_ok=True)
            elif not folder.is_dir():
                missing = "is not a folder" if folder.exists() else "does not exist"
                raise StoreError(
                    f"the folder {folder} of the results database {self.path} {missing} "
                    "(create it, or give another --db)"
                )
            if readonly and not Path(self.path).is_file():
                raise StoreError(f"no results database at {self.path} (nothing has been stored there)")
            self._key = key or store_key.load_key(store_file=self.path)
            with self._init_lock, self.connect() as con:  # connect() refuses triggers and views
                if readonly:
                    con.execute("SELECT id, hmac FROM verdicts LIMIT 1").fetchall()  # a store of verdicts?
                else:
                    con.executescript(SCHEMA_SQL)
                    _migrate(con)
        except (OSError, sqlite3.Error) as exc:
            why = _one_line(str(exc))
            if "readonly" in why.replace("-", "").replace(" ", ""):
                why += " (results and report can still read it; give --db another file, or --db '' for none)"
            raise StoreError(f"cannot open the results database {self.path}: {why}") from None

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        con = open_connection(self.path, readonly=self.readonly)
        try:
            yield con
        finally:
            con.close()

    def put(
        self,
        key: str | EvaluationKey,
        verdict: Verdict,
        *,
        options_sha256: str = "",
        limits: Mapping[str, float] | None = None,
    ) -> int:
        """Store a verdict under its evaluation key, signed; ``limits``: the time limits it ran under.

        An :class:`EvaluationKey` carries the hashes of the bytes it was computed from: a verdict
        naming other bytes (a file that changed between two reads) is refused with StoreError,
        never stored where those bytes' key would serve it (I10)."""
        if isinstance(key, EvaluationKey):
            named = (verdict.task.sha256, verdict.solution.sha256)
            if named != (key.task_sha256, key.solution_sha256):
                raise StoreError(
                    "refused to store a verdict under another evaluation's key: the verdict names task "
                    f"{named[0][:12]} and solution {named[1][:12]}, the key was computed from task "
                    f"{key.task_sha256[:12]} and solution {key.solution_sha256[:12]}"
                )
            key = key.digest
        if verdict.stored is not None:  # a served verdict stored again: keep the evaluation's own form
            verdict = dataclasses.replace(verdict, elapsed_s=verdict.stored.elapsed_s_then, stored=None)
        best = verdict.speedup.get("best") or verdict.speedup.get("eager")
        values = (
            key,
            verdict.created_at,
            verdict.task.path,
            verdict.task.sha256,
            verdict.solution.path,
            verdict.solution.sha256,
            verdict.solution.backend,
            verdict.verdict.value,
            ",".join(verdict.codes),
            str(verdict.environment.get("device", "")),
            _real(best.median if best and best.median is not None else None),
            _real(verdict.elapsed_s),
            verdict.dumps(indent=None),
            options_sha256,
            __version__,
            jsonsafe.dumps({k: float(v) for k, v in (limits or {}).items()}, sort_keys=True),
        )
        mac = store_key.sign(self._key, TABLE, values)
        cols = ", ".join((*COLUMNS, "hmac"))
        marks = ", ".join("?" * (len(COLUMNS) + 1))
        try:
            with self.connect() as con:
                con.execute("BEGIN IMMEDIATE")
                try:
                    refuse_foreign_objects(con, self.path)
                    cur = con.execute(f"INSERT INTO verdicts ({cols}) VALUES ({marks})", (*values, mac))
                    con.execute("COMMIT")
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
                return int(cur.lastrowid or 0)
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot write to the results database {self.path}: {_one_line(str(exc))}"
            ) from None

    def get(self, key: str) -> Verdict | None:
        """The newest verified verdict stored under ``key``, marked ``stored``; None if there is none.

        Unverified rows under the key are passed over (``rows`` lists them). The verdict's
        ``elapsed_s`` is this lookup's time; the evaluation's own is ``stored.elapsed_s_then``.
        """
        started = time.monotonic()
        for row in self._rows("WHERE key = ?", [key]):
            if row.verified and row.verdict is not None:
                v = row.verdict
                stored = Stored(v.created_at or row.created_at, v.elapsed_s, row.limits)
                return dataclasses.replace(v, stored=stored, elapsed_s=time.monotonic() - started)
        return None

    def rows(
        self,
        task: str | None = None,
        solution: str | None = None,
        outcome: str | None = None,
        code: str | None = None,
        limit: int | None = None,
    ) -> list[Row]:
        """Every stored row matching the filters, verified or not, newest first."""
        where, params = _filters(task, solution, outcome, code)
        return list(self._rows(where, params, limit))

    def query(
        self,
        task: str | None = None,
        solution: str | None = None,
        outcome: str | None = None,
        code: str | None = None,
        limit: int | None = None,
        *,
        unverified: bool = False,
    ) -> list[dict[str, Any]]:
        """Verdict documents as they were stored, newest first, filtered by substrings of paths,
        outcome or reason code. Only verified rows, unless ``unverified``: then the others come
        too, each marked (``{"unverified": why, "row": id, ...}``, see :meth:`Row.marked`)."""
        where, params = _filters(task, solution, outcome, code)
        out: list[dict[str, Any]] = []
        for row in self._rows(where, params):
            if row.verified and row.doc is not None:
                out.append(row.doc)
            elif unverified:
                out.append(row.marked())
            if limit and len(out) >= limit:
                break
        return out

    def count(self) -> int:
        """Rows stored, verified or not."""
        try:
            with self.connect() as con:
                return int(con.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the results database {self.path}: {_one_line(str(exc))}") from None

    def listing_note(self, shown: int, **filters: Any) -> str:
        """The lines under the ``results`` table: how many rows, then one line per matching row that
        does not verify (:func:`unverified_line`)."""
        bad = [r for r in self.rows(**filters) if not r.verified]
        text = f"{shown} shown of {self.count()} stored in {self.path}"
        if not bad:
            return text
        lines = [
            text,
            f"{len(bad)} stored {'row does' if len(bad) == 1 else 'rows do'} not verify and "
            f"{'is' if len(bad) == 1 else 'are'} never served (evaluations are run again):",
        ]
        lines += [f"  {unverified_line(r)}" for r in bad[:NOTE_ROWS]]
        if len(bad) > NOTE_ROWS:
            lines.append(f"  ... and {len(bad) - NOTE_ROWS} more")
        return "\n".join(lines)

    def unverified(self) -> list[Row]:
        """Every stored row that does not verify, newest first (a report names each one)."""
        return [r for r in self.rows() if not r.verified]

    def _rows(self, where: str, params: list[Any], limit: int | None = None) -> Iterator[Row]:
        sql = f"SELECT id, {', '.join(COLUMNS)}, hmac FROM verdicts {where} ORDER BY id DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        try:
            with self.connect() as con:
                for raw in con.execute(sql, params):
                    yield self._read(raw)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the results database {self.path}: {_one_line(str(exc))}") from None

    def _read(self, raw: tuple[Any, ...]) -> Row:
        """One row, checked: signature first, then its document and limits (never raises)."""
        row_id, values, mac = raw[0], raw[1 : 1 + len(COLUMNS)], raw[-1]
        cell = dict(zip(COLUMNS, values))
        claims = {k: str(cell[k]) for k in ("created_at", "task_path", "solution_path", "outcome")}
        if mac is None:
            return Row(row_id, **claims, verified=False, problem="unsigned (written before rows were signed)")
        if not store_key.verifies(self._key, TABLE, values, mac):
            return Row(
                row_id,
                **claims,
                verified=False,
                problem="its signature does not match (changed outside kernelproof)",
            )
        try:
            doc = json.loads(cell["doc"])
            verdict = from_json(doc)
            limits = {str(k): float(jsonsafe.number(v)) for k, v in json.loads(cell["limits_json"]).items()}
        except (TypeError, ValueError, AttributeError) as exc:
            return Row(
                row_id, **claims, verified=False, problem=f"its document does not read as a verdict: {exc}"
            )
        return Row(row_id, **claims, verified=True, doc=doc, verdict=verdict, limits=limits)


def unverified_line(row: Row) -> str:
    """One line for a row that does not verify: its id, its claims (inert) and why, whole.

    Why one line: a tampered row's text is whatever was written into it (newlines, escapes); the
    listing must show one row per line, with our own words uncut, so that nothing is hidden."""
    claims = f"{_inert(row.task_path)} / {_inert(row.solution_path)}"
    return (
        f"unverified row {row.id}: {claims}, claims {_inert(row.outcome)!r} at {_inert(row.created_at)}: "
        f"{_inert(row.problem, limit=PROBLEM_CHARS)}"
    )


def _one_line(text: str) -> str:
    """``text`` on one line: every run of whitespace (newlines included) one space."""
    return " ".join(text.split())


def _inert(text: str, limit: int = CLAIM_CHARS) -> str:
    """An unverified row's claim, safe to print on one line: whitespace runs made one space, other
    control characters escaped, a claim longer than ``limit`` shortened with the count left out."""
    out = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in _one_line(text))
    return out if len(out) <= limit else f"{out[:limit]}... ({len(out) - limit} more characters)"


def _real(x: float | None) -> float | str | None:
    """A REAL cell: SQLite stores NaN as NULL, so non-finite values go in as jsonsafe's strings."""
    return jsonsafe.encode(float(x)) if x is not None else None


def _filters(task: str | None, solution: str | None, outcome: str | None, code: str | None):
    where, params = "WHERE 1=1", []
    if task:
        where += " AND task_path LIKE ?"
        params.append(f"%{task}%")
    if solution:
        where += " AND solution_path LIKE ?"
        params.append(f"%{solution}%")
    if outcome:
        where += " AND outcome = ?"
        params.append(outcome)
    if code:
        where += " AND (',' || codes || ',') LIKE ?"
        params.append(f"%,{code},%")
    return where, params


def _migrate(con: sqlite3.Connection) -> None:
    """Add the columns an older store lacks (inside the caller's write lock; idempotent), and make
    sure the file can be written."""
    con.execute("BEGIN IMMEDIATE")
    try:
        have = {r[1] for r in con.execute("PRAGMA table_info(verdicts)")}
        for name, decl in MIGRATIONS:
            if name not in have:
                con.execute(f"ALTER TABLE verdicts ADD COLUMN {name} {decl}")
        # A write that changes nothing: SQLite opens a file it cannot write read-only without a
        # word, and the first verdict would be lost after its evaluation ran; found here instead.
        version = int(con.execute("PRAGMA user_version").fetchone()[0])
        con.execute(f"PRAGMA user_version={version}")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def open_store(db: str | os.PathLike | None) -> Store | None:
    """The results store :func:`db_path` names, opened; ``None`` for ``db=""`` (no store). Only the
    default store's folder is created when missing."""
    path = db_path(db)
    if path is None:
        return None
    return Store(path, make_folder=db is None and not os.environ.get("KERNELPROOF_DB"))
