"""The parent's side of running untrusted processes and sharing devices.

Starting a worker or a builder and talking to it (process.py, launch.py, spawn.py, zygote.py), its
replies read against the request in flight (inbox.py), its stops and cores (scheduling.py, cpus.py),
every process it started (members.py), its death explained (deaths.py), and who may use a GPU now
(gate.py, admission.py). What a contained process may do is kernelproof.sandbox's; what crosses the
boundary is kernelproof.wire's. Layers above (build, measure, verify, evaluate, executors) import
this package; it imports none of them (I1, I8).
"""
