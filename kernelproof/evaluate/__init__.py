"""One evaluation as a chain of steps: setup, build, correctness, timing, finish.

Each step (a module of this package) takes the frozen records it needs and returns its own
(step_records.py); chain.py orders them and owns the candidate's worker and the device gate. What the
executors call is :func:`evaluate_pair` and :func:`compare_pair`; what they implement is
:class:`WorkerSource`.
"""

from kernelproof.evaluate.chain import evaluate_pair
from kernelproof.evaluate.head_to_head import ComparePair, compare_pair
from kernelproof.evaluate.workers import WorkerSource

__all__ = ["ComparePair", "WorkerSource", "compare_pair", "evaluate_pair"]
