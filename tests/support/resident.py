"""This process's peak resident memory, as the kernel keeps it for its own address space.

``getrusage(RUSAGE_SELF).ru_maxrss`` is the wrong figure for a test: Linux carries it across
``execve`` (the peak of the process that spawned it, a pytest worker that ran large tests
before, becomes the new program's starting peak), and it only ever grows. ``VmHWM`` in
/proc/self/status belongs to the current address space, and writing 5 to /proc/self/clear_refs
resets it, so a step's own peak can be read.
"""


def peak_mib() -> float:
    """The resident high-water mark of this process's address space, in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def reset_peak() -> None:
    """Start the high-water mark again from the resident memory now."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
