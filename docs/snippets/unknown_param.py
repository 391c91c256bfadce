# A parameter the kernel does not take is an error, not silently dropped.
from gpusim import simulate
from gpusim.kernels import resolve_kernel

alibi = resolve_kernel("scenarios/kernels/alibi.py:alibi_attention")
try:
    simulate(alibi, seq_len=256, window=64)
except Exception as e:
    print(f"{type(e).__module__}.{type(e).__name__}: {e}")
