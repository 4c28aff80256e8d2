"""``python -m kernelproof.worker``: contain this process first, then start the worker.

The containment (kernelproof.sandbox.contain) is applied before kernelproof.worker.message_loop, and with
it torch, is imported: Landlock and seccomp bind only the thread that asks and what it starts
later, and torch, CUDA and CUPTI start threads at import and initialisation.
"""

import sys

from kernelproof.sandbox.contain import enter

argv = enter(sys.argv[1:])

from kernelproof.worker.message_loop import main  # noqa: E402 - after the containment, by design

sys.exit(main(argv))
