"""The spill microkernel (benchmarks/kernels/spill_live.py, micro/val_spill_live on the H200): its
numpy execution matches its reference for a per-thread count that takes several tiles, the tiles
add up to what was asked, and a count that cannot be laid out is refused with the numbers."""
import pytest

from gpusim import simulate
from gpusim.hardware import load_gpu

K = "benchmarks/kernels/spill_live.py:spill_live"


@pytest.fixture(scope="module")
def h200():
    return load_gpu("configs/h200.yaml")


def test_exact_execution_matches_the_reference(h200):
    r = simulate(K, h200, check=True, ctas=2, per_thread=3, iters=5, num_warps=1)
    assert r.status == "ok"
    assert r.max_rel_err is not None and r.max_rel_err < 1e-6


def test_tiles_add_up_to_the_values_per_thread():
    import importlib.util
    spec = importlib.util.spec_from_file_location("spill_live", "benchmarks/kernels/spill_live.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for per in (1, 3, 96, 288, 384, 448):
        blocks = mod.parts(per, 128)
        assert sum(blocks) == per * 128
        assert all(b & (b - 1) == 0 for b in blocks)       # each a power of two, as Triton requires
        assert len(set(blocks)) == len(blocks)


def test_every_iteration_moves_its_values_once_with_no_dram_traffic_inside(h200):
    # the loop carries its tiles in registers: DRAM sees the load and the store, nothing per iteration
    a = simulate(K, h200, ctas=4, per_thread=64, iters=4, num_warps=4)
    b = simulate(K, h200, ctas=4, per_thread=64, iters=64, num_warps=4)
    assert a.dram_read_bytes == pytest.approx(b.dram_read_bytes) == pytest.approx(4 * 64 * 128 * 4, rel=0.01)
    assert b.time_us > a.time_us


def test_warps_that_are_not_a_power_of_two_are_refused(h200):
    r = simulate(K, h200, ctas=1, per_thread=4, num_warps=3)
    assert r.status == "error"
    assert "num_warps" in r.reason
