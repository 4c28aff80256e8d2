"""What the operator started the service with: one frozen record read by every part of it."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from kernelproof.errors import UsageError
from kernelproof.options import EvalOptions
from kernelproof.rewards import RewardWeights

DEFAULT_MAX_BODY_BYTES = 1_000_000  # a solution file is tens of kB; a batch of 64 fits
DEFAULT_QUEUE_LIMIT = 256  # jobs queued or running before new ones are answered 429
DEFAULT_RETRY_AFTER_S = 5
MAX_BATCH = 512  # items in one batch request
# Jobs the local executor takes at once for each of a device's --per-device slots: a job waiting
# for its build, or standing aside for a large task's device memory, holds no slot
# (kernelproof/serve/eval_backends.py).
DEFAULT_JOBS_PER_SLOT = 2


@dataclass(frozen=True)
class ServeConfig:
    task_dirs: tuple[Path, ...]  # task sets served by id (--tasks, repeatable)
    options: EvalOptions  # the operator's evaluation options; a request may narrow a few
    state_dir: Path  # the job book (SQLite: jobs and their submitted bytes), beside the store
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None  # bearer token (--token-file); required beyond loopback
    trust_client_tasks: bool = False  # accept a client's own reference source (it runs in the parent)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    queue_limit: int = DEFAULT_QUEUE_LIMIT
    jobs_per_slot: int = DEFAULT_JOBS_PER_SLOT  # local executor: jobs at once for each device slot
    retry_after_s: int = DEFAULT_RETRY_AFTER_S
    executor: str = "local"  # local | ray
    address: str | None = None  # the Ray cluster's address (executor ray)
    ray_slots: int = 0  # Ray: evaluations in flight at once (0: the cluster's slots)
    weights: RewardWeights = field(default_factory=RewardWeights)

    def __post_init__(self) -> None:
        if self.executor not in ("local", "ray"):
            raise UsageError(f"--executor must be local | ray, not {self.executor!r}")
        if self.max_body_bytes < 1024:
            raise UsageError("--max-body-bytes must be at least 1024")
        if self.queue_limit < 1:
            raise UsageError("--queue-limit must be at least 1")
        if self.jobs_per_slot < 1:
            raise UsageError("--jobs-per-slot must be at least 1")
        if not is_loopback(self.host) and not self.token:
            raise UsageError(
                f"--host {self.host} is not a loopback address: the service runs the clients' code and "
                "answers anyone who can reach it; give --token-file (a bearer token every request must carry)"
            )


def is_loopback(host: str) -> bool:
    """Loopback by the address itself (127.0.0.0/8, ::1); ``localhost`` by name. Anything else,
    0.0.0.0 included, reaches beyond this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path: str | Path) -> str:
    """The bearer token in a file (whitespace around it ignored); UsageError when unusable."""
    try:
        token = Path(path).read_text().strip()
    except OSError as exc:
        raise UsageError(f"cannot read --token-file {path}: {exc.strerror or exc}") from None
    if len(token) < 16 or any(c.isspace() for c in token):
        raise UsageError(f"--token-file {path}: the token must be one word of at least 16 characters")
    return token
