"""``kernelproof serve``: the evaluator as an HTTP reward service for RL training (docs/serve.md).

One module per job: :mod:`.config` (what the operator started it with), :mod:`.tasks` (task ids
to files), :mod:`.requests` (typed request records, validated), :mod:`.jobs` (the persistent job
book and the scheduler over the executors), :mod:`.guard` (token and size limits), :mod:`.metrics`
(Prometheus text), :mod:`.app` (the service's own API), :mod:`.kernelgym` and :mod:`.openrlhf`
(drop-in endpoints), :mod:`.main` (binding and running uvicorn).
"""
