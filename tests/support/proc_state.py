"""What the kernel says of a worker process: is it stopped (SIGSTOP)?"""

import time


def stopped(pid: int, expected: bool) -> bool:
    """Is the process stopped (/proc state T)? Polled for up to 5 s until it is as `expected`
    (a signal is delivered asynchronously)."""
    for _ in range(100):
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0] == "T"
        if state == expected:
            break
        time.sleep(0.05)
    return state
