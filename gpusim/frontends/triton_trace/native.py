"""A traced kernel's own source run natively: the unmodified ``@triton.jit`` function launched
exactly as it was traced (its tensors, scalars, grid, ``num_warps`` and ``num_stages``), on a CUDA
GPU, or on the CPU under Triton's interpreter (``TRITON_INTERPRET=1`` before triton is imported).
``gpusim validate`` measures user kernels this way, and ``benchmarks/triton_public_on_gpu.py``
measures the public test set with the same launch and timer. torch and triton are imported inside
functions only."""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from .compiled import UserSource
from .trace import python_function

WARMUP_MS, REP_MS = 25, 100          # triton.testing.do_bench, median: as validate times DSL kernels
LAUNCH_OPTIONS = ("num_warps", "num_stages")


@dataclass(frozen=True)
class NativeLaunch:
    """One launch of a user's kernel: ``tensors`` name -> (dtype, shape); ``scalars`` every other
    kernel argument (constexprs included)."""

    fn: object = field(repr=False)
    tensors: dict
    scalars: dict
    grid: tuple
    num_warps: int
    num_stages: int

    @property
    def kernel_name(self) -> str:
        """The name the compiled kernel carries (what a profiler lists)."""
        return python_function(self.fn).__name__


def from_spec(fn, spec) -> NativeLaunch:
    """The launch a ``kernel.LaunchSpec`` describes."""
    return NativeLaunch(fn, {n: (t[0], tuple(t[1])) for n, t in spec.tensors.items()}, dict(spec.scalars),
                        tuple(spec.grid), spec.num_warps, spec.num_stages)


def from_workload(workload) -> NativeLaunch | None:
    """The launch of a workload traced from a user's kernel (``triton_kernel``); None for any other
    workload (a DSL kernel's, which validate runs through the source gpusim generates)."""
    if len(workload.launches) != 1:
        return None
    launch = workload.launches[0]
    hook = launch.program.meta.get("compile")
    if not launch.program.meta.get("triton_source") or not isinstance(hook, UserSource):
        return None
    return NativeLaunch(hook.fn, dict(hook.tensors), dict(hook.scalars), tuple(launch.grid), hook.num_warps,
                        hook.num_stages)


def jit_function(fn):
    """The object to launch with ``fn[grid](...)``: under ``@triton.autotune``/``heuristics`` the
    innermost JIT function, since the launch already names one configuration."""
    while type(fn).__name__ in ("Autotuner", "Heuristics"):
        fn = fn.fn
    return fn


def launch_args(nl: NativeLaunch, mem: dict) -> tuple:
    """(positional arguments in the kernel's order, launch options): tensors from ``mem``, every
    other argument from the scalars; ``num_warps``/``num_stages`` go as launch options unless the
    kernel takes them as its own (constexpr) arguments, where the argument carries them."""
    names = list(inspect.signature(python_function(nl.fn)).parameters)
    missing = [n for n in names if n not in mem and n not in nl.scalars]
    if missing:
        raise ValueError(f"{nl.kernel_name}: no value for kernel argument(s) {', '.join(missing)}")
    args = [mem[n] if n in mem else nl.scalars[n] for n in names]
    opts = {k: getattr(nl, k) for k in LAUNCH_OPTIONS if k not in names}
    return args, opts


def launcher(nl: NativeLaunch, mem: dict):
    """A zero-argument function that launches the kernel once on the tensors of ``mem``."""
    kern = jit_function(nl.fn)
    args, opts = launch_args(nl, mem)
    grid = tuple(nl.grid)

    def go():
        kern[grid](*args, **opts)

    return go


def bench_us(go) -> float:
    """Median time of ``go`` in microseconds: ``triton.testing.do_bench`` (warmup 25 ms, rep 100
    ms, L2 cleared before every repetition)."""
    import triton.testing

    return 1000.0 * float(triton.testing.do_bench(go, warmup=WARMUP_MS, rep=REP_MS, return_mode="median"))
