"""A cap on this process's address space for a block: an allocation beyond it fails loudly.

What a CPU test uses to show that a step never makes a whole-size temporary, or never allocates at
all, without a GPU to measure.
"""

import resource
from collections.abc import Iterator
from contextlib import contextmanager


def address_space() -> int:
    """This process's current virtual size, in bytes (what a cap must leave room for)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


@contextmanager
def capped(extra_bytes: int) -> Iterator[None]:
    """The address space capped at its current size plus `extra_bytes` for the block. The hard
    limit stays; where it is finite and lower, it is the cap (RLIM_INFINITY is -1, so a plain
    ``min`` with it would lift the cap instead)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = address_space() + extra_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
