"""A tile's round trip grows with the L2 lines it asks for at once.

Models: a tile of R lines waits one request's latency plus ``request_latency_cycles[miss or hit][R]``.

Measured by: pointer chains on an idle H200 (``benchmarks/micro_fidelity.py sectorlines`` and
``sectorhits``: one CTA of 4 warps follows R independent chains; ``micro_round10d.json``,
``micro_round10e.json``): a miss hop takes 706 cycles at 1 line, 1092 at 64, 1561 at 256.

Effect (docs/model.md, ablation "request latency by lines" off): median / p90 |error| +0.7 / +5.3
points on the recorded points, +0.4 / +7.0 on the held-out points.
"""
from __future__ import annotations


def request_latency(table: dict, lines: float) -> float:
    """Extra cycles of a tile's round trip over one request's latency when it asks for ``lines``
    L2 lines at once (``GPUConfig.request_latency_cycles["miss"]`` or ``["hit"]``): linear between
    the measured line counts (from 0 extra at one line), the last slope past the largest; 0 with
    no table."""
    if not table or lines <= 1:
        return 0.0
    pts = sorted(table.items())
    if pts[0][0] > 1:
        pts.insert(0, (1, 0.0))
    for (n0, x0), (n1, x1) in zip(pts, pts[1:]):
        if lines <= n1:
            return x0 + (x1 - x0) * (lines - n0) / (n1 - n0)
    if len(pts) == 1:
        return pts[0][1]
    (n0, x0), (n1, x1) = pts[-2], pts[-1]
    return x1 + (x1 - x0) * (lines - n1) / (n1 - n0)
