"""The shared L2: a set-associative LRU cache of 128-byte lines, in numba.

A tile access walks the tile's rows, touches each line once, and reports how many lines
hit and when the latest of the hit lines becomes ready (a line that another CTA's miss is
still filling is a hit that must wait for that fill: miss merging). The cache keeps no
data, only tags, so it models traffic and timing, never values. Set indices are hashed from the
line address (real L2s hash addresses too), so strided tiles spread over all sets.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _access(tags, stamps, ready, owner, clock, miss_slots, base, nrows, pitch, row_bytes, line_bytes, nsets, ways, now,
            who):
    hits = 0
    misses = 0
    latest_ready = 0.0
    for r in range(nrows):
        start = base + r * pitch
        first = start // line_bytes
        last = (start + row_bytes - 1) // line_bytes
        for line in range(first, last + 1):
            # hashed set index, as real L2s hash addresses over slices and sets: with a plain modulo,
            # power-of-two row pitches (an 8 KiB-pitch matrix column) would crowd into a few sets.
            # Each 4 KiB block is hashed as a whole, so a tile row's lines stay in adjacent sets.
            h = ((line >> 5) * 0x9E3779B1) & 0xFFFFFFFF
            s = (((h ^ (h >> 15)) << 5) + (line & 31)) % nsets
            row = s * ways
            found = -1
            for w in range(ways):
                if tags[row + w] == line:
                    found = w
                    break
            clock[0] += 1
            if found >= 0:
                hits += 1
                stamps[row + found] = clock[0]
                owner[row + found] = who
                if ready[row + found] > latest_ready:
                    latest_ready = ready[row + found]
            else:
                victim = 0
                oldest = stamps[row]
                for w in range(1, ways):
                    if stamps[row + w] < oldest:
                        oldest = stamps[row + w]
                        victim = w
                tags[row + victim] = line
                stamps[row + victim] = clock[0]
                ready[row + victim] = now
                owner[row + victim] = who
                miss_slots[misses] = row + victim       # sized by the caller for every line
                misses += 1
    return hits, misses, latest_ready


@njit(cache=True)
def _set_ready(ready, miss_slots, n, t):
    for i in range(n):
        ready[miss_slots[i]] = t


class L2Cache:
    """Tags-only LRU cache; ``access`` returns (hit_lines, miss_lines, latest ready time of hit lines)."""

    def __init__(self, capacity_bytes: int, line_bytes: int = 128, ways: int = 16):
        self.line_bytes = int(line_bytes)
        self.ways = int(ways)
        self.nsets = max(1, int(capacity_bytes) // (self.line_bytes * self.ways))
        n = self.nsets * self.ways
        self.tags = np.full(n, -1, dtype=np.int64)
        self.stamps = np.zeros(n, dtype=np.int64)
        self.ready = np.zeros(n, dtype=np.float64)
        self.owner = np.zeros(n, dtype=np.int64)     # who touched the line last (see keep_only)
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
        most = int(nrows) * (-(-int(row_bytes) // self.line_bytes) + 1)     # lines the rows can touch
        if most > self._miss_slots.shape[0]:
            self._miss_slots = np.zeros(1 << (most - 1).bit_length(), dtype=np.int64)
        hits, misses, latest = _access(self.tags, self.stamps, self.ready, self.owner, self.clock, self._miss_slots,
                                       int(base), int(nrows), int(pitch), int(row_bytes), self.line_bytes, self.nsets,
                                       self.ways, float(now), int(who))
        self._pending = misses
        return hits, misses, latest

    def fill_done(self, t: float) -> None:
        """Mark the lines that the last ``access`` missed as ready at time ``t``."""
        if self._pending:
            _set_ready(self.ready, self._miss_slots, self._pending, float(t))
            self._pending = 0
