"""kernelproof's version, in a module of its own: any module may import it without the root package."""

__version__ = "0.1.0"
