# The generated Triton code on the CPU, in Triton's interpreter (needs torch and triton:
# pip install -e '.[gpu]'), against the kernel's float64 reference.
import os

os.environ["TRITON_INTERPRET"] = "1"          # before triton is imported

from gpusim.backends import numpy_exec
from gpusim.backends.triton.run import run_workload
from gpusim.kernels import resolve_kernel

rms = resolve_kernel("scenarios/kernels/rmsnorm.py:rms_norm")
wl = rms.build(rows=64, cols=1024)
inputs = numpy_exec.random_inputs(wl, seed=0)  # the kernel's own inputs (random normal by default)
out = run_workload(wl, inputs, device="cpu")
ref = numpy_exec.reference(wl, inputs)         # the float64 reference, on the same inputs
print("max_rel_err", f"{numpy_exec.max_rel_err(out['y'], ref['y']):.1e}")
