import torch
from kernelproof.worker.clock import CudaClock, RANGE_PREFIX
dev = torch.device("cuda:0")
c = CudaClock(dev)
x = torch.randn(64, 96, device=dev)
calls = [lambda: torch.relu(x) * 2 for _ in range(3)]
from torch.profiler import profile, ProfilerActivity, record_function
import time
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for i in range(3):
        c.flush_l2(); torch.cuda.synchronize()
        with record_function(f"{RANGE_PREFIX}{i}"):
            torch.cuda._sleep(60000)
            y = calls[i]()
            torch.cuda.synchronize()
evs = prof.profiler.kineto_results.events()
rows = [(e.start_ns(), e.end_ns(), str(e.device_type()), e.name()[:60], e.activity_type() if hasattr(e,'activity_type') else '') for e in evs]
t0 = min(r[0] for r in rows)
for r in sorted(rows):
    if 'CUDA' in r[2] or r[3].startswith(RANGE_PREFIX):
        print(f"{(r[0]-t0)/1e3:10.1f} {(r[1]-r[0])/1e3:8.1f} {r[2]:20s} {r[3]}")
outs, samples = c.run(calls)
print(samples)
outs, samples = c.run(calls)
print(samples)
