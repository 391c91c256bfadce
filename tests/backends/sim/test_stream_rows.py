"""The contiguous-tile stream (benchmarks/kernels/stream_rows.py, micro/val_stream_rows on the H200):
its numpy execution matches its reference, each tile is one contiguous DRAM piece read once, and a
block that BLOCK_N does not divide is refused with a message naming both."""
import pytest

from gpusim import simulate
from gpusim.hardware import load_gpu

K = "benchmarks/kernels/stream_rows.py:stream_rows"


@pytest.fixture(scope="module")
def h200():
    return load_gpu("configs/h200.yaml")


def test_exact_execution_matches_the_reference(h200):
    r = simulate(K, h200, check=True, ctas=3, rows=256, width=64, BLOCK_N=32, num_stages=2)
    assert r.status == "ok"
    assert r.max_rel_err is not None and r.max_rel_err < 1e-3


def test_every_byte_of_the_block_is_read_from_dram_once(h200):
    r = simulate(K, h200, ctas=4, rows=1024, width=128, BLOCK_N=64, num_stages=2)
    k_bytes = 4 * 1024 * 128 * 2
    assert r.dram_read_bytes == pytest.approx(k_bytes, rel=0.01)


def test_copies_ahead_shorten_a_latency_bound_stream(h200):
    # one CTA, 4 KiB tiles: with no copy ahead each tile waits out its round trip
    t2 = simulate(K, h200, ctas=1, rows=4096, width=64, BLOCK_N=32, num_stages=2).time_us
    t3 = simulate(K, h200, ctas=1, rows=4096, width=64, BLOCK_N=32, num_stages=3).time_us
    assert t3 < 0.7 * t2


def test_a_block_blocks_do_not_divide_is_refused(h200):
    r = simulate(K, h200, ctas=1, rows=100, width=64, BLOCK_N=32)
    assert r.status == "error"
    assert "rows=100" in r.reason and "BLOCK_N=32" in r.reason
