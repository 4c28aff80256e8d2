"""kernelproof: proves whether a GPU kernel is correct and how much faster it really is."""

__version__ = "0.1.0"
