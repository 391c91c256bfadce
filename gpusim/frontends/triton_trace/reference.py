"""The exact check's reference for a traced Triton kernel: the same, unmodified kernel run by
Triton's own interpreter (``triton.runtime.interpreter``, numpy on the CPU) on the same inputs.
Helper ``@triton.jit`` functions it calls are interpreted too (their module globals are swapped
for the run and restored)."""
from __future__ import annotations

import contextlib
import types

import numpy as np

from .trace import is_triton_function, python_function

TORCH_DTYPE = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "int32": "int32"}


@contextlib.contextmanager
def _interpreted_helpers(fn):
    from triton.runtime.interpreter import InterpretedFunction

    saved, todo, seen = [], [fn], set()
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        g = f.__globals__
        for k, v in list(g.items()):
            if is_triton_function(v) and type(v).__name__ != "InterpretedFunction":
                inner = python_function(v)
                saved.append((g, k, v))
                g[k] = InterpretedFunction(inner)
                todo.append(inner)
            elif isinstance(v, types.FunctionType) and v is not f and getattr(v, "__module__", None) == f.__module__:
                pass
    try:
        yield
    finally:
        for g, k, v in reversed(saved):
            g[k] = v


def run_interpreter(fn, tensors: dict, scalars: dict, grid: tuple, inputs: dict, num_warps=4, num_stages=3) -> dict:
    """Every tensor after the launch, as float64 arrays. ``tensors``: name -> (dtype, shape);
    ``inputs``: name -> array (the others start as zeros)."""
    import inspect

    import torch
    from triton.runtime.interpreter import InterpretedFunction

    pyfn = python_function(fn)
    mem = {}
    for n, (dtype, shape) in tensors.items():
        td = getattr(torch, TORCH_DTYPE[dtype])
        if n in inputs:
            a = np.asarray(inputs[n], dtype=np.float64 if dtype != "int32" else np.int64)
            mem[n] = torch.from_numpy(a.copy()).to(td)
        else:
            mem[n] = torch.zeros(shape, dtype=td)
    args = [mem[n] if n in mem else scalars[n] for n in inspect.signature(pyfn).parameters
            if n in mem or n in scalars]
    with _interpreted_helpers(pyfn):
        InterpretedFunction(pyfn)[tuple(grid)](*args)
    return {n: t.to(torch.float64).numpy() for n, t in mem.items()}
