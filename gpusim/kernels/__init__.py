"""Kernels: the ``Kernel`` object (typed params, workload builder, float64 reference), the
built-in kernels, and the lookup of user kernels (``path/to/file.py:name``, ``module:name``).

Built-ins register themselves in ``KERNELS`` on import; the import order below is the order of
``KERNELS`` and of ``ALL_PARAM_NAMES`` (the CSV column order of parameters)."""
from .spec import (COMMON, DTYPES, KERNELS, POW2, Kernel, KernelParamError, Param, kernel, kernels_in_module,  # noqa: F401
                   load_kernel_file, next_pow2, register_kernel, resolve_kernel)
from . import attention, elementwise, matmul  # noqa: F401,E402  (register the built-ins, in this order)
from . import decode, backward, norms  # noqa: F401,E402  (the kernels of issue 8, after the first built-ins)
from . import gemv  # noqa: F401,E402  (decode-step projections, after those)
from .elementwise import elementwise_body  # noqa: F401,E402

KernelSpec = Kernel          # the former name, kept for callers
ALL_PARAM_NAMES = tuple(dict.fromkeys(p.name for k in KERNELS.values() for p in k.params))


def resolve_params(kernel, given: dict, base_dir=None) -> dict:
    """Defaults filled in and values checked for ``kernel`` (a name or a Kernel); an unknown
    parameter is a KernelParamError naming the kernel and the parameters it takes."""
    return resolve_kernel(kernel, base_dir).resolve(given)


def build(kernel, params: dict | None = None, base_dir=None):
    """The ``ir.Workload`` of ``kernel`` (a name or a Kernel) for ``params``."""
    return resolve_kernel(kernel, base_dir).build(params or {})
