"""Wall time of simulating Llama-3-8B on an H100: a prefill at 8K tokens and a decode point
(batch 1, context 8K), each from a cold cache (every distinct kernel shape simulated once).

    PYTHONPATH=$PWD python benchmarks/bench_models.py
"""
import time

from gpusim.models import simulate as msim
from gpusim.models import simulate_model

CASES = [("prefill seq_len 8192", dict(phase="prefill", batch=1, seq_len=8192)),
         ("decode batch 1 context 8192", dict(phase="decode", batch=1, context=8192)),
         ("decode batch 64 context 8192", dict(phase="decode", batch=64, context=8192))]

if __name__ == "__main__":
    for label, kw in CASES:
        msim._CACHE.clear()
        t = time.perf_counter()
        r = simulate_model("llama3-8b", gpu="h100", **kw)
        wall = time.perf_counter() - t
        slow = max(r.ops, key=lambda o: o.time_us).op if r.ops else "-"
        print(f"llama3-8b h100 {label:30s} {r.status:10s} model {r.time_us / 1e3:9.3f} ms  "
              f"simulated in {wall:6.2f} s ({len(msim._CACHE)} kernel shapes; largest op {slow})")
