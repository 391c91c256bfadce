"""The shared L2: a set-associative LRU cache of 128-byte lines, in numba.

A tile access walks the tile's rows, touches each line once, and reports how many lines
hit and when the latest of the hit lines becomes ready (a line that another CTA's miss is
still filling is a hit that must wait for that fill: miss merging). The cache keeps no
data, only tags, so it models traffic and timing, never values. Set indices are hashed from the
line address (real L2s hash addresses too), so strided tiles spread over all sets.

Each set is one record of ``4 * ways`` 8-byte words (tags, LRU stamps, owners, ready times), so
a lookup touches one small stretch of memory.
"""
from __future__ import annotations

import numpy as np
from numba import njit

TAG, STAMP, OWNER, READY = 0, 1, 2, 3      # field order within a set's record, ``ways`` words each
FIELDS = 4


@njit(cache=True)
def _access(sets, sets_f, clock, miss_slots, base, nrows, pitch, row_bytes, line_shift, nsets, ways, now, who):
    hits = 0
    misses = 0
    latest_ready = 0.0
    mask = (1 << line_shift) - 1
    if pitch == row_bytes and (row_bytes & mask) == 0 and (base & mask) == 0:
        row_bytes = nrows * row_bytes       # whole-line rows back to back: the same lines in the same order
        nrows = 1
    o_st, o_ow, o_rd = STAMP * ways, OWNER * ways, READY * ways
    block = -1
    set0 = 0
    clk = clock[0]
    for r in range(nrows):
        start = base + r * pitch
        first = start >> line_shift
        last = (start + row_bytes - 1) >> line_shift
        for line in range(first, last + 1):
            # hashed set index, as real L2s hash addresses over slices and sets: with a plain modulo,
            # power-of-two row pitches (an 8 KiB-pitch matrix column) would crowd into a few sets.
            # Each 4 KiB block is hashed as a whole, so a tile row's lines stay in adjacent sets.
            if line >> 5 != block:
                block = line >> 5
                h = (block * 0x9E3779B1) & 0xFFFFFFFF
                set0 = ((h ^ (h >> 15)) << 5) % nsets
            s = set0 + (line & 31)
            if s >= nsets:
                s %= nsets
            rec = sets[s]
            found = -1
            for w in range(ways):
                if rec[w] == line:
                    found = w
                    break
            clk += 1
            if found >= 0:
                hits += 1
                rec[o_st + found] = clk
                rec[o_ow + found] = who
                rd = sets_f[s, o_rd + found]
                if rd > latest_ready:
                    latest_ready = rd
            else:
                victim = 0
                oldest = rec[o_st]
                for w in range(1, ways):
                    if rec[o_st + w] < oldest:
                        oldest = rec[o_st + w]
                        victim = w
                rec[victim] = line
                rec[o_st + victim] = clk
                rec[o_ow + victim] = who
                sets_f[s, o_rd + victim] = now
                miss_slots[misses] = s * FIELDS * ways + o_rd + victim   # sized by the caller for every line
                misses += 1
    clock[0] = clk
    return hits, misses, latest_ready


@njit(cache=True)
def _set_ready(flat_f, miss_slots, n, t):
    for i in range(n):
        flat_f[miss_slots[i]] = t


class L2Cache:
    """Tags-only LRU cache; ``access`` returns (hit_lines, miss_lines, latest ready time of hit lines)."""

    def __init__(self, capacity_bytes: int, line_bytes: int = 128, ways: int = 16):
        self.line_bytes = int(line_bytes)
        self.line_shift = self.line_bytes.bit_length() - 1
        if 1 << self.line_shift != self.line_bytes:
            raise ValueError(f"L2 line size {line_bytes} B must be a power of two")
        self.ways = w = int(ways)
        self.nsets = max(1, int(capacity_bytes) // (self.line_bytes * self.ways))
        self.sets = np.zeros((self.nsets, FIELDS * w), dtype=np.int64)
        self.sets_f = self.sets.view(np.float64)       # the READY words, read as float64
        self.flat_f = self.sets_f.reshape(-1)
        self.tags = self.sets[:, TAG * w:(TAG + 1) * w]
        self.stamps = self.sets[:, STAMP * w:(STAMP + 1) * w]
        self.owner = self.sets[:, OWNER * w:(OWNER + 1) * w]      # who touched the line last (see keep_only)
        self.ready = self.sets_f[:, READY * w:(READY + 1) * w]
        self.tags[:] = -1
        self.clock = np.zeros(1, dtype=np.int64)
        self._miss_slots = np.zeros(1 << 16, dtype=np.int64)   # grown by ``access`` when a tile needs more
        self._pending = 0

    @property
    def capacity_bytes(self) -> int:
        return self.nsets * self.ways * self.line_bytes

    def new_launch(self) -> None:
        """Every launch has its own clock starting at 0: data left by earlier launches is ready."""
        self.ready[:] = 0.0

    def keep_only(self, who: int) -> None:
        """Invalidate every line last touched by anyone but ``who``: what a skipped, sampled-out
        stretch of CTAs would have evicted, while lines the later CTAs re-used stay."""
        stale = self.owner != who
        self.tags[stale] = -1
        self.stamps[stale] = 0
        self.ready[stale] = 0.0

    def access(self, base: int, nrows: int, pitch: int, row_bytes: int, now: float, who: int = 0):
        slots = self._miss_slots
        most = nrows * ((row_bytes >> self.line_shift) + 2)      # lines the rows can touch
        if most > slots.shape[0]:
            slots = self._miss_slots = np.zeros(1 << (most - 1).bit_length(), dtype=np.int64)
        r = _access(self.sets, self.sets_f, self.clock, slots, base, nrows, pitch, row_bytes, self.line_shift,
                    self.nsets, self.ways, float(now), who)
        self._pending = r[1]
        return r

    def fill_done(self, t: float) -> None:
        """Mark the lines that the last ``access`` missed as ready at time ``t``."""
        if self._pending:
            _set_ready(self.flat_f, self._miss_slots, self._pending, float(t))
            self._pending = 0
