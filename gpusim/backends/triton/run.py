"""Triton backend: imports the sources ``gpusim.toolchain.lower`` generates (through the checked
``toolchain.cache``), runs whole workloads through torch tensors (CUDA, or CPU under
``TRITON_INTERPRET=1``) and times them with ``triton.testing.do_bench``. triton and torch are
imported inside functions only."""
from __future__ import annotations

import os

import numpy as np

from ...dsl import ir
from ...toolchain.cache import cache_dir, import_source, interpreting  # noqa: F401  (cache_dir: where generated sources live)
from ...toolchain.lower import kernel_name, launch_stages, lower


# --------------------------------------------------------------------------- generated modules

def load_kernel(source: str, name: str):
    """The JIT function ``name`` defined by ``source``, imported through the checked cache
    (``cache.import_source``: a user-owned directory, content verified before import). Modules are
    cached per process and per interpreter mode, which ``triton.jit`` fixes at import."""
    return getattr(import_source(source, "interp" if interpreting() else "jit"), name)


# --------------------------------------------------------------------------- running workloads
def _torch_dtype(dtype: str):
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "int32": torch.int32,
            "fp8e4m3": torch.float8_e4m3fn, "fp8e5m2": torch.float8_e5m2,
            "bool": torch.bool}[dtype]


def _to_torch(arr: np.ndarray, t: ir.TensorArg, device: str):
    import torch

    if t.dtype in ("bf16", "fp8e4m3", "fp8e5m2"):     # float32 arrays holding values of the format: exact
        return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)).to(device=device,
                                                                                dtype=_torch_dtype(t.dtype))
    np_dt = {"fp16": np.float16, "fp32": np.float32, "int32": np.int32, "bool": np.bool_}[t.dtype]
    return torch.from_numpy(np.ascontiguousarray(arr, dtype=np_dt)).to(device)


def _to_numpy(x, t: ir.TensorArg) -> np.ndarray:
    import torch

    x = x.detach().cpu()
    return (x.to(torch.float32) if t.dtype in ("bf16", "fp8e4m3", "fp8e5m2") else x).numpy().copy()


def _check_device(device: str) -> None:
    if device == "cpu":
        if not interpreting():
            raise RuntimeError("device='cpu' runs kernels in the Triton interpreter: set TRITON_INTERPRET=1 "
                               "before triton is imported")
    elif device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("device='cuda' but torch sees no CUDA device")
    else:
        raise ValueError(f"device must be 'cpu' (Triton interpreter) or 'cuda', got {device!r}")


def allocate(workload: ir.Workload, inputs: dict, device: str) -> dict:
    import torch

    mem = {}
    for name, t in workload.tensors.items():
        if name in inputs:
            if tuple(np.shape(inputs[name])) != tuple(t.shape):
                raise ValueError(f"input {name!r} has shape {np.shape(inputs[name])}, expected {t.shape}")
            mem[name] = _to_torch(inputs[name], t, device)
        elif t.dtype in ir.FLOAT_DTYPES:
            mem[name] = torch.full(t.shape, float("nan"), dtype=_torch_dtype(t.dtype), device=device)
        else:
            mem[name] = torch.zeros(t.shape, dtype=_torch_dtype(t.dtype), device=device)
    missing = [n for n in workload.inputs if n not in inputs]
    if missing:
        raise ValueError(f"missing inputs: {', '.join(missing)}")
    return mem


def launchers(workload: ir.Workload, mem: dict) -> list:
    """One (name, zero-argument launch function) per ``ir.Launch``, kernels compiled lazily."""
    out = []
    for launch in workload.launches:
        prog = launch.program
        kern = load_kernel(lower(prog, launch.grid, interpreter=interpreting()), kernel_name(prog))
        args = [mem[launch.bindings[t.name]] for t in prog.params]
        opts = dict(num_warps=prog.num_warps, num_stages=launch_stages(prog))
        grid = tuple(launch.grid)

        def go(kern=kern, args=args, grid=grid, opts=opts):
            kern[grid](*args, **opts)

        out.append((launch.name, go))
    return out


def run_workload(workload: ir.Workload, inputs: dict, device: str = "cuda") -> dict:
    """Run every launch in order; returns every tensor (inputs, intermediates, outputs) as numpy.

    Non-input tensors start as NaN, so anything a kernel fails to write shows up. bf16 tensors
    come back as float32 arrays holding bf16 values, as in ``numpy_exec``."""
    _check_device(device)
    mem = allocate(workload, inputs, device)
    for _, go in launchers(workload, mem):
        go()
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
    return {name: _to_numpy(mem[name], t) for name, t in workload.tensors.items()}


def time_workload(workload: ir.Workload, inputs: dict, reps_ms: int = 100, warmup_ms: int = 25) -> dict:
    """Median CUDA time of the whole workload and of each launch (``triton.testing.do_bench``,
    which clears L2 before every repetition). Returns ``{"total_us", "per_launch_us": {name: us}}``."""
    import triton.testing

    _check_device("cuda")
    mem = allocate(workload, inputs, "cuda")
    fns = launchers(workload, mem)
    for _, go in fns:
        go()

    def whole():
        for _, g in fns:
            g()

    def bench(fn):
        return 1000.0 * float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=reps_ms, return_mode="median"))

    per = {}
    for name, go in fns:
        key, n = name, 1
        while key in per:
            n += 1
            key = f"{name}#{n}"
        per[key] = bench(go)
    return {"total_us": bench(whole), "per_launch_us": per}
