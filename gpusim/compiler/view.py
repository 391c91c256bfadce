"""The compiler's view of a program: what the compiler decided for it at one grid on one GPU
architecture -- registers per thread, spills, and, when compiled, the SASS of each loop body (its
instruction mix, unroll factor and dependencies; ``toolchain/compile.py``'s
``CompiledResources``). It comes from a named source:

- ``triton X.Y.Z``: Triton's own compiler at that version, for the config's ``compute_capability``
  (no GPU needed), read back from the cubin;
- ``estimate``: the analytic estimate of ``registers.py`` (the program's Triton layouts and
  liveness), used where triton is not installed, the mode says so, or a program does not compile.

``GPUSIM_RESOURCES=auto|compiled|estimated`` chooses (``auto``: compiled where triton can compile
here). ``view_name`` resolves the mode for a config to the source's name, which goes into every
point's cache key, result row and printed table, so a result computed with one view is never
served to a run with another. The timing model receives a ``CompilerView`` and never calls a
toolchain itself.

Effect (docs/model.md, ablation "compiler view (registers, spills, SASS)" off, i.e. the estimate
instead of the compiled view): median / p90 |error| +1.0 / +4.2 points on the recorded points,
+0.8 / +2.0 on the held-out points.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..dsl import ir
from ..hardware import ConfigError, GPUConfig
from . import registers

RESOURCES_ENV = "GPUSIM_RESOURCES"
RESOURCE_MODES = ("auto", "compiled", "estimated")
ESTIMATE = "estimate"


def resources_mode(mode: str | None = None) -> str:
    """``mode``, else ``$GPUSIM_RESOURCES``, else auto (compiled when triton can compile here)."""
    m = mode or os.environ.get(RESOURCES_ENV) or "auto"
    if m not in RESOURCE_MODES:   # a ConfigError: the command line prints it as one line, exit code 2
        raise ConfigError(f"{RESOURCES_ENV}={m!r}: allowed values are {', '.join(RESOURCE_MODES)}")
    return m


def view_name(cfg: GPUConfig | None = None, mode: str | None = None) -> str:
    """The name of the view a simulation on ``cfg`` uses: ``triton X.Y.Z`` or ``estimate``.
    ``auto`` resolves here, by what is installed, so a cache filled without triton is never served
    after triton is installed (or upgraded), and the other way round."""
    m = resources_mode(mode)
    if m == "estimated" or (cfg is not None and cfg.compute_capability is None):
        return ESTIMATE
    from ..toolchain import compile as tc    # lazy: triton is optional

    if not tc.available():
        return ESTIMATE
    return f"triton {tc.triton_version()}"


@dataclass(frozen=True)
class CompilerView:
    """What the compiler decided for one program at one grid. ``registers_per_thread`` is the
    compiler's count (or the estimate), before the config's per-thread cap; ``compiled`` is the
    ``CompiledResources`` when Triton compiled it (spill bytes, SASS mix), else None."""

    source: str
    registers_per_thread: int
    compiled: object = None

    @property
    def resources(self) -> str:
        """``compiled`` or ``estimated``: the older name of the source's kind (results.csv)."""
        return "estimated" if self.compiled is None else "compiled"

    def spills(self, cfg: GPUConfig) -> bool:
        """Whether the kernel keeps values in local memory on ``cfg``: ptxas says so when compiled;
        estimated, when it needs more registers than a thread may have."""
        if self.compiled is not None:
            return bool(self.compiled.spills)
        return self.registers_per_thread > cfg.max_registers_per_thread


def compiled(program: ir.Program, cfg: GPUConfig, grid=None, mode: str | None = None):
    """Triton's ``CompiledResources`` for ``program`` on ``cfg``'s architecture, or None where the
    mode says estimated, or (auto) triton is missing, the config names no compute capability or
    the program does not compile. ``mode="compiled"`` raises instead of falling back."""
    m = resources_mode(mode)
    if m == "estimated":
        return None
    from ..toolchain import compile as tc    # lazy: triton is optional

    arch = cfg.compute_capability
    if arch is None or not tc.available():
        if m == "compiled":
            why = "triton is not installed" if arch is not None else f"{cfg.name} has no compute_capability"
            raise RuntimeError(f"{RESOURCES_ENV}=compiled but {why}; use {RESOURCES_ENV}=estimated")
        return None
    try:
        own = program.meta.get("compile")      # a traced user kernel compiles its own source
        return own(arch) if own is not None else tc.compile_program(program, grid, arch)
    except tc.CompileError:
        if m == "compiled":
            raise
        return None


def view_of(program: ir.Program, cfg: GPUConfig, grid=None, mode: str | None = None) -> CompilerView:
    """The compiler's view of ``program`` launched on ``grid`` on ``cfg``: compiled by Triton where
    the mode and the machine allow, else the analytic estimate."""
    comp = compiled(program, cfg, grid, mode)
    if comp is not None:
        return CompilerView(f"triton {comp.triton_version}", comp.registers_per_thread, comp)
    return CompilerView(ESTIMATE, registers.estimate(program, cfg.compute_capability or 90))
