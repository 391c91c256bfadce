"""The shared L2: a set-associative LRU cache of sectored lines (128-byte lines of four 32-byte
sectors on the H100/H200), in numba.

A tile access walks the tile's rows, touches each line once, and reports how many lines hit,
how many missed, and when the latest of the lines it found becomes ready (a line that another
CTA's miss is still filling is a hit that must wait for that fill: miss merging). The cache keeps
no data, only tags, so it models traffic and timing, never values. Set indices are hashed from the
line address (real L2s hash addresses too), so strided tiles spread over all sets.

Sectors: a line's tag covers the whole line, but a miss fetches only the 32-byte sectors the
request asks for, and each cached line records which of its sectors are present. A request that
finds the tag but not all the sectors it needs misses those sectors (and only those cost DRAM
bytes). Measured on an H200 (``data/h200/micro/ncu_probe_round8.json``, the
``stream_cols`` kernel, which reads the two 64-byte halves of each line in consecutive loop
iterations): 1,032 L2 sector lookup hits out of 4.33 M sector lookups
(``lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum`` / ``_lookup_miss.sum``), and DRAM reads of
4.33 M sectors (``dram__sectors_read.sum``, 138 MB), the bytes asked for. So the second half of a
line is a miss, not a hit, and DRAM traffic is counted per missed sector.

Fetch blocks: a miss fetches the aligned block of ``fetch_bytes`` around each missed sector (64 on
the H200: a 32-byte miss brings its neighbour sector too). ncu on the ``stream_cols`` kernel at
32-byte tile rows, which reads the four sectors of each line in four consecutive iterations
(``data/h200/micro/ncu_probe_round9.json``): 4,096 of 8,208 sector lookups hit, every
second one, while at 64-byte rows none do, and DRAM reads stay equal to the bytes asked for (the
neighbour is used). Pointer chains over the four sectors of each line in turn
(``micro_round10b.json`` sectorpitch "sequential") take the mean of a miss and an L2 hit per hop.
Stores allocate only the sectors they write.

Layout, for speed (a lookup is a few memory touches, the simulator's hottest loop): each way's
tag, LRU stamp, owner and ready time share one 32-byte record of ``meta`` (``(sets, ways, 4)``),
so a predicted hit touches one host cache line. The sector mask (one bit per 32-byte sector, up to
8 for 256-byte lines) lives in the high bits of the OWNER word, above the owner id (``who``, a
small non-negative int): ``OWNER = who | mask << MASK_SHIFT``; readers of the owner mask it with
``WHO_MASK``. A way predictor (``hint``: the way a line was last found in, indexed by the line's
low address bits) lets most hits check one tag instead of the whole set; a wrong hint only costs
the full search, so hits, misses and the LRU state are those of a plain search.

Effect (docs/model.md, ablation "L2 fetch block (sector pairs)" off): +0.0 / +0.0 points median /
p90 |error| on the recorded points, +0.0 / -0.2 on the held-out points (every second point): the
fetch block is there for the hit-rate counter (0 instead of the measured 50% without it), not
for time.
"""
from __future__ import annotations

import numpy as np
from numba import njit

STAMP, OWNER, READY, TAG = 0, 1, 2, 3   # words of a way's ``meta`` record (READY holds float64 bits)
META = 4                                # words per record (32-byte aligned records)
HINT_BITS = 20                     # way-predictor entries: 1 Mi lines (128 MiB of addresses)
U = np.uint64                      # array indices in the numba kernels (see _access)
SECTOR_SHIFT = 5                   # 32-byte sectors
MASK_SHIFT = 48                    # the OWNER word: owner id in bits 0..47, sector mask in bits 48..55
WHO_MASK = (1 << MASK_SHIFT) - 1


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
#
# Per line, the request needs the sectors its row's bytes [start, start + row_bytes) cover ("need":
# all sectors for the lines inside the row, a tail of the first line's, a head of the last's).
# Outcomes: tag present with every needed sector -> a hit (which waits for the line's READY time);
# tag present but some needed sectors absent -> a miss of those sectors' fetch blocks (``group``
# sectors, less those present: they join the mask and the line's READY becomes the new fill's); tag
# absent -> the LRU way is taken with only the needed sectors' fetch blocks. Returns (hit lines,
# missed lines, latest READY of the lines found, sectors fetched, sectors needed, needed sectors
# that were absent).
@njit(cache=True)
def _access(hint, meta, meta_f, clock, miss_slots, base, nrows, pitch, row_bytes, line_shift, nsets, ways,
            now, who, group):
    misses, msec, nsec, asked, latest_ready = 0, 0, 0, 0, 0.0  # missed lines, sectors fetched, needed, missed
    mask = (1 << line_shift) - 1
    if pitch == row_bytes and (row_bytes & mask) == 0 and (base & mask) == 0:
        row_bytes, nrows = nrows * row_bytes, 1     # whole-line rows back to back: the same lines in order
    smask = (1 << (line_shift - SECTOR_SHIFT)) - 1      # sectors per line - 1 (a sector's index in its line)
    full = (2 << smask) - 1                 # every sector of a line
    block, set0 = -1, 0                     # the 4 KiB block of the last line and its first set
    clk0 = clk = clock[0]                   # one clock tick per line
    hmask, sw = hint.shape[0] - 1, ways * META
    need_first, need_last, row_sectors = _row_sectors(base, row_bytes, smask)
    same = (pitch & mask) == 0              # rows a whole number of lines apart need the same sectors
    for r in range(nrows):
        start = base + r * pitch
        if not same:
            need_first, need_last, row_sectors = _row_sectors(start, row_bytes, smask)
        nsec += row_sectors
        first, last = start >> line_shift, (start + row_bytes - 1) >> line_shift
        for line in range(first, last + 1):
            need = need_first if line == first else full
            if line == last:
                need &= need_last
            if line >> 5 != block:
                block = line >> 5
                set0 = _first_set(block, nsets)
            s = set0 + (line & 31)
            sb = (s % nsets if s >= nsets else s) * sw
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
                owner = meta[U(m + OWNER)]
                have = owner >> MASK_SHIFT
                latest_ready = max(latest_ready, meta_f[U(m + READY)])    # ready times are never NaN
                if need & ~have == 0:       # a hit (the common case, without _fetch): new owner, same sectors
                    meta[U(m + OWNER)] = who | (owner - (owner & WHO_MASK))
                    continue
                need, lack = _fetch(have, need, group, full)     # to fetch (not 0: lack is in it); asked for and absent
                meta[U(m + OWNER)] = who | ((have | need) << MASK_SHIFT)
            else:
                need, lack = _fetch(0, need, group, full)
                m = _allocate(meta, sb, ways, line, clk, who | (need << MASK_SHIFT))
                hint[U(hk)] = (m - sb) // META
            msec += _popcount8(need)
            asked += _popcount8(lack)
            meta_f[U(m + READY)] = now
            miss_slots[U(misses)] = m + READY          # sized by the caller for every line
            misses += 1
    clock[0] = clk
    return clk - clk0 - misses, misses, latest_ready, msec, nsec, asked   # hits: the lines that did not miss


@njit(cache=True)
def _fetch(have, need, group, full):
    """(sectors a line fetches, sectors asked for that it lacks): the lacking ones widened to whole
    aligned fetch blocks of ``group`` sectors, less those present."""
    lack = need & ~have
    return _widen(lack, group) & full & ~have, lack


@njit(cache=True)
def _widen(x, group):
    """A sector mask widened to whole aligned fetch blocks of ``group`` (1, 2, 4 or 8) sectors."""
    if group >= 2:
        x |= ((x & 0x55) << 1) | ((x & 0xAA) >> 1)
    if group >= 4:
        x |= ((x & 0x33) << 2) | ((x & 0xCC) >> 2)
    if group >= 8:
        x |= ((x & 0x0F) << 4) | ((x & 0xF0) >> 4)
    return x


@njit(cache=True)
def _row_sectors(start, row_bytes, smask):
    """The sectors a row of bytes [start, start + row_bytes) needs of its first line (from its first
    sector on) and of its last line (up to its last sector), and how many sectors it covers."""
    end = start + row_bytes - 1
    s0, s1 = start >> SECTOR_SHIFT, end >> SECTOR_SHIFT
    return ((2 << smask) - 1) & ~((1 << (s0 & smask)) - 1), (2 << (s1 & smask)) - 1, s1 - s0 + 1


@njit(cache=True)
def _allocate(meta, sb, ways, line, clk, owner):
    """A missed line takes the least recently used way of set ``sb``: returns its record's start."""
    victim = 0
    oldest = meta[U(sb + STAMP)]
    for v in range(1, ways):
        st = meta[U(sb + v * META + STAMP)]
        if st < oldest:
            oldest = st
            victim = v
    m = sb + victim * META
    meta[U(m + TAG)] = line
    meta[U(m + STAMP)] = clk
    meta[U(m + OWNER)] = owner
    return m


@njit(cache=True)
def _popcount8(x):
    """The set bits of a sector mask (at most 8 bits)."""
    x = x - ((x >> 1) & 0x55)
    x = (x & 0x33) + ((x >> 2) & 0x33)
    return (x + (x >> 4)) & 0x0F


@njit(cache=True)
def _set_ready(flat_f, miss_slots, n, t):
    for i in range(n):
        flat_f[miss_slots[i]] = t


_SPARE: dict = {}   # (sets, ways) -> (meta, hint) of a released cache: the next cache of that shape reuses them


class L2Cache:
    """Tags-only sectored LRU cache; ``access`` returns (hit_lines, miss_lines, latest ready time of the
    lines found) and leaves the sectors it needed, those of them it missed and those it fetched
    from DRAM (whole fetch blocks, ``fetch_bytes``) in ``sectors``, ``missed_sectors`` and
    ``fetched_sectors`` (a line with only some of its needed sectors present counts as a missed line).

    ``release`` hands the cache's arrays to the next cache of the same shape (a fresh one starts
    from the same empty state either way): refilling mapped memory costs ~1 ms, while fresh pages
    cost the host up to ~30 ms of page faults per point."""

    def __init__(self, capacity_bytes: int, line_bytes: int = 128, ways: int = 16, fetch_bytes: int = 0):
        self.line_bytes = int(line_bytes)
        self.line_shift = self.line_bytes.bit_length() - 1
        if 1 << self.line_shift != self.line_bytes:
            raise ValueError(f"L2 line size {line_bytes} B must be a power of two")
        if not 1 << SECTOR_SHIFT <= self.line_bytes <= 8 << SECTOR_SHIFT:
            raise ValueError(f"L2 line size {line_bytes} B must be 32 to 256 B (1 to 8 sectors of 32 B)")
        self.sectors_per_line = self.line_bytes >> SECTOR_SHIFT
        # sectors a read miss fetches together (a power of two up to the line)
        g = max(1, int(fetch_bytes) >> SECTOR_SHIFT)
        self.fetch_group = min(1 << (g.bit_length() - 1), self.sectors_per_line)
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
        # who touched the line last (see keep_only) in the low bits, the present sectors' mask in the
        # high ones: read the owner as ``owner & WHO_MASK``, the mask as ``owner >> MASK_SHIFT``
        self.owner = self.meta[:, :, OWNER]
        self.ready = self.meta_f[:, :, READY]
        self.clock = np.zeros(1, dtype=np.int64)
        self._miss_slots = np.zeros(1 << 16, dtype=np.int64)   # grown by ``access`` when a tile needs more
        self._miss_cap = self._miss_slots.shape[0]
        self._pending = 0
        self.missed_sectors = 0     # of the last ``access``: sectors asked for and absent,
        self.fetched_sectors = 0    # sectors it fetched (whole fetch blocks)
        self.sectors = 0

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
        stale = (self.owner & WHO_MASK) != who
        self.tags[stale] = -1
        self.stamps[stale] = 0
        self.ready[stale] = 0.0

    def access(self, base: int, nrows: int, pitch: int, row_bytes: int, now: float, who: int = 0, read: bool = True):
        self.reserve(nrows, row_bytes)
        hits, misses, ready, self.fetched_sectors, self.sectors, self.missed_sectors = self.lookup(
            base, nrows, pitch, row_bytes, now, who, read)
        return hits, misses, ready

    def reserve(self, nrows: int, row_bytes: int) -> None:
        """Room to record the misses of an access of ``nrows`` rows of ``row_bytes`` (``lookup``'s precondition)."""
        most = nrows * ((row_bytes >> self.line_shift) + 2)      # lines the rows can touch
        if most > self._miss_cap:
            self._miss_slots = np.zeros(1 << (most - 1).bit_length(), dtype=np.int64)
            self._miss_cap = self._miss_slots.shape[0]

    def lookup(self, base: int, nrows: int, pitch: int, row_bytes: int, now: float, who: int, read: bool = True):
        """``access`` of a shape that had ``reserve``: returns (hits, misses, latest ready, sectors
        fetched, sectors needed, needed sectors missed) instead of setting the attributes."""
        r = _access(self.hint, self.flat, self.flat_f, self.clock, self._miss_slots, base, nrows, pitch, row_bytes,
                    self.line_shift, self.nsets, self.ways, float(now), who, self.fetch_group if read else 1)
        self._pending = r[1]
        return r

    def fill_done(self, t: float) -> None:
        """Mark the lines that the last ``access`` missed (wholly or some of their sectors) as ready at time ``t``."""
        if self._pending:
            _set_ready(self.flat_f, self._miss_slots, self._pending, float(t))
            self._pending = 0
