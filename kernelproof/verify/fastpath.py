"""The comparisons' fast paths: on and off (a switch for tests and benchmarks only).

Where every element of a slice is finite, the comparisons (kernelproof/verify/compare.py) skip
the masks that only matter for NaN and Inf: the same arithmetic on the same values in the same
order, so the same numbers and the same verdict, in about half the passes over memory. A slice
with any non-finite element takes the full path. ``ENABLED = False`` runs the full path always:
benchmarks/sweep_costs.py measures the difference in one run, and the tests show the two paths
agree. It is never reachable from the command line or the stored verdict.
"""

from __future__ import annotations

ENABLED = True
