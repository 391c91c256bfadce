"""The exact check's reference for a traced Triton kernel: the same, unmodified kernel run by
Triton's own interpreter (``TRITON_INTERPRET=1``: numpy on the CPU) on the same inputs.

The interpreter must be switched on before triton is imported (``tl.sum`` and the other library
functions are ``@triton.jit`` functions themselves), so it runs in a child Python process that
imports the kernel's file afresh; the file's ``if __name__ == "__main__":`` code does not run.
Two gaps of the interpreter are filled there: a float argument is an fp32 scalar (as the JIT types
it; the interpreter keeps a Python float), and ``libdevice`` functions a kernel imports by name
(which the interpreter does not implement) are replaced by their ``tl.math`` namesakes, ``tanh``
by ``2 * sigmoid(2x) - 1``."""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from .trace import python_function

_CHILD = r"""
import importlib.util, json, sys
import numpy as np
import torch
a = json.loads(sys.argv[1])
sys.path.insert(0, a["dir"])
spec = importlib.util.spec_from_file_location("gpusim_reference_kernel", a["file"])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
import triton, triton.language as tl
from triton.runtime import interpreter as interp
_cvt = interp._implicit_cvt
def _cvt_float(arg):   # a float argument is an fp32 scalar, as the JIT types it
    if isinstance(arg, float):
        return tl.tensor(interp.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
    return _cvt(arg)
interp._implicit_cvt = _cvt_float
@triton.jit
def _tanh(x):
    return 2 * tl.sigmoid(2 * x) - 1
for k, v in list(vars(mod).items()):   # libdevice functions the interpreter lacks: tl.math stand-ins
    if str(getattr(v, "__module__", "")).startswith("triton.language.extra"):
        name = getattr(v, "__name__", k)
        setattr(mod, k, _tanh if name == "tanh" else (lambda *x, _n=name: getattr(tl.math, _n)(*x)))
fn = getattr(mod, a["name"])
while not hasattr(fn, "__getitem__") or type(fn).__name__ in ("Autotuner", "Heuristics"):
    fn = fn.fn
data = np.load(a["inputs"])
mem = {}
for n, (dt, shape) in a["tensors"].items():
    td = getattr(torch, dt)
    mem[n] = torch.from_numpy(data[n]).to(td) if n in data.files else torch.zeros(shape, dtype=td)
args = [mem[n] if n in mem else a["scalars"][n] for n in a["order"]]
fn[tuple(a["grid"])](*args)
np.savez(a["out"], **{n: t.to(torch.float64).numpy() for n, t in mem.items()})
"""

TORCH_DTYPE = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "int32": "int32"}


def run_interpreter(fn, tensors: dict, scalars: dict, grid: tuple, inputs: dict) -> dict:
    """Every tensor after the launch, as float64 arrays. ``tensors``: name -> (dtype, shape);
    ``inputs``: name -> array (the other tensors start as zeros)."""
    pyfn = python_function(fn)
    file = os.path.abspath(inspect.getsourcefile(pyfn))
    order = [n for n in inspect.signature(pyfn).parameters if n in tensors or n in scalars]
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
        np.savez(src, **{n: np.asarray(v, dtype=np.int64 if tensors[n][0] == "int32" else np.float64)
                         for n, v in inputs.items()})
        job = {"dir": os.path.dirname(file), "file": file, "name": pyfn.__name__, "inputs": src, "out": out,
               "tensors": {n: (TORCH_DTYPE[d], list(s)) for n, (d, s) in tensors.items()},
               "scalars": {n: v for n, v in scalars.items() if n not in tensors}, "order": order,
               "grid": list(grid)}
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        res = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(job)], capture_output=True, text=True, env=env)
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"{pyfn.__name__} under Triton's interpreter failed: {last}")
        with np.load(out) as d:
            return {n: d[n] for n in d.files}
