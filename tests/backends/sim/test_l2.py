"""gpusim.backends.sim.l2: hit/miss sequences of the tags-only LRU cache."""
import numpy as np

from gpusim.backends.sim.l2 import L2Cache

LINE = 128


def test_first_touch_misses_then_hits():
    c = L2Cache(1 << 20, LINE, 16)
    assert c.access(0, 4, 1024, 256, now=0.0)[:2] == (0, 8)       # 4 rows x 2 lines, all cold
    c.fill_done(100.0)
    assert c.access(0, 4, 1024, 256, now=10.0)[:2] == (8, 0)
    # a row that straddles a line boundary touches both lines
    assert c.access(64, 1, 0, 128, now=10.0)[:2] == (2, 0)


def test_a_hit_on_a_line_being_filled_waits_for_the_fill():
    c = L2Cache(1 << 20, LINE, 16)
    c.access(0, 1, 0, 256, now=0.0)
    c.fill_done(500.0)
    hits, misses, ready = c.access(0, 1, 0, 256, now=10.0)
    assert (hits, misses, ready) == (2, 0, 500.0)
    c.new_launch()                                  # a new launch's clock: earlier data is ready
    assert c.access(0, 1, 0, 256, now=0.0)[2] == 0.0


def test_lru_evicts_the_least_recent_line_of_a_set():
    ways = 4
    c = L2Cache(ways * LINE, LINE, ways)             # one set of 4 ways: every line maps to it
    assert c.nsets == 1
    for k in range(4):
        assert c.access(k * LINE, 1, 0, LINE, 0.0)[:2] == (0, 1)
    assert c.access(0, 1, 0, LINE, 0.0)[:2] == (1, 0)            # line 0 is now the most recent
    assert c.access(4 * LINE, 1, 0, LINE, 0.0)[:2] == (0, 1)     # evicts line 1, the least recent
    assert c.access(0, 1, 0, LINE, 0.0)[:2] == (1, 0)
    assert c.access(LINE, 1, 0, LINE, 0.0)[:2] == (0, 1)         # line 1 was evicted


def test_streaming_more_than_the_capacity_evicts_everything():
    cap = 64 * 1024
    c = L2Cache(cap, LINE, 16)
    c.access(0, 1, 0, cap, 0.0)
    c.access(10 * cap, 1, 0, 4 * cap, 0.0)          # 4x the capacity of other lines
    hits, misses, _ = c.access(0, 1, 0, cap, 0.0)
    assert hits < 0.05 * (hits + misses)


def test_keep_only_invalidates_other_owners_lines():
    c = L2Cache(1 << 20, LINE, 16)
    c.access(0, 1, 0, 4 * LINE, 0.0, who=1)
    c.access(100 * LINE, 1, 0, 4 * LINE, 0.0, who=2)
    c.keep_only(2)
    assert c.access(0, 1, 0, 4 * LINE, 0.0)[:2] == (0, 4)
    assert c.access(100 * LINE, 1, 0, 4 * LINE, 0.0)[:2] == (4, 0)


def test_fill_times_reach_every_missed_line_of_a_large_access():
    """An access that misses more lines than any fixed buffer holds still marks all of them filled."""
    n = 100_000
    c = L2Cache(64 << 20, LINE, 16)
    hits, misses, _ = c.access(0, 1, 0, n * LINE, 0.0)
    assert misses == n
    c.fill_done(777.0)
    assert np.count_nonzero(c.ready == 777.0) == n
    hits, misses, ready = c.access(0, 1, 0, n * LINE, 1.0)
    assert (hits, misses, ready) == (n, 0, 777.0)


def test_a_cache_on_released_arrays_starts_empty():
    def trace(c):
        out = []
        for k in range(40):
            out.append(c.access((k * 7919 % 97) * 4096, 8, 8192, 512, now=float(k)))
            c.fill_done(k + 50.0)
        return out

    used = L2Cache(1 << 16, LINE, 4)
    expected = trace(used)
    used.release()
    again = L2Cache(1 << 16, LINE, 4)               # takes the released arrays
    assert again.meta is used.meta
    assert trace(again) == expected
