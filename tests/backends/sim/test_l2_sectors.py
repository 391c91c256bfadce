"""gpusim.backends.sim.l2: the L2 is sectored (32-byte sectors in 128-byte lines).

A miss fetches only the sectors a request asks for, so the other half of a line read earlier is
a miss, not a hit, and costs its own DRAM bytes. Measured on an H200 with Nsight Compute
(data/h200/micro/ncu_probe_round8.json): the stream_cols kernel, which reads the two
64-byte halves of each line in consecutive loop iterations, has 1,032 L2 sector hits out of 4.33 M
sector lookups, and its DRAM reads equal the bytes it asks for.
"""
import pytest

from gpusim.api import simulate
from gpusim.backends.sim.l2 import MASK_SHIFT, L2Cache

LINE = 128


def test_the_other_half_of_a_line_is_a_miss_of_its_own_sectors():
    c = L2Cache(1 << 20, LINE, 16)
    assert c.access(0, 1, 0, 64, now=0.0) == (0, 1, 0.0)
    assert (c.missed_sectors, c.sectors) == (2, 2)
    c.fill_done(100.0)
    hits, misses, _ = c.access(64, 1, 0, 64, now=10.0)             # sectors 2-3: not fetched yet
    assert (hits, misses, c.missed_sectors, c.sectors) == (0, 1, 2, 2)
    c.fill_done(300.0)
    hits, misses, ready = c.access(0, 1, 0, 128, now=20.0)         # now the whole line is present
    assert (hits, misses, c.missed_sectors, c.sectors) == (1, 0, 0, 4)
    assert ready == 300.0                                          # waits for the later fill


def test_a_partial_miss_fetches_only_the_missing_sectors():
    c = L2Cache(1 << 20, LINE, 16)
    c.access(32, 1, 0, 32, now=0.0)                                # sector 1 only
    c.fill_done(50.0)
    hits, misses, _ = c.access(0, 1, 0, 128, now=60.0)             # needs 0-3, has 1
    assert (hits, misses, c.missed_sectors, c.sectors) == (0, 1, 3, 4)
    c.fill_done(500.0)
    assert c.access(0, 1, 0, 128, now=70.0) == (1, 0, 500.0)       # the line waits for the new fill
    assert c.missed_sectors == 0


def test_a_row_straddling_two_lines_touches_the_sectors_it_covers():
    c = L2Cache(1 << 20, LINE, 16)
    hits, misses, _ = c.access(64, 1, 0, 128, now=0.0)             # sectors 2-3 of line 0, 0-1 of line 1
    assert (hits, misses, c.missed_sectors, c.sectors) == (0, 2, 4, 4)
    masks = sorted(int(x) >> MASK_SHIFT for x in c.owner[c.tags >= 0])
    assert masks == [0b0011, 0b1100]
    assert c.access(64, 1, 0, 64, now=1.0)[:2] == (1, 0)           # sectors 2-3 of line 0
    assert c.access(128, 1, 0, 64, now=1.0)[:2] == (1, 0)          # sectors 0-1 of line 1
    assert c.access(0, 1, 0, 64, now=1.0)[:2] == (0, 1)            # sectors 0-1 of line 0: absent
    assert c.access(192, 1, 0, 64, now=1.0)[:2] == (0, 1)          # sectors 2-3 of line 1: absent
    assert c.access(0, 1, 0, 256, now=1.0)[:2] == (2, 0)


def test_unaligned_row_bytes_round_out_to_whole_sectors():
    c = L2Cache(1 << 20, LINE, 16)
    c.access(40, 3, 256, 10, now=0.0)                              # bytes 40..49 of 3 lines: sector 1 each
    assert (c.missed_sectors, c.sectors) == (3, 3)
    assert c.access(32, 3, 256, 32, now=0.0)[:2] == (3, 0)
    assert c.access(0, 3, 256, 32, now=0.0)[:2] == (0, 3)


@pytest.mark.parametrize("line", [32, 64, 256])
def test_other_line_sizes(line):
    c = L2Cache(1 << 20, line, 16)
    assert c.sectors_per_line == line // 32
    c.access(0, 1, 0, 32, now=0.0)
    assert (c.missed_sectors, c.sectors) == (1, 1)
    hits, misses, _ = c.access(0, 1, 0, line, now=0.0)
    assert (hits, misses, c.missed_sectors) == ((1, 0, 0) if line == 32 else (0, 1, line // 32 - 1))
    assert c.access(0, 1, 0, line, now=0.0)[:2] == (1, 0)


def test_line_sizes_outside_one_to_eight_sectors_are_refused():
    for line in (16, 512):
        with pytest.raises(ValueError):
            L2Cache(1 << 20, line, 16)


def test_keep_only_reads_the_owner_under_the_sector_mask():
    c = L2Cache(1 << 20, LINE, 16)
    c.access(0, 1, 0, 4 * LINE, 0.0, who=1)                        # full lines: mask 0b1111
    c.access(100 * LINE, 4, LINE, 64, 0.0, who=2)                  # half lines: mask 0b0011
    c.access(200 * LINE, 4, LINE, 32, 0.0, who=2)                  # mask 0b0001
    c.keep_only(2)
    assert c.access(0, 1, 0, 4 * LINE, 0.0)[:2] == (0, 4)          # who=1's lines are gone
    assert c.access(100 * LINE, 4, LINE, 64, 0.0)[:2] == (4, 0)    # who=2's stay, with their sectors
    assert c.access(200 * LINE, 4, LINE, 32, 0.0)[:2] == (4, 0)
    assert c.access(200 * LINE, 4, LINE, 64, 0.0)[:2] == (0, 4)    # ... and only those
    assert c.missed_sectors == 4
    # the owner is the last accessor: who=0 above, so keep_only(0) keeps every line it touched
    c.keep_only(0)
    assert c.access(100 * LINE, 4, LINE, 64, 0.0)[:2] == (4, 0)


def test_a_store_makes_the_sectors_it_writes_present():
    c = L2Cache(1 << 20, LINE, 16)
    c.access(0, 2, LINE, 64, now=0.0)                              # as MemoryPath.store does
    c.fill_done(0.0)
    assert c.access(0, 2, LINE, 64, now=1.0)[:2] == (2, 0)
    assert c.access(64, 2, LINE, 64, now=1.0)[:2] == (0, 2)


def test_streaming_half_lines_misses_in_the_l2():
    """The measured kernel: 64-byte row pieces, the two halves of each line read by consecutive
    iterations. Whole-line fills made the second half a hit (an L2 hit rate of about 50%); the
    H200 has 1,032 sector hits of 4.33 M lookups."""
    r = simulate("benchmarks/kernels/stream_cols.py:stream_cols", "configs/h200.yaml", check=False,
                 BLOCK_K=32, num_stages=2, cols=1024, fidelity="full")
    k = r.kernels[0]
    assert k.l2_hit_rate < 0.05
    # DRAM reads are the bytes asked for: the k panel (132 CTAs x 64 rows x 1024 fp16) and q
    asked = 132 * 64 * 1024 * 2
    assert asked <= k.dram_read_bytes <= 1.02 * asked
