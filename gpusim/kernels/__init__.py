"""Kernels: the built-in kernels, their typed parameters, workload builders and references."""
from .builtins import (ALL_PARAM_NAMES, DTYPES, KERNELS, KernelParamError, KernelSpec, Param, build,  # noqa: F401
                       elementwise_body,
                       next_pow2, resolve_params)
