"""The trusted side of the worker boundary: how untrusted code is started, limited and contained.

Everything that runs a candidate's code (a candidate worker, a builder) is started from here, and
everything that limits it lives here: the parent's handle on a worker process (process.py: what it
starts from in launch.py, its stops in scheduling.py, its death explained in deaths.py), its
resource limits (limits.py), the per-device gate that keeps timing alone on the GPU (gate.py),
the directories a contained process builds into (dirs.py), and the in-process audit hook armed
before the candidate's import (guards.py). Layers above (build, measure, verify, evaluate,
executors) import this package; it imports none of them (I1, I8).
"""
