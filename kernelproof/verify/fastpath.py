"""The sweep's speed-ups that keep every check: on and off (a switch for tests and benchmarks only).

Setup's probe inputs (one ``get_inputs()`` call, GBs at KernelBench's level-1 sizes)
are the audit's first "task" inputs on their variant, instead of a call of its own
(kernelproof/evaluate/setup.py): the same secret seed source, the same controls.

Where every element of a slice is finite, the comparisons (kernelproof/verify/oracle_compare.py) skip
the masks that only matter for NaN and Inf: the same arithmetic on the same values in the same
order, so the same numbers and the same verdict, in about half the passes over memory. A slice
with any non-finite element takes the full path. Where every element of an output is finite, its
slices' sums are added on the device and read back once (one wait for a GPU instead of four to
six a slice); an output that does not pass so is compared again slice by slice, to name its first
bad elements.

On a GPU a task's own ``get_inputs()`` runs with the device as torch's default (the CPU's
generator took 12-15 s a call at level-1 sizes), and as written on the CPU where that fails
(kernelproof/verify/case_plan.py, ``_task_inputs``): values that follow the same seed, drawn elsewhere.

On a GPU the task's ``Model`` is built with the device as torch's default, so that its
parameters are initialised there (a 32768 x 32768 Linear took 8-14 s of the CPU's generator), and
as written on the CPU where that fails (kernelproof/verify/case_plan.py, ``_construct``): the same
initialisers from the same seed, drawn elsewhere.

``ENABLED = False`` turns all four off: benchmarks/sweep_costs.py measures the difference in one
run, and the tests show the two paths agree. It is never reachable from the command line or the stored verdict.
"""

from __future__ import annotations

ENABLED = True
