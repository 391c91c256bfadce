"""User Triton kernels in ``gpusim validate``: a workload traced from an unmodified ``@triton.jit``
function (``kernel: file.py:name``) runs on the GPU as the user's own kernel, launched as it was
traced (``frontends.triton_trace.native``), never through the source gpusim generates from its IR;
its outputs are checked against the numpy execution of the traced IR (exact against the same kernel
under Triton's interpreter), timed with the same ``do_bench`` as DSL kernels.

The check runs every program on numpy, or, for kernels with a ``tl.dot`` or more than
``FULL_PROGRAMS`` programs, ``SAMPLE_PROGRAMS`` of them (first, last and random): the elements
those programs write are compared (unwritten outputs stay NaN-poisoned; an output that is also an
input is compared where the sampled programs changed it)."""
from __future__ import annotations

import dataclasses

import numpy as np

from ...backends import numpy_exec
from ...dsl import analysis, ir
from ...frontends.triton_trace import native

SAMPLE_PROGRAMS = 64
FULL_PROGRAMS = 1 << 16
TOL = {"fp16": 5e-3, "bf16": 2e-2, "fp32": 1e-2}        # as measure.TOL, by each output's storage dtype


def native_launch(workload) -> native.NativeLaunch | None:
    """The user's kernel launch of a traced workload; None for a DSL workload."""
    return native.from_workload(workload)


def tolerance(workload) -> float:
    """max_rel_err allowed: the loosest of the float outputs' dtypes."""
    tols = [TOL[workload.tensors[n].dtype] for n in workload.outputs if workload.tensors[n].dtype in TOL]
    return max(tols, default=1e-2)


# --------------------------------------------------------------------------- running on a device
def _torch_dtype(dtype: str):
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "int32": torch.int32}[dtype]


def allocate(nl: native.NativeLaunch, inputs: dict, device: str) -> dict:
    """Torch tensors of the launch: inputs copied in, every other float tensor NaN (an element the
    kernel fails to write shows), integer tensors zero."""
    import torch

    mem = {}
    for name, (dtype, shape) in nl.tensors.items():
        if name in inputs:
            arr = np.ascontiguousarray(inputs[name], dtype=np.int32 if dtype == "int32" else np.float32)
            if arr.shape != tuple(shape):
                raise ValueError(f"input {name!r} has shape {arr.shape}, expected {tuple(shape)}")
            mem[name] = torch.from_numpy(arr).to(device=device, dtype=_torch_dtype(dtype))
        elif dtype == "int32":
            mem[name] = torch.zeros(shape, dtype=torch.int32, device=device)
        else:
            mem[name] = torch.full(shape, float("nan"), dtype=_torch_dtype(dtype), device=device)
    return mem


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def run(workload, inputs: dict, device: str = "cuda") -> dict:
    """Every tensor after one launch of the user's kernel, as numpy (bf16 as float32)."""
    nl = native_launch(workload)
    mem = allocate(nl, inputs, device)
    native.launcher(nl, mem)()
    _sync(device)
    return {n: t.detach().cpu().to(_torch_dtype("fp32") if d == "bf16" else t.dtype).numpy().copy()
            for n, (d, _) in nl.tensors.items() for t in (mem[n],)}


def time(workload, inputs: dict, device: str = "cuda", bench=native.bench_us) -> dict:
    """``{"total_us", "per_launch_us": {launch name: us}}`` of the user's kernel (one launch), timed
    by ``bench`` (``do_bench``; the CPU test passes its own)."""
    nl = native_launch(workload)
    mem = allocate(nl, inputs, device)
    go = native.launcher(nl, mem)
    go()                     # compiled before the timer starts
    _sync(device)
    us = bench(go)
    return {"total_us": us, "per_launch_us": {workload.launches[0].name: us}}


def launchers(workload, mem: dict) -> list:
    """[(kernel name, launch function)] of the user's kernel on ``mem`` (what ncu profiles)."""
    nl = native_launch(workload)
    return [(nl.kernel_name, native.launcher(nl, mem))]


# --------------------------------------------------------------------------- the check
def sample_programs(grid, seed: int = 0, k: int | None = None) -> list:
    """First, last and random program ids of ``grid``, at most ``k`` (``SAMPLE_PROGRAMS``), in launch order."""
    k = SAMPLE_PROGRAMS if k is None else k
    pids = list(analysis.program_ids(grid))
    if len(pids) <= k:
        return pids
    rng = np.random.default_rng(seed)
    chosen = {0, len(pids) - 1} | {int(i) for i in rng.choice(len(pids) - 2, size=k - 2, replace=False) + 1}
    return [pids[i] for i in sorted(chosen)]


def sampled(workload) -> bool:
    """Whether the check runs a sample of the programs (a kernel with a tl.dot, or a large grid)."""
    launch = workload.launches[0]
    n = int(np.prod(launch.grid))
    has_dot = any(isinstance(op, ir.Dot) for op in ir.walk(launch.program.body))
    return n > SAMPLE_PROGRAMS and (has_dot or n > FULL_PROGRAMS)


def traced_reference(workload, inputs: dict, seed: int = 0) -> tuple:
    """References of a traced workload's outputs from the numpy execution of its IR:
    ``({name: (index, ref)}, "full" | "sampled")``, ``out[index]`` must match ``ref``."""
    if not sampled(workload):
        mem = numpy_exec.execute(workload, inputs)
        return {n: (Ellipsis, np.asarray(mem[n], dtype=np.float64)) for n in workload.outputs}, "full"
    launch = workload.launches[0]
    mem = numpy_exec.execute(dataclasses.replace(workload, launches=()), inputs)     # allocated, poisoned
    numpy_exec.run_launch(launch, mem, sample_programs(launch.grid, seed))
    refs = {}
    for n in workload.outputs:
        ref = np.asarray(mem[n], dtype=np.float64)
        written = ref != np.asarray(inputs[n], dtype=np.float64) if n in inputs else np.isfinite(ref)
        if n not in inputs and workload.tensors[n].dtype == "int32":
            written = ref != np.iinfo(np.int32).min
        refs[n] = (np.nonzero(written), ref[written])
    return refs, "sampled"
