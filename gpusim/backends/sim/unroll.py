"""Iterations per compiled loop body: ptxas unrolls small loop bodies, so the compiled loop's counts
(issue, MUFU, spills, MMA FLOPs) stand for several of the tile program's iterations.

Models: the body's global-load bytes per thread over what the tiles load per iteration, at most
the body's MMA FLOPs over the tiles' where the loop has MMAs; a loop that loads nothing is measured
by its FP32-pipe instructions (``arithmetic_unroll``).

Measured by: the compiled SASS (4x for a 64x64x32 GEMM tile; 17x for ``benchmarks/kernels/spill_live.py``'s
loop of 1024 ``x * a + b`` iterations over 16 values, which read as 1 was predicted 15x too slow),
and the backward's dK/dV loop (read as 3x unrolled from its row copies, 20-45% too fast).

Effect: part of the compiler's view (docs/model.md, ablation "compiler view (registers, spills,
SASS)" off: median / p90 |error| +1.0 / +4.2 points on the recorded points, +0.8 / +2.0 held-out).
"""
from __future__ import annotations

import math

from ...dsl import ir


def unroll_factor(compiled, program: ir.Program, loop_steps: list) -> int:
    """Iterations of the tile program's loops that one compiled loop body holds (ptxas unrolls
    small loop bodies, e.g. 4x for a 64x64x32 GEMM tile): the body's global-load bytes per thread
    over the loads the tile program issues per iteration. The SASS counts of the loop (issue, MUFU,
    spills, MMA FLOPs) are divided by it. 1 when unknown. A loop that loads nothing is measured by
    its arithmetic instead (``arithmetic_unroll``).

    A body that copies a tile more than once is not unrolled: triton 3.6 stages the backward's
    row vectors (LSE, delta) with 16 predicated 8-byte copies per thread, 192 load bytes per
    thread where the tiles hold 66. So where the loop has MMAs, the factor is at most the
    body's MMA FLOPs over the tiles' (each iteration issues its MMAs at least once)."""
    from .steps import TensorStep

    body = getattr(compiled, "loop_load_bytes", None)
    tensors = {t.name: t for t in program.params}
    per_iter = sum(math.prod(ld.shape) * ir.DTYPE_BYTES[tensors[ld.tensor].dtype]
                   for s in loop_steps for ld in s.loads if ld.tensor in tensors)
    if not per_iter:
        return arithmetic_unroll(compiled, program) if body is not None else 1
    if not body:
        return 1
    unroll = max(1, round(body * 32 * program.num_warps / per_iter))
    mma = getattr(compiled, "loop_mma_flops", None)
    tile = sum(b.flops for s in loop_steps for b in s.body if isinstance(b, TensorStep))
    if mma and tile:
        unroll = min(unroll, max(1, math.floor(mma * program.num_warps / tile + 1e-9)))
    return unroll


_COMPARES = ("lt", "le", "gt", "ge", "eq", "ne")


def arithmetic_unroll(compiled, program: ir.Program) -> int:
    """The unroll factor of loops that load nothing (a compute-only loop, as in
    benchmarks/kernels/spill_live.py): the compiled bodies' FP32-pipe instructions (FFMA, FADD,
    FMNMX, FSETP, FSEL...) per thread over the tile program's float elementwise ops per thread per
    iteration, a multiply-add counted once (``analysis.fma_contractions``), a tanh, sigmoid, erf, sin
    or cos as the FP32-pipe instructions of its SASS (``ir.MATH_UNARY``). ptxas unrolls such a
    loop of 1024 iterations over 16 values 17 times (272 FFMA in the body; its counter steps by 17).
    1 when the bodies are unknown or the loops do no float arithmetic."""
    from ...dsl import analysis
    from .warp import op_class

    bodies = getattr(compiled, "loop_bodies", None)
    if not bodies:
        return 1
    sass = sum(1 for b in bodies for ins in b if op_class(ins.split("|", 1)[0]) == "fp32")
    fused = analysis.fma_contractions(program)
    ops = 0
    for loop in (op for op in program.body if isinstance(op, ir.Loop)):
        for op in ir.walk(loop.body):
            if isinstance(op, ir.Unary) and op.op in ir.MATH_UNARY:     # its SASS's FP32-pipe ops
                ops += op.out.numel * ir.MATH_UNARY[op.op][1]
                continue
            if isinstance(op, ir.Unary) and op.op in ir.SFU_UNARY:
                continue
            if (isinstance(op, (ir.Binary, ir.Unary, ir.Where)) and op.out.id not in fused
                    and (op.out.dtype in ir.FLOAT_DTYPES or getattr(op, "op", None) in _COMPARES)):
                ops += op.out.numel
    per_thread = ops / (32 * program.num_warps)
    return max(1, round(sass / per_thread)) if per_thread else 1
