from gpusim import simulate
from gpusim.kernels import resolve_kernel

alibi = resolve_kernel("scenarios/kernels/alibi.py:alibi_attention")
for n in (128, 256, 512):
    r = simulate(alibi, gpu="h100", batch=1, heads=4, seq_len=n, head_dim=64, check=True)
    print(f"seq_len {n:4d}: {r.time_us:6.1f} us  {r.tflops:5.1f} TFLOP/s  {r.bound:7s}  max_rel_err {r.max_rel_err:.1e}")

rms = resolve_kernel("scenarios/kernels/rmsnorm.py:rms_norm")
for rows, cols in ((256, 1024), (1024, 4096)):
    r = simulate(rms, gpu="h100", rows=rows, cols=cols, check=True)
    print(f"{rows:5d} x {cols:5d}: {r.time_us:6.1f} us  {r.dram_gbps:6.0f} GB/s  {r.bound:7s}  max_rel_err {r.max_rel_err:.1e}")
