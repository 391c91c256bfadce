"""The data a sampled launch's skipped CTAs touch: first touches are counted, not extrapolated.

A sampled launch (``sampling.py``) simulates its first and last waves and extrapolates the traffic
of the CTAs in between from a window of the simulated ones. DRAM reads are first touches of data
the L2 does not hold, and they are not spread evenly over the CTAs: the first CTA of an attention
head to ask for a K/V tile reads it from the DRAM and the head's other CTAs hit in the L2. A GQA
head's K/V is shared by 8 x 64 CTAs (h200, 32 heads, 4 K/V heads, N 8192, causal), so a window
that holds no head's first touch extrapolated 2-4% fewer DRAM bytes than reading each input once,
and a window that holds one, more.

Here the tiles every CTA loads and stores are worked out from the program, with the tile bounds the
memory path uses (``analysis.tile_bytes_in_bounds``), vectorised over the CTAs. The 32-byte
sectors that only the skipped CTAs load, that no simulated CTA touched and that the L2 did not
hold when the launch began, cross the DRAM at least once in the skipped middle: its DRAM reads are
at least those (``skipped_traffic``). Stores are written through, so the middle's DRAM writes are
its stores' bytes, counted exactly.
"""
from __future__ import annotations

import numpy as np

from ...dsl import ir
from .l2 import MASK_SHIFT, SECTOR_SHIFT
from .steps import Issue, LoopStep, StoreStep

_NP = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "floordiv": np.floor_divide,
       "min": np.minimum, "max": np.maximum}
MAX_ITERATIONS = 1 << 14     # a loop load with no fixed stride is enumerated up to this many trips
MAX_ROWS = 1 << 24           # rows (or strips) a union may expand to before it is given up


class Unsupported(Exception):
    """A load or store whose tiles this module cannot enumerate (no floor is taken for its tensor)."""


def _eval(e: ir.Expr, pid: tuple, lv: dict):
    """``ir.eval_expr`` over arrays of program ids (and loop variables): an int64 array or an int."""
    op = e.op
    if op == "const":
        return e.args[0]
    if op == "pid":
        return pid[e.args[0]]
    if op == "loopvar":
        if e.args[0] not in lv:
            raise Unsupported("a loop variable of a nested loop")
        return lv[e.args[0]]
    return _NP[op](_eval(e.args[0], pid, lv), _eval(e.args[1], pid, lv))


def _pids(ctas: np.ndarray, grid: tuple) -> tuple:
    gx, gy, _ = grid
    return ctas % gx, (ctas // gx) % gy, ctas // (gx * gy)


def _tiles(t: ir.TensorArg, offs: list, shape: tuple, n: int) -> np.ndarray:
    """The part inside the tensor of ``n`` tiles at ``offs`` (arrays or ints), as
    ``analysis.tile_bytes_in_bounds`` finds it: rectangles [first row, end row, first byte, end
    byte) of the tensor seen as rows of its last dim (one row per leading index)."""
    dims, lead, es = t.shape, len(t.shape) - len(shape), ir.DTYPE_BYTES[t.dtype]
    if len(shape) > 2 or len(offs) != len(dims):
        raise Unsupported(f"a {len(shape)}-d tile")
    ok = np.ones(n, dtype=bool)
    flat = np.zeros(n, dtype=np.int64)
    rows = np.ones(n, dtype=np.int64)
    width = None
    for d, o in enumerate(offs):
        o = np.broadcast_to(np.asarray(o, dtype=np.int64), (n,))
        if d < lead:
            ok &= (o >= 0) & (o < dims[d])
            lo = o
        else:
            lo, hi = np.maximum(o, 0), np.minimum(o + shape[d - lead], dims[d])
            ok &= hi > lo
            if d == len(dims) - 1:
                width = hi - lo
            elif len(shape) == 2:
                rows = hi - lo
        flat = flat * dims[d] + lo
    row0, col = np.divmod(flat[ok], dims[-1])
    return np.stack([row0, row0 + rows[ok], col * es, (col + width[ok]) * es], axis=1)


def _loop_tiles(t, offsets, shape, d: LoopStep, pid, n: int) -> list:
    """The byte intervals of a loop's load (or store) over every iteration of ``n`` CTAs."""
    start, end = _eval(d.start, pid, {}), _eval(d.end, pid, {})
    trips = np.maximum(0, -(-(np.asarray(end) - start) // d.step)) * np.ones(n, dtype=np.int64)
    if not trips.any():
        return []
    at = lambda i: [np.broadcast_to(np.asarray(_eval(e, pid, {d.var: start + i * d.step}), dtype=np.int64), (n,))
                    for e in offsets]
    o0, o1, last = at(0), at(1), at(trips - 1)
    delta = [b - a for a, b in zip(o0, o1)]
    affine = all(((a + (trips - 1) * dl) == z)[trips > 0].all() for a, dl, z in zip(o0, delta, last))
    lead = len(offsets) - len(shape)
    if affine:
        for ax in range(len(shape)):
            if all((dl == (shape[ax] if k == lead + ax else 0)).all() for k, dl in enumerate(delta)):
                # consecutive tiles abut along ``ax``: the loop covers one tile ``trips`` times as long
                return _stretched(t, o0, shape, ax, trips)
    if int(trips.max()) > MAX_ITERATIONS:
        raise Unsupported("a long loop load with no fixed stride")
    out = []
    for i in range(int(trips.max())):
        act = trips > i
        out.append(_tiles(t, [o[act] for o in at(i)], shape, int(act.sum())))
    return out


def _stretched(t, offs, shape, ax, trips) -> list:
    """Tiles ``trips`` times as long along tile axis ``ax`` (trips differ per CTA: grouped)."""
    out = []
    for k in np.unique(trips[trips > 0]):
        sel = trips == k
        s = list(shape)
        s[ax] *= int(k)
        out.append(_tiles(t, [o[sel] for o in offs], tuple(s), int(sel.sum())))
    return out


def _touches(steps, grid, tensors, ctas: np.ndarray) -> tuple:
    """({tensor: [byte intervals loaded]}, {tensor: [byte intervals stored]}) by the CTAs ``ctas``;
    tensors whose tiles cannot be enumerated map to None."""
    loads, stores = {}, {}
    pid, n = _pids(ctas, grid), len(ctas)

    def add(where, name, fn):
        if where.get(name, ()) is None:
            return
        try:
            where.setdefault(name, []).extend(fn())
        except Unsupported:
            where[name] = None

    for s in steps:
        if isinstance(s, Issue):
            ld = s.load
            add(loads, ld.tensor, lambda: [_tiles(tensors[ld.tensor], [_eval(e, pid, {}) for e in ld.offsets],
                                                  ld.shape, n)])
        elif isinstance(s, StoreStep):
            op = s.op
            add(stores, op.tensor.name, lambda: [_tiles(tensors[op.tensor.name], [_eval(e, pid, {}) for e in op.offsets],
                                                        op.value.shape, n)])
        elif isinstance(s, LoopStep):
            for ld in s.loads:
                add(loads, ld.tensor, lambda: _loop_tiles(tensors[ld.tensor], ld.offsets, ld.shape, s, pid, n))
            for b in s.body:
                if isinstance(b, StoreStep):
                    op = b.op
                    add(stores, op.tensor.name,
                        lambda: _loop_tiles(tensors[op.tensor.name], op.offsets, op.value.shape, s, pid, n))
    return loads, stores


def _rects(runs: list) -> np.ndarray:
    return np.concatenate(runs) if runs else np.zeros((0, 4), dtype=np.int64)


def stored_bytes(runs: list) -> int:
    """The bytes of every tile in ``runs`` (tiles stored twice count twice)."""
    r = _rects(runs)
    return int(((r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2])).sum())


def covered(rects: np.ndarray, pitch: int) -> int:
    """The 32-byte sectors the rectangles [row, end row, byte, end byte) of rows ``pitch`` bytes
    apart cover together. Columns are cut at every rectangle's edges; in each strip the rows of
    the rectangles that span it are merged as intervals."""
    if len(rects) == 0:
        return 0
    if pitch % (1 << SECTOR_SHIFT):      # sectors straddle rows: one long row of bytes
        if int((rects[:, 1] - rects[:, 0]).sum()) > MAX_ROWS:
            raise Unsupported("too many rows of an odd pitch")
        r0, r1 = rects[:, 0], rects[:, 1]
        k = np.arange(int((r1 - r0).sum())) - np.repeat(np.cumsum(r1 - r0) - (r1 - r0), r1 - r0)
        start = (np.repeat(r0, r1 - r0) + k) * pitch
        rects = np.stack([np.zeros_like(start), np.ones_like(start), start + np.repeat(rects[:, 2], r1 - r0),
                          start + np.repeat(rects[:, 3], r1 - r0)], axis=1)
    c0, c1 = rects[:, 2] >> SECTOR_SHIFT, ((rects[:, 3] - 1) >> SECTOR_SHIFT) + 1
    cuts = np.unique(np.concatenate([c0, c1]))
    s0, s1 = np.searchsorted(cuts, c0), np.searchsorted(cuts, c1)
    per = s1 - s0
    if int(per.sum()) > MAX_ROWS:
        raise Unsupported("too many column strips")
    seg = np.repeat(s0, per) + (np.arange(int(per.sum())) - np.repeat(np.cumsum(per) - per, per))
    span = int(rects[:, 1].max()) + 1               # strips apart on one line of rows
    a, b = np.repeat(rects[:, 0], per) + seg * span, np.repeat(rects[:, 1], per) + seg * span
    order = np.argsort(a, kind="stable")
    a, b, seg = a[order], b[order], seg[order]
    before = np.concatenate(([a[0]], np.maximum.accumulate(b)[:-1]))   # the furthest end so far
    rows = np.maximum(0, b - np.maximum(a, before))
    return int((rows * (cuts[seg + 1] - cuts[seg])).sum())


def resident_bytes(l2, addr: dict, tensors: dict) -> dict:
    """Bytes of each tensor (by parameter name) whose sectors the L2 holds now."""
    tags = l2.tags.reshape(-1)
    live = tags >= 0
    if not live.any():
        return {}
    lines = tags[live]
    masks = (l2.owner.reshape(-1)[live] >> MASK_SHIFT).astype(np.int64)
    count = sum((masks >> i) & 1 for i in range(l2.sectors_per_line))
    at = lines << l2.line_shift
    out = {}
    for p, t in tensors.items():
        lo = addr[p]
        sel = (at >= lo) & (at < lo + t.nbytes)
        if sel.any():
            out[p] = int(count[sel].sum()) << SECTOR_SHIFT
    return out


def skipped_traffic(steps, grid: tuple, tensors: dict, simulated: np.ndarray, skipped: np.ndarray,
                    resident: dict) -> tuple:
    """(the fewest DRAM bytes the ``skipped`` CTAs can read, the bytes they store) of a launch whose
    ``simulated`` CTAs ran; ``resident``: the L2's bytes of each tensor when the launch began
    (``resident_bytes``). Tensors whose tiles cannot be enumerated add nothing to the first; a
    store that cannot be enumerated makes the second None."""
    sim_l, sim_s = _touches(steps, grid, tensors, simulated)
    mid_l, mid_s = _touches(steps, grid, tensors, skipped)
    reads = 0
    for p, runs in mid_l.items():
        if runs is None or sim_l.get(p, ()) is None or sim_s.get(p, ()) is None or mid_s.get(p, ()) is None:
            continue
        # touched earlier: by a simulated CTA's load or store, or a skipped CTA's store
        pitch = tensors[p].shape[-1] * ir.DTYPE_BYTES[tensors[p].dtype]
        seen = _rects((sim_l.get(p) or []) + (sim_s.get(p) or []) + (mid_s.get(p) or []))
        try:
            only = covered(np.concatenate([seen, _rects(runs)]), pitch) - covered(seen, pitch)
        except Unsupported:
            continue
        reads += max(0, (only << SECTOR_SHIFT) - resident.get(p, 0))
    if any(v is None for v in mid_s.values()):
        return reads, None
    return reads, sum(stored_bytes(runs) for runs in mid_s.values())
