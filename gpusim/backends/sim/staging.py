"""How a tile that feeds a dot reaches shared memory: cp.async of aligned 16-byte pieces, narrower
copies, or (at one stage, or rows aligned to 2 bytes only) LDG into registers then STS.

Models three things the engine and the memory path charge:

* ``copies_async``: whether Triton can stage the tile with cp.async (``cp_async_min_bytes``); where
  it cannot, the load is not run ahead by the pipeliner. Measured by ``micro/val_stream_pad``
  (``benchmarks/kernels/stream_cols``): at pad 1, 1630 and 1634 cycles per iteration at 3 and 2
  stages, against 906 and 1551 at pad 2. Effect (docs/model.md, ablation "cp.async minimum width"
  off): +0.0 / +0.0 points median / p90 |error| on the recorded points, +0.0 / +0.5 on the held-out
  points (every second point).
* ``one_stage_serial`` / ``through_registers``: at one stage a staged tile loaded after a dot waits
  for the tiles before that dot (``steps.lower`` marks the loop's staged loads ``via_registers``,
  which ``memory`` fills at the register rate). Measured by ``benchmarks/kernels/chain_dot_stages.yaml`` (``micro/val_chain_dot_stages``): one
  stage takes 1.3-2.1x the time of two; predicted 1.0x without it (10-42% fast), -24% to +4% with it.
* ``staging_class`` / ``staging_cost``: a staged tile from unaligned rows costs
  ``staged_access_cost[class]`` times its aligned cost. Effect (ablation "misaligned staged tiles"
  off): +1.0 / +4.2 recorded, +0.7 / +7.2 held-out.
* ``register_rounds``: a tile staged through registers (LDG, then STS) arrives in as many round
  trips as the compiled loop loads into one register before storing it: ptxas keeps only a few
  registers for the copy, so each LDG into a register waits for the STS that empties it, which
  waits for the LDG before. The SASS of a bf16 GEMM over rows 1907 elements apart (64x128x32, 4
  warps, 2 stages): 32 ``LDG.E.U16`` per thread and iteration into 6 registers, in groups of three,
  each group stored before the registers are loaded again: 6 round trips per iteration. At K 4512
  it takes 490 us on an H100; predicted 103 us with one round trip, 513 us with six. Charged at
  two stages or more, to the tiles cp.async cannot copy (``pipeline.register_staged``); at one
  stage, where every staged tile goes through registers, ``one_stage_serial`` orders them instead (its K and V reuse the same registers, so counting
  rounds there charged the same wait twice: decode's median error grew from 7% to 28%).
  Effect, on the recorded points with such a tile (``benchmarks/sim_points.py --replace``): 208
  H100 points, median / p90 |error| 25.9 / 65.7% -> 19.5 / 50.8%; the 99 whose loop loads a
  register more than once (90 GEMMs, 9 split-K GEMVs) 32 -> 18% (GEMMs, signed -32 -> -10%) and
  31 -> 16% (GEMVs); 14 such H200 GEMMs 20 -> 7%; ``micro/val_stage_dot`` at pad 1, 4 warps,
  one CTA per SM: -41% -> +1%.
"""
from __future__ import annotations

from ...dsl import ir
from ...hardware import GPUConfig
from .access import VECTOR_BYTES, vector_width


def copies_async(tensor: ir.TensorArg, tile_shape: tuple, cfg: GPUConfig) -> bool:
    """Whether Triton stages a ``tile_shape`` tile of ``tensor`` into shared memory with cp.async
    (LDGSTS). cp.async moves 4, 8 or 16 bytes per thread (``cfg.cp_async_min_bytes``); where Triton
    can prove the rows aligned only to 2 bytes (an odd fp16 pitch) it loads the tile into registers
    (2-byte LDG) and stores it to shared memory (STS), and its pipeliner does not run that load
    ahead: ``stream_pad`` (pad 1) takes the same time at 2 and 3 stages, and its SASS has LDG + STS
    where pad 2 has LDGSTS."""
    return vector_width(tensor, tile_shape) * ir.DTYPE_BYTES[tensor.dtype] >= cfg.cp_async_min_bytes


def one_stage_serial(loop) -> tuple | None:
    """At ``num_stages`` 1 Triton does not copy with cp.async: each tile that feeds a dot is loaded
    into registers (LDG), stored to shared memory (STS), fenced (MEMBAR) and barriered before the
    dot reads it, in program order. A staged tile whose load follows a dot in the loop body (flash's
    V after ``Q K^T``) is therefore requested only after the tiles before that dot have arrived and
    been stored: its round trip starts when theirs ends, overlapping only the dot in between. The
    SASS of flash's loop at one stage: LDG K, STS K, MEMBAR, BAR, HGMMA (with V's LDGs among
    them), STS V, MEMBAR, BAR, HGMMA; at two stages every LDGSTS is issued together. Measured on its
    own by benchmarks/kernels/chain_dot_stages.yaml (micro/val_chain_dot_stages: one stage 1.3-2.1x
    the time of two). Returns (idx of the staged loads before the first dot, idx of those after it),
    or None when the loop has no staged load after a dot (a GEMM's A and B feed one dot)."""
    first = tuple(ld.idx for ld in loop.loads if ld.sram and not ld.after_dot)
    later = tuple(ld.idx for ld in loop.loads if ld.sram and ld.after_dot)
    return (first, later) if first and later else None


def through_registers(serial: tuple, ready: dict, now: float) -> dict:
    """``ready`` (load idx -> ready time, requested at ``now``) with each later staged tile of a
    one-stage loop (``serial``, from ``one_stage_serial``) requested only once the earlier ones have
    arrived: its round trip starts when theirs ends."""
    first, later = serial
    t = max((ready[i] for i in first if i in ready), default=None)
    if t is None:
        return ready
    for i in later:
        if i in ready:
            ready[i] = t + (ready[i] - now)
    return ready


def register_rounds(body: tuple, unroll: int = 1) -> float:
    """Round trips per iteration of the tiles a compiled loop ``body`` (``toolchain/sass_deps``
    form, ``unroll`` iterations) stages through registers: the most ``LDG`` writes to one register
    whose value an ``STS`` stores, per iteration; 1 when it stages none that way."""
    loads: dict = {}
    stored = set()
    for ins in body:
        op, dst, src = (ins.split("|") + ["", ""])[:3]
        name = op.split(".", 1)[0]
        if name == "LDG":
            for r in dst.split():
                loads[r] = loads.get(r, 0) + 1
        elif name == "STS":
            stored.update(r for r in src.split() if r in loads)
    n = max((loads[r] for r in stored), default=0)
    return max(1.0, n / max(1, unroll))


def staging_class(tensor: ir.TensorArg, tile_shape: tuple, width: int, line_bytes: int = 128) -> str | None:
    """How a ``tile_shape`` tile staged into shared memory from ``tensor`` at ``width`` elements per
    access departs from aligned 16-byte copies of whole L2 lines: "8", "4" or "2" (the access bytes
    Triton can prove aligned; an odd pitch goes through 2-byte loads), "line" (16-byte accesses to
    part of each row, rows not a multiple of ``line_bytes`` apart, so most rows straddle an extra
    line; a tile of whole rows is one contiguous block), or None (aligned)."""
    es = ir.DTYPE_BYTES[tensor.dtype]
    wb = width * es
    if wb < VECTOR_BYTES:
        return "8" if wb >= 8 else "4" if wb >= 4 else "2"
    last = int(tensor.shape[-1])
    if len(tensor.shape) > 1 and (last * es) % line_bytes and int(tile_shape[-1]) < last:
        return "line"
    return None


def staging_cost(tensor: ir.TensorArg, tile_shape: tuple, width: int, cfg: GPUConfig) -> float:
    """Times its aligned cost a staged tile from ``tensor`` takes (``GPUConfig.staged_access_cost``)."""
    c = staging_class(tensor, tile_shape, width, cfg.l2_line_bytes)
    return cfg.staged_access_cost.get(c, 1.0) if c else 1.0
