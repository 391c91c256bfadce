"""The state of one trace: the launch's tensors and grid, the sampled evaluation points, which
tensors the kernel reads and writes, and the pipelining depth loops get."""
from __future__ import annotations

from .errors import misuse
from .symbolic import Samples

_STACK: list = []


class Ctx:
    def __init__(self, tensors: dict, grid: tuple, num_stages: int):
        self.tensors = tensors          # parameter name -> ir.TensorArg
        self.grid = tuple(grid)
        self.samples = Samples(self.grid)
        self.num_stages = int(num_stages)
        self.loaded: list = []
        self.stored: list = []

    def __enter__(self):
        _STACK.append(self)
        return self

    def __exit__(self, *exc):
        _STACK.pop()


def ctx() -> Ctx:
    if not _STACK:
        raise misuse("Triton language functions can only run inside a kernel being traced")
    return _STACK[-1]
