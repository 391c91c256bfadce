"""Time to simulate Llama-3-8B on an H100: a prefill at 8K tokens and decode points, each from a
cold cache (every distinct kernel shape, and every candidate tile config, simulated once), in this
one process (one core). Prints wall and CPU seconds: on a shared machine the CPU time is the one
that compares.

    PYTHONPATH=$PWD GPUSIM_RESOURCES=estimated python benchmarks/bench_models.py
"""
import time

from gpusim.models import simulate as msim
from gpusim.models import simulate_model

CASES = [("prefill seq_len 8192", dict(phase="prefill", batch=1, seq_len=8192)),
         ("decode batch 1 context 8192", dict(phase="decode", batch=1, context=8192)),
         ("decode batch 64 context 8192", dict(phase="decode", batch=64, context=8192))]

if __name__ == "__main__":
    simulate_model("llama3-8b", gpu="h100", phase="decode", batch=1, context=64)   # imports, JIT caches
    for label, kw in CASES:
        msim._CACHE.clear()
        t, c = time.perf_counter(), time.process_time()
        r = simulate_model("llama3-8b", gpu="h100", **kw)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        slow = max(r.ops, key=lambda o: o.time_us).op if r.ops else "-"
        print(f"llama3-8b h100 {label:30s} {r.status:10s} model {r.time_us / 1e3:9.3f} ms  "
              f"simulated in {wall:6.2f} s wall, {cpu:6.2f} s CPU ({len(msim._CACHE)} simulations; largest op {slow})",
              flush=True)
