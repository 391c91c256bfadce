"""The HBM's loaded latency (round 13, docs/history.md): a miss's round trip grows as
``hbm_latency x u / (1 - u)`` with the DRAM's utilisation u over the last window, never by more
than the bytes in flight take to drain, less the wait the request already has in the HBM
channel's FIFO. Checked by benchmarks/loaded_latency.py on the
recorded stream_cols microbenchmarks (the growth's scale: median 740 cycles against the 667 of the
idle latency)."""
import pytest

from gpusim.api import simulate
from gpusim.backends.sim.loaded_latency import LoadedLatency
from gpusim.hardware import load_gpu

L0, RATE = 600.0, 2000.0      # idle latency (cycles), peak bytes per cycle


def _busy(window=1000.0):
    """A LoadedLatency with plenty of misses in flight (their drain time never binds)."""
    q = LoadedLatency(L0, window, RATE)
    q.miss(RATE * 1e9, 1e12)
    return q


def test_an_idle_dram_adds_nothing():
    assert _busy().extra(5000.0, 0.0) == 0.0


def test_half_busy_doubles_the_latency():
    q = _busy(10000.0)
    q.add(RATE * 5000.0, 0.0, 5000.0)           # 5000 cycles of DRAM work over [0, 5000]
    assert q.extra(10000.0, 0.0) == pytest.approx(L0)          # u = 0.5: L0 x 0.5 / 0.5
    assert q.extra(10000.0, 200.0) == pytest.approx(L0 - 200.0)  # the FIFO wait counts toward it
    assert q.extra(10000.0, 5000.0) == 0.0


def test_the_window_bounds_the_start_of_a_launch():
    q = _busy(8000.0)
    q.add(RATE * 100.0, 0.0, 100.0)             # the DRAM busy from the start
    assert q.extra(100.0, 0.0) == pytest.approx(L0 / 79.0)   # u = 100 / 8000, not 100 / 100


def test_a_merged_steps_bytes_count_as_they_are_served():
    q = _busy(1.0)
    q.add(RATE * 4000.0, 0.0, 8000.0)           # 4000 cycles of work over [0, 8000]
    assert q.extra(4000.0, 0.0) == pytest.approx(L0)               # half served by 4000: u = 0.5
    assert q.extra(8000.0, 0.0) == pytest.approx(L0)               # over the last 4000 cycles: u = 0.5


def test_only_the_last_window_counts():
    q = _busy(1000.0)
    q.add(RATE * 10000.0, 0.0, 10000.0)         # busy until 10000, then idle
    assert q.extra(10000.0, 0.0) == pytest.approx(L0 * LoadedLatency.U_MAX / (1 - LoadedLatency.U_MAX))
    assert q.extra(12000.0, 0.0) == pytest.approx(0.0)   # the window since 11000 saw no DRAM work


def test_transfers_not_yet_begun_do_not_count():
    q = _busy(1000.0)
    q.add(RATE * 500.0, 5000.0, 5500.0)         # queued behind the FIFO: served over [5000, 5500]
    assert q.extra(2000.0, 0.0) == 0.0


def test_no_miss_waits_behind_more_than_is_in_flight():
    q = LoadedLatency(L0, 1000.0, RATE)
    q.add(RATE * 5000.0, 0.0, 5000.0)
    q.miss(RATE * 100.0, 1e9)                   # 100 cycles of bytes in flight
    assert q.extra(5000.0, 0.0) == pytest.approx(100.0)
    q2 = LoadedLatency(L0, 1000.0, RATE)
    q2.add(RATE * 5000.0, 0.0, 5000.0)
    q2.miss(RATE * 100.0, 4000.0)               # back before now: nothing in flight
    assert q2.extra(5000.0, 0.0) == 0.0


def test_a_saturated_dram_is_bounded():
    q = _busy(1.0)
    q.add(RATE * 1e6, 0.0, 1e6)
    assert q.extra(1000.0, 0.0) == pytest.approx(L0 * LoadedLatency.U_MAX / (1 - LoadedLatency.U_MAX))


def _stream(cfg, ctas):
    return simulate("benchmarks/kernels/stream_cols.py:stream_cols", cfg, check=False, ctas=ctas, BLOCK_K=32,
                    num_stages=3, cols=2048).time_us


def test_a_loaded_gpu_streams_slower_than_the_idle_latency_says():
    cfg = load_gpu("h200")
    assert cfg.hbm_queue_window_cycles == 8192     # on since round 15 (docs/history.md)
    off = cfg.model_copy(update={"hbm_queue_window_cycles": None})
    # one CTA leaves the DRAM idle: the same time with or without loaded latency
    assert _stream(cfg, 1) == pytest.approx(_stream(off, 1), rel=0.01)
    # 132 CTAs load it: their round trips grow
    assert _stream(cfg, 132) > 1.1 * _stream(off, 132)


def test_real_configs_have_the_loaded_latency_and_ideal_bounds_do_not():
    for name in ("h200", "h100", "a100", "a100-80gb"):
        assert load_gpu(name).hbm_queue_window_cycles == 8192
    for name in ("h200-ideal", "h100-ideal", "a100-ideal", "a100-80gb-ideal"):
        assert load_gpu(name).hbm_queue_window_cycles is None
