"""Front ends that turn kernels written for other tools into gpusim Kernels.

``triton_kernel(fn, grid=..., args=...)`` takes an unmodified ``@triton.jit`` function
(``frontends.triton_trace``). Importing this package lets ``path/to/file.py:name`` name such a
function wherever a kernel is named (it registers an adapter with ``kernels.spec``); triton itself
is imported only when a kernel is compiled or checked."""
from ..kernels import spec as _spec


def triton_kernel(fn, grid=None, args=None, num_warps: int = 4, num_stages: int = 3, name=None, help: str = ""):  # noqa: A002
    """A gpusim Kernel of a ``@triton.jit`` function (see ``frontends.triton_trace.kernel``)."""
    from .triton_trace import triton_kernel as tk

    return tk(fn, grid=grid, args=args, num_warps=num_warps, num_stages=num_stages, name=name, help=help)


def _adapt(obj):
    """A Kernel for a ``@triton.jit`` function found where a kernel is named, else None."""
    if any(c.__name__ in ("JITFunction", "InterpretedFunction", "Autotuner", "Heuristics") for c in type(obj).__mro__):
        return triton_kernel(obj)
    return None


if _adapt not in _spec.KERNEL_ADAPTERS:
    _spec.KERNEL_ADAPTERS.append(_adapt)
