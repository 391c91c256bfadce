"""Tensor work the compiler duplicates across warpgroups.

Models: a wgmma covers 64 rows, so with 8 warps on a 64-row tile Triton splits the columns; when
that dot's result feeds another dot as its A operand from registers (flash's ``P V``, the
backward's ``dS K``), each warpgroup computes the first dot in full. The compiled loop's MMA
FLOPs over the tile program's scale the loop's tensor steps (1.5x for a 64x64 flash tile on 8
warps; 1.5-1.7x in the backward's loops).

Measured by: a chained-dot microbenchmark (``benchmarks/kernels/chain_dot.py``, flash's loop without
the softmax, ``data/h200/micro/val_chain_dot/``).

Effect: part of the compiler's view (docs/model.md, ablation "compiler view (registers, spills,
SASS)" off: median / p90 |error| +1.0 / +4.2 points on the recorded points, +0.8 / +2.0 held-out).
"""
from __future__ import annotations


def tensor_duplication(compiled, num_warps: int, loop_steps: list, unroll: int = 1) -> float:
    """How many times the compiled loops issue the tensor work of the tile program's loops (>= 1).

    Triton cannot split a 64-row dot over two warpgroups (a wgmma covers 64 rows), so with 8 warps on
    a 64-row tile the warpgroups split the columns; when that dot's result feeds another dot as
    its A operand from registers (flash's ``P V``, the backward's ``dS K``), each warpgroup needs
    whole rows and computes the first dot in full: the loop issues more MMA FLOPs than the tiles
    hold. Read from the compiled loop bodies' HGMMA/HMMA shapes (``loop_mma_flops``, per ``unroll``
    iterations); 1 when unknown."""
    from .steps import TensorStep

    per_warp = getattr(compiled, "loop_mma_flops", None)
    tile = sum(b.flops for s in loop_steps for b in s.body if isinstance(b, TensorStep))
    if not per_warp or not tile:
        return 1.0
    return max(1.0, per_warp * num_warps / unroll / tile)
