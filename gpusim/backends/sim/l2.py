"""The shared L2: a set-associative LRU cache of 128-byte lines, in numba.

A tile access walks the tile's rows, touches each line once, and reports how many lines
hit and when the latest of the hit lines becomes ready (a line that another CTA's miss is
still filling is a hit that must wait for that fill: miss merging). The cache keeps no
data, only tags, so it models traffic and timing, never values. Set indices are hashed from the
line address (real L2s hash addresses too), so strided tiles spread over all sets.

Layout, for speed (a lookup is a few memory touches, the simulator's hottest loop): each way's
tag, LRU stamp, owner and ready time share one 32-byte record of ``meta`` (``(sets, ways, 4)``),
so a predicted hit touches one host cache line. A way predictor (``hint``: the way a line was
last found in, indexed by the line's low address bits) lets most hits check one tag instead of
the whole set; a wrong hint only costs the full search, so hits, misses and the LRU state are
those of a plain search.
"""
from __future__ import annotations

import numpy as np
from numba import njit

STAMP, OWNER, READY, TAG = 0, 1, 2, 3   # words of a way's ``meta`` record (READY holds float64 bits)
META = 4                                # words per record (32-byte aligned records)
HINT_BITS = 20                     # way-predictor entries: 1 Mi lines (128 MiB of addresses)
U = np.uint64                      # array indices in the numba kernels (see _access)


@njit(cache=True)
def _first_set(block, nsets):
    """The set of a 4 KiB block's first line (its 32 lines go to adjacent sets). Set indices are
    hashed, as real L2s hash addresses over slices and sets: with a plain modulo, power-of-two
    row pitches (an 8 KiB-pitch matrix column) would crowd into a few sets."""
    h = (block * 0x9E3779B1) & 0xFFFFFFFF
    return ((h ^ (h >> 15)) << 5) % nsets


# ``meta`` and ``meta_f``: the records, flat (way ``w`` of set ``s`` starts at (s * ways + w) * META).
# Every index is >= 0 and cast to unsigned (``U``): numba then skips its negative-index test on each
# access (~12% of the lookup's time).
@njit(cache=True)
def _access(hint, meta, meta_f, clock, miss_slots, base, nrows, pitch, row_bytes, line_shift, nsets, ways,
            now, who):
    misses = 0
    latest_ready = 0.0
    mask = (1 << line_shift) - 1
    if pitch == row_bytes and (row_bytes & mask) == 0 and (base & mask) == 0:
        row_bytes = nrows * row_bytes       # whole-line rows back to back: the same lines in the same order
        nrows = 1
    hmask = hint.shape[0] - 1
    block = -1
    set0 = 0
    clk = clock[0]
    sw = ways * META
    for r in range(nrows):
        start = base + r * pitch
        first = start >> line_shift
        last = (start + row_bytes - 1) >> line_shift
        for line in range(first, last + 1):
            if line >> 5 != block:
                block = line >> 5
                set0 = _first_set(block, nsets)
            s = set0 + (line & 31)
            if s >= nsets:
                s %= nsets
            sb = s * sw
            hk = line & hmask
            w = np.int64(hint[U(hk)])          # the predicted way
            if meta[U(sb + w * META + TAG)] != line:
                found = 0                   # the tags of a set are unique: the sum is the matching way + 1
                for v in range(ways):
                    found += (v + 1) * (meta[U(sb + v * META + TAG)] == line)
                w = found - 1               # -1: a miss
                if found:
                    hint[U(hk)] = w
            clk += 1
            if w >= 0:
                m = sb + w * META
                meta[U(m + STAMP)] = clk
                meta[U(m + OWNER)] = who
                rd = meta_f[U(m + READY)]
                latest_ready = rd if rd > latest_ready else latest_ready   # branch-free
            else:
                victim = 0
                oldest = meta[U(sb + STAMP)]
                for v in range(1, ways):
                    st = meta[U(sb + v * META + STAMP)]
                    if st < oldest:
                        oldest = st
                        victim = v
                hint[U(hk)] = victim
                m = sb + victim * META
                meta[U(m + TAG)] = line
                meta[U(m + STAMP)] = clk
                meta[U(m + OWNER)] = who
                meta_f[U(m + READY)] = now
                miss_slots[U(misses)] = m + READY          # sized by the caller for every line
                misses += 1
    hits = clk - clock[0] - misses         # one clock tick per line
    clock[0] = clk
    return hits, misses, latest_ready


@njit(cache=True)
def _set_ready(flat_f, miss_slots, n, t):
    for i in range(n):
        flat_f[miss_slots[i]] = t


_SPARE: dict = {}   # (sets, ways) -> (meta, hint) of a released cache: the next cache of that shape reuses them


class L2Cache:
    """Tags-only LRU cache; ``access`` returns (hit_lines, miss_lines, latest ready time of hit lines).

    ``release`` hands the cache's arrays to the next cache of the same shape (a fresh one starts
    from the same empty state either way): refilling mapped memory costs ~1 ms, while fresh pages
    cost the host up to ~30 ms of page faults per point."""

    def __init__(self, capacity_bytes: int, line_bytes: int = 128, ways: int = 16):
        self.line_bytes = int(line_bytes)
        self.line_shift = self.line_bytes.bit_length() - 1
        if 1 << self.line_shift != self.line_bytes:
            raise ValueError(f"L2 line size {line_bytes} B must be a power of two")
        self.ways = w = int(ways)
        self.nsets = max(1, int(capacity_bytes) // (self.line_bytes * self.ways))
        spare = _SPARE.pop((self.nsets, w), None)
        if spare is None:
            spare = (np.empty((self.nsets, w, META), dtype=np.int64),
                     np.empty(1 << HINT_BITS, dtype=np.uint8 if w <= 256 else np.int64))
        self.meta, self.hint = spare
        self.meta.fill(0)
        self.hint.fill(0)
        self.tags = self.meta[:, :, TAG]
        self.tags[:] = -1
        self.meta_f = self.meta.view(np.float64)       # the READY words, read as float64
        self.flat = self.meta.reshape(-1)
        self.flat_f = self.meta_f.reshape(-1)
        self.stamps = self.meta[:, :, STAMP]
        self.owner = self.meta[:, :, OWNER]           # who touched the line last (see keep_only)
        self.ready = self.meta_f[:, :, READY]
        self.clock = np.zeros(1, dtype=np.int64)
        self._miss_slots = np.zeros(1 << 16, dtype=np.int64)   # grown by ``access`` when a tile needs more
        self._pending = 0

    def release(self) -> None:
        """Done with this cache: its arrays go to the next cache of the same shape (do not use it after)."""
        _SPARE[(self.nsets, self.ways)] = (self.meta, self.hint)

    def snapshot(self) -> tuple:
        """The cache's whole state, for ``restore`` (a launch simulated again at another clock)."""
        return self.meta.copy(), self.hint.copy(), self.clock.copy()

    def restore(self, state: tuple) -> None:
        self.meta[...], self.hint[...], self.clock[...] = state
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
        r = _access(self.hint, self.flat, self.flat_f, self.clock, slots, base, nrows, pitch, row_bytes,
                    self.line_shift, self.nsets, self.ways, float(now), who)
        self._pending = r[1]
        return r

    def fill_done(self, t: float) -> None:
        """Mark the lines that the last ``access`` missed as ready at time ``t``."""
        if self._pending:
            _set_ready(self.flat_f, self._miss_slots, self._pending, float(t))
            self._pending = 0
