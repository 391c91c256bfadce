"""The HBM's rate for tiles whose rows give short contiguous pieces (GPUConfig.hbm_piece_efficiency,
measured by benchmarks/micro_fidelity.py dramchunk)."""
import pytest

from gpusim import simulate
from gpusim.backends.sim import codegen
from gpusim.hardware import load_gpu


@pytest.fixture(scope="module")
def h200():
    return load_gpu("configs/h200.yaml")


def test_piece_cost_follows_the_measured_table(h200):
    t = h200.hbm_piece_efficiency
    assert codegen.hbm_piece_cost(32, h200) == pytest.approx(1 / t[32])
    assert codegen.hbm_piece_cost(16, h200) == pytest.approx(1 / t[32])       # below the smallest piece
    assert codegen.hbm_piece_cost(64, h200) == pytest.approx(1 / t[64])
    mid = codegen.hbm_piece_cost(2 ** 5.5, h200)                                  # halfway in log2
    assert mid == pytest.approx(1 / ((t[32] + t[64]) / 2))
    assert codegen.hbm_piece_cost(1 << 20, h200) == 1.0                      # a stream
    assert codegen.hbm_piece_cost(32, h200.model_copy(update={"hbm_piece_efficiency": {}})) == 1.0


def test_short_pieces_slow_an_hbm_bound_stream(h200):
    # 264 CTAs streaming 32-byte row pieces four tiles ahead: bound by the HBM, which delivers
    # such pieces at about half its streaming rate
    kw = dict(ctas=264, cols=2048, BLOCK_K=16, num_stages=4, fidelity="full")
    k = "benchmarks/kernels/stream_cols.py:stream_cols"
    # the piece table alone: with the loaded DRAM latency on (named configs since round 15) the
    # stream's round trips grow with the utilisation and bound it, which hides the table here
    h200 = h200.model_copy(update={"hbm_queue_window_cycles": None})
    with_table = simulate(k, h200, **kw).time_us
    without = simulate(k, h200.model_copy(update={"hbm_piece_efficiency": {}}), **kw).time_us
    assert with_table > 1.3 * without
