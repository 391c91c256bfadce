"""The L2 request coalescer: reads of the same lines by several SMs, in flight together, are merged
on their way to the L2 slices, so the slices read fewer sectors than the SMs receive.

Models: the n-th of a run of simultaneous requests for one tile costs the L2 channel
``n f(n) - (n - 1) f(n - 1)`` of its bytes, f = ``l2_coalesced_fraction`` by CTAs per SM, tile bytes
and sharers.

Measured by: ``benchmarks/micro_fidelity.py coalescek`` on the H200 (k CTAs stream the same
L2-resident region in phase; ncu's slice sectors against the bytes the SMs received;
``micro_coalescek.json``): two sharers at one CTA per SM read 0.57 of the sectors, 132 read 0.30.

Effect (docs/model.md, ablation "L2 request coalescer" off): median / p90 |error| +1.3 / +2.8 points
on the recorded points, +2.2 / +3.5 on the held-out points.
"""
from __future__ import annotations

from .curves import log2_lerp


def coalesced_fraction(table: dict, ctas_per_sm: float, tile_bytes: float, sharers: float) -> float:
    """The fraction of the sectors that ``sharers`` requests for the same tile at once (CTAs on
    different SMs in phase, ``tile_bytes`` each) make the L2 slices read, the rest merged on the way
    by the L2 request coalescer (``GPUConfig.l2_coalesced_fraction``): linear in log2 of the CTAs
    resident per SM, of the tile bytes and of the sharers between the measured ones, the end values
    past them. 1 with no table or one request."""
    if not table or sharers <= 1:
        return 1.0
    return log2_lerp({c: log2_lerp({tb: log2_lerp(curve, sharers) for tb, curve in by_tile.items()}, tile_bytes)
                       for c, by_tile in table.items()}, ctas_per_sm)


def merged_share(table: dict, ctas_per_sm: int, tile_bytes: float, n: int) -> float:
    """The share of its bytes the ``n``-th of a run of simultaneous requests for one tile makes the
    L2 slices read: what the run of n costs in all less what the first n - 1 cost
    (``coalesced_fraction``), within [0, 1]."""
    if n <= 1:
        return 1.0
    f = coalesced_fraction
    m = n * f(table, ctas_per_sm, tile_bytes, n) - (n - 1) * f(table, ctas_per_sm, tile_bytes, n - 1)
    return min(1.0, max(0.0, m))
