"""Containment: what a process running untrusted code may do, below Python and inside it.

The plan the parent writes before a contained process starts (plan.py), applied by the child
before anything else runs (contain.py): its own uid (identity.py), Landlock (landlock.py), private
mounts (mounts.py), seccomp (seccomp.py), resource limits (limits.py), its private directories
(private.py, dirs.py); and the audit hook armed before the candidate is imported (guards.py).
``python -m kernelproof.sandbox`` says which layers are active here (probe.py). Starting and
managing those processes is kernelproof.host's; this package imports none of the layers above (I8).
"""
