"""The verbs of the command line beyond the core ones in kernelproof/cli.py: optimize (the agent),
report, certify, verify and keys, and the build cache's. Part of the command-line layer: they
parse, call the api (or the package whose verb they are), print and pick the exit code. Beside them,
the command line's own plumbing: ``help`` (each verb's line in ``--help``), ``streams`` (stdout
when its reader goes away) and ``failures`` (an exception that reached the top)."""
