"""Sizes and repetition counts of a calibration run: ``FULL`` and ``QUICK`` (``--quick``)."""
from __future__ import annotations

from dataclasses import dataclass

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Plan:
    """Sizes and repetition counts of one calibration run."""

    repeats: int                 # do_bench calls per headline number
    curve_repeats: int           # do_bench calls per curve point / tile shape
    rep_ms: int                  # do_bench rep (ms)
    warmup_ms: int
    hbm_buffer_bytes: int
    l2_sizes_mib: tuple
    l2_sweep_bytes: int          # bytes read per launch of the working-set sweep
    sm_load_configs: tuple       # (num_warps, BLOCK) of the few-CTA sweep
    tile_shapes: tuple           # (m, n, k, num_warps)
    tile_flops_per_cta: float    # FLOPs each CTA does per launch (sets the repeat count R)
    tile_rep_ms: int
    tile_budget_s: float         # stop the tile sweep after this long (shapes are ordered core first)
    hbm_latency_buffers: tuple   # bytes; the first gives hbm_latency_cycles
    l2_chase_nodes: int = 4096   # nodes 256 B apart of the L2-latency chase (hops: 2x and 8x this)
    hbm_chase_hops: tuple = (8192, 40960)
    fma_iters: int = 4096        # loop trips of fma_kernel (8 FMAs each)
    exp2_iters: int = 512
    sm_load_cta_bytes: int = 64 * MIB
    sm_load_buffer_bytes: int = 8 * MIB
    tf32_shapes: tuple = ((128, 128, 32, 8), (64, 64, 32, 4))   # first that runs gives tensor_flops_per_s.fp32


def _core_shapes(extra_k=(32, 64)):
    out = []
    for mn in (16, 32, 64, 128):
        for k in extra_k:
            out.append((mn, mn, k, 4))
            if mn >= 64:
                out.append((mn, mn, k, 8))
    out += [(64, 128, 64, 4), (128, 64, 64, 4), (128, 256, 64, 8), (256, 128, 64, 8)]
    return out


def _full_shapes():
    shapes = _core_shapes()
    for m in (16, 32, 64, 128):
        for n in (16, 32, 64, 128):
            for k in (16, 32, 64, 128):
                for nw in ((4, 8) if m >= 64 and n >= 64 else (4,)):
                    shapes.append((m, n, k, nw))
    return tuple(dict.fromkeys(shapes))


FULL = Plan(repeats=5, curve_repeats=3, rep_ms=100, warmup_ms=25, hbm_buffer_bytes=2 * GIB,
            l2_sizes_mib=(1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 128, 256, 512),
            l2_sweep_bytes=4 * GIB, sm_load_configs=((8, 8192), (16, 16384), (32, 16384)),
            tile_shapes=_full_shapes(), tile_flops_per_cta=4e9, tile_rep_ms=25, tile_budget_s=150.0,
            hbm_latency_buffers=(256 * MIB, 2 * GIB))
QUICK = Plan(repeats=3, curve_repeats=3, rep_ms=40, warmup_ms=10, hbm_buffer_bytes=1 * GIB,
             l2_sizes_mib=(1, 4, 16, 32, 48, 64, 96, 128, 512), l2_sweep_bytes=2 * GIB,
             sm_load_configs=((16, 16384),),
             tile_shapes=tuple(dict.fromkeys(_core_shapes((64,)) + [(128, 128, 32, 8)])),
             tile_flops_per_cta=2e9, tile_rep_ms=20, tile_budget_s=45.0, hbm_latency_buffers=(256 * MIB,))
