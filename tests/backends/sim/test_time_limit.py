"""backends.sim.time_limit: a launch's simulation stops once its clock passes the limit (gpusim
tune's pruning), and a limit it does not reach changes nothing."""
import pytest

import gpusim
from gpusim.backends.sim.time_limit import Stopped, reached, time_limit

GEMM = dict(M=1024, N=1024, K=1024, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=3)


@pytest.fixture(scope="module")
def free():
    return gpusim.simulate("matmul", "h100", check=False, calibration="off", **GEMM)


def test_a_limit_it_never_reaches_changes_nothing(free):
    with time_limit(free.time_us * 2e-6):
        r = gpusim.simulate("matmul", "h100", check=False, calibration="off", **GEMM)
        assert reached() is None
    assert r.time_us == free.time_us and r.kernels[0].cycles == free.kernels[0].cycles
    assert r.dram_read_bytes == free.dram_read_bytes


def test_a_launch_that_passes_the_limit_stops_there(free):
    launch_us = free.kernels[0].cycles / free.kernels[0].clock_hz * 1e6
    with time_limit(launch_us * 0.5e-6):
        with pytest.raises(Stopped):
            gpusim.simulate("matmul", "h100", check=False, calibration="off", **GEMM)
        assert reached() == pytest.approx(launch_us * 0.5e-6)
    assert reached() is not None
    with time_limit(None):              # no limit: runs to the end
        assert gpusim.simulate("matmul", "h100", check=False, calibration="off", **GEMM).time_us == free.time_us
        assert reached() is None


def test_a_sampled_launch_stops_once_its_extrapolated_middle_passes_the_limit():
    """At the end of its steady window a sampled launch's skipped middle is known at the window's
    rate: the launch stops there when that already passes the limit, long before the simulated
    CTAs' own clock would (this one: 44.5k cycles in all, 13.5k simulated)."""
    from gpusim.hardware import load_gpu

    cfg = load_gpu("h100").model_copy(update={"sm_count": 8})
    p = dict(M=2048, N=2048, K=128, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, num_warps=4, num_stages=2)
    free = gpusim.simulate("matmul", cfg, check=False, calibration="off", **p)
    k = free.kernels[0]
    assert k.simulated_ctas < k.total_ctas            # sampled
    launch_s = k.cycles / k.clock_hz
    with time_limit(launch_s * 0.7):                  # past what the simulated CTAs alone reach
        with pytest.raises(Stopped):
            gpusim.simulate("matmul", cfg, check=False, calibration="off", **p)
    with time_limit(launch_s * 1.01):
        assert gpusim.simulate("matmul", cfg, check=False, calibration="off", **p).time_us == free.time_us
