"""The HBM delivers short contiguous pieces more slowly than a stream.

Models: a DRAM read whose tile rows give contiguous pieces of ``piece`` bytes costs
``1 / hbm_piece_efficiency[piece]`` of channel time per missed byte.

Measured by: ``benchmarks/micro_fidelity.py dramchunk`` on the H200 (8 CTAs per SM reading 2.2 GB
once in pieces of 32 to 4096 bytes: 32-byte pieces at 54% of the streaming rate, 64-byte at 86%,
128 bytes and more at 99-100%).

Effect (docs/model.md, ablation "HBM piece efficiency" off): median / p90 |error| +1.0 / +4.7 points
on the recorded points, +1.1 / +2.8 on the held-out points.
"""
from __future__ import annotations

from ...hardware import GPUConfig
from .curves import log2_lerp


def hbm_piece_cost(piece_bytes: float, cfg: GPUConfig) -> float:
    """Times its streaming cost a DRAM read takes when the tile's rows give it contiguous pieces of
    ``piece_bytes`` (``GPUConfig.hbm_piece_efficiency``): 1 / the measured fraction, interpolated in
    log2 of the piece between the measured sizes; 1 past the largest (and with no table). Below
    the smallest measured piece, that piece's fraction (a 32-byte sector is the L2's fetch unit)."""
    table = cfg.hbm_piece_efficiency
    if not table or piece_bytes <= 0 or piece_bytes > max(table):
        return 1.0
    return 1.0 / min(1.0, log2_lerp(table, piece_bytes))
