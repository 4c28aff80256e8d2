"""An attack on CPU timing (tests only): fork processes that spin while the baselines are timed.

The computation is honest plain torch (the same as plain_torch.py). At construction it forks
spinners through a torch helper (``torch.multiprocessing.start_processes`` with the fork start
method: the fork is made by torch's code, not the solution's, and starts no thread). Each child
leaves the worker's process group and session (``os.setsid``), so a stop of the worker's process
group does not reach it. Every call of the candidate writes a byte to each child's pipe; a child
spins on the CPU whenever no byte has come for a while, which is when the worker stands still (the
parent times the baselines and reads the machine's load then), and sleeps while it runs: an
honest kernel, measured against a slowed eager, looks faster than it is. (The worker's /proc
entry is hidden from its children, so they cannot read its state directly.) The children inherit
the worker's cores (they cannot widen them). They ignore the signal torch asks the kernel to send
them when the worker ends, and spin on for a while after it (bounded, so that a test that finds
them alive leaves nothing running for long).
"""

import os
import select
import signal
import time

import torch
import torch.multiprocessing as mp
import torch.nn as nn

SPINNERS = 4  # more runnable processes than the baseline's cores, where they share them
QUIET_S = 0.002  # no call for this long: the worker is standing still
LINGER_S = 30.0  # how long a child outlives the worker unless it is ended (bounded: tests only)


def _spin(_index, worker, beats):
    os.setsid()  # out of the worker's process group: a stop of that group leaves it running
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what torch asked to be sent when the worker ends
    last = time.perf_counter()
    while os.getppid() == worker:
        ready, _, _ = select.select([beats], [], [], 0 if time.perf_counter() - last > QUIET_S else QUIET_S)
        if ready:
            if not os.read(beats, 4096):
                break  # the worker is gone
            last = time.perf_counter()
    until = time.perf_counter() + LINGER_S  # then spin on, to slow whatever is timed next
    while time.perf_counter() < until:
        pass


# One pipe's writing end per spinner. The worker imports the solution afresh for each load, so the
# list is kept on a module imported once (torch's) and the spinners are started once per worker.
_BEATS = mp.__dict__.setdefault("_spinner_beats", [])


def _start_spinners():
    reads = []
    for _ in range(SPINNERS):
        read, write = os.pipe()
        os.set_blocking(write, False)
        reads.append(read)
        _BEATS.append(write)
    for read in reads:
        mp.start_processes(_spin, args=(os.getpid(), read), nprocs=1, join=False, start_method="fork")


def _beat():
    for write in _BEATS:
        try:
            os.write(write, b".")
        except BlockingIOError:
            pass


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))
        if not _BEATS:
            _start_spinners()

    def forward(self, x):
        _beat()
        return torch.relu(x) * self.scale + self.bias
