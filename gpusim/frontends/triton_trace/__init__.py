"""Bring your own Triton kernel: trace an unmodified ``@triton.jit`` function into gpusim's IR
(``trace``), check it against Triton's interpreter (``reference``) and time it with resources
from compiling its own source (``compiled``). ``triton_kernel`` makes a gpusim Kernel of it."""
from .kernel import triton_kernel  # noqa: F401
from .trace import is_triton_function  # noqa: F401
