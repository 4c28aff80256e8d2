import sys

from kernelproof.worker.main import main

sys.exit(main())
