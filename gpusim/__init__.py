"""gpusim: a cycle-approximate GPU memory-hierarchy simulator.

Kernels are written once in a tile DSL (``gpusim.dsl``); the same IR runs exactly on numpy
(``gpusim.backends.numpy_exec``), is timed by a discrete-event model (``gpusim.backends.sim``), is
lowered to Triton and compiled (``gpusim.toolchain``) and runs on a GPU (``gpusim.backends.triton``);
the last two are imported only when asked for.
"""
from . import sweep  # callable: gpusim.sweep(kernel, gpu=..., **params_or_lists) -> DataFrame
from .api import simulate, simulate_workload
from .hardware import GPUConfig, available_gpus, load_gpu
from .kernels import KERNELS, build
from .models import simulate_model
from .frontends import triton_kernel  # a @triton.jit function as a Kernel (docs/triton-kernels.md)
from .result import KernelResult, Result

__version__ = "0.1.0"
__all__ = ["simulate", "simulate_workload", "GPUConfig", "available_gpus", "load_gpu", "KERNELS", "build",
           "KernelResult", "Result", "sweep", "simulate_model", "triton_kernel", "__version__"]
