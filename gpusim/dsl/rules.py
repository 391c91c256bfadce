"""The tile rules Triton enforces at compile time, checked on the IR (pure functions, no backend).

A program that breaks one cannot be compiled, so a simulated time for it would be an impossible
result: ``gpusim.api`` reports such a point ``infeasible`` with the message, and the Triton
lowering refuses it. Each message names the rule, the program and the offending shape.

Sources (Triton 3.x, ``triton/_utils.py`` and ``triton/language/semantic.py``):
- every block shape dimension is a power of two (``validate_block_shape``: "Shape element i must be
  a power of 2"; ``tl.arange``: "arange's range must be a power of 2");
- a block holds at most ``TRITON_MAX_TENSOR_NUMEL`` = 2**20 elements;
- ``tl.dot`` operands are at least 16 along every dimension. Triton 2.x asserted M, N, K >= 16;
  3.x pads small M and N on NVIDIA but still needs K >= 16 for 16-bit inputs. gpusim keeps the
  stricter rule for every dimension, as its lowering does (``toolchain/lower.py``), and
  its tensor-core cost assumes whole MMA tiles (m16n8k16 for 16-bit);
- ``tl.dot`` takes floating-point operands here (fp16, bf16, fp8e4m3, fp8e5m2, fp32); two 8-bit
  operands need K >= 32 (``min_dot_size`` in triton/backends/nvidia/compiler.py: (1, 1, 32) for
  8-bit inputs; the FP8 MMA instructions take k = 32);
- fp8 is a storage and dot-operand dtype: arithmetic that would compute in fp8 (an op on two tiles
  of the same fp8 dtype, or on one and a constant, and ``-``/``abs`` of one) is refused; GPUs have
  no fp8 ALU, convert first with ``.to("fp16")`` or ``.to("fp32")``;
- a loop step is positive.
"""
from __future__ import annotations

from . import ir

TRITON_MAX_TENSOR_NUMEL = 1 << 20     # triton/_utils.py
MIN_DOT_DIM = 16                      # see the module docstring
MIN_DOT_K_8BIT = 32                   # K of a dot of two 8-bit operands (see the module docstring)


class TileRuleError(ValueError):
    """A program breaks a tile rule that Triton enforces (the message names the rule)."""


def is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _values(op):
    for f in op.__dataclass_fields__:
        x = getattr(op, f)
        if isinstance(x, ir.Value):
            yield x
        elif isinstance(x, tuple):
            yield from (v for v in x if isinstance(v, ir.Value))


def violations(program: ir.Program) -> list:
    """Every tile-rule violation of ``program``, as one-line messages (empty when it compiles)."""
    out, seen = [], set()
    name = program.name
    for op in ir.walk(program.body):
        if isinstance(op, ir.Dot):
            (m, k), n = op.a.shape, op.b.shape[1]
            small = [f"{d} = {v}" for d, v in (("M", m), ("N", n), ("K", k)) if v < MIN_DOT_DIM]
            if small:
                out.append(f"{name}: dot of {op.a.shape} x {op.b.shape}: tl.dot needs every dimension "
                           f">= {MIN_DOT_DIM} ({', '.join(small)})")
            dts = {op.a.dtype, op.b.dtype} - set(ir.FLOAT_DTYPES)
            if dts:
                out.append(f"{name}: dot of {'/'.join(sorted(dts))} operands: tl.dot here takes fp16, bf16, "
                           f"fp8e4m3, fp8e5m2 or fp32")
            elif op.a.dtype in ir.FP8_DTYPES and op.b.dtype in ir.FP8_DTYPES and k < MIN_DOT_K_8BIT:
                out.append(f"{name}: dot of {op.a.dtype} operands with K = {k}: a dot of 8-bit operands "
                           f"needs K >= {MIN_DOT_K_8BIT}")
        fp8 = _fp8_arithmetic(op)
        if fp8:
            out.append(f"{name}: {fp8}: fp8 is a storage and dot-operand dtype (no fp8 arithmetic); "
                       f"convert with .to('fp16') or .to('fp32') first")
        if isinstance(op, ir.Loop) and op.step <= 0:
            out.append(f"{name}: loop step {op.step}: a loop step must be positive")
        if isinstance(op, ir.Iota) and not is_pow2(op.out.shape[op.axis]):
            out.append(f"{name}: tl.arange of length {op.out.shape[op.axis]}: the length must be a power of two")
        tiles = list(_values(op))
        if isinstance(op, (ir.Load, ir.Store)):
            tiles.append(op.out if isinstance(op, ir.Load) else op.value)
        for v in tiles:
            if v.id in seen or not v.shape:
                continue
            seen.add(v.id)
            if not all(is_pow2(s) for s in v.shape):
                what = f"load of {op.tensor.name}" if isinstance(op, ir.Load) else \
                    f"store to {op.tensor.name}" if isinstance(op, ir.Store) else "tile"
                out.append(f"{name}: {what} of shape {v.shape}: Triton block shapes must be powers of two")
            elif v.numel > TRITON_MAX_TENSOR_NUMEL:
                out.append(f"{name}: tile of shape {v.shape} has {v.numel} elements: Triton allows at most "
                           f"{TRITON_MAX_TENSOR_NUMEL} (2**20) per block")
    return out


def _fp8_arithmetic(op) -> str | None:
    """What of ``op`` would compute in fp8, or None."""
    if isinstance(op, ir.Binary) and op.op not in ir.LOGICAL_OPS:
        comp, _ = ir.binary_dtypes(op.op, op.a, op.b)
        if comp in ir.FP8_DTYPES:
            return f"{op.op} in {comp}"
    if isinstance(op, ir.Unary) and op.out.dtype in ir.FP8_DTYPES:
        return f"{op.op} of an {op.out.dtype} tile"
    return None


def check_program(program: ir.Program) -> None:
    """Raise ``TileRuleError`` with the first violation of ``program``."""
    v = violations(program)
    if v:
        raise TileRuleError(v[0])


def first_violation(workload: ir.Workload) -> str | None:
    """The first tile-rule violation of any launch of ``workload``, or None."""
    for launch in workload.launches:
        v = violations(launch.program)
        if v:
            return v[0]
    return None
