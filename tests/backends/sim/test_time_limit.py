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


SAMPLED = [("matmul", dict(M=2048, N=2048, K=128, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, num_warps=4, num_stages=2)),
           ("attention_flash", dict(batch=2, heads=16, seq_len=1024, head_dim=64))]


@pytest.mark.parametrize("kernel,p", SAMPLED, ids=[k for k, _ in SAMPLED])
def test_a_sampled_launch_stops_once_its_extrapolated_middle_passes_the_limit(kernel, p):
    """From the end of wave 1 a sampled launch's skipped middle is bounded at a rate its steady
    window cannot beat: the launch stops as soon as that passes the limit, long before the
    simulated CTAs' own clock would (the GEMM: 44.5k cycles in all, 13.5k simulated); a limit
    above its time never stops it."""
    from gpusim.hardware import load_gpu

    cfg = load_gpu("h100").model_copy(update={"sm_count": 8})
    free = gpusim.simulate(kernel, cfg, check=False, calibration="off", **p)
    k = free.kernels[0]
    assert k.simulated_ctas < k.total_ctas            # sampled
    launch_s = k.cycles / k.clock_hz
    with time_limit(launch_s * 0.6):                  # past what the simulated CTAs alone reach
        with pytest.raises(Stopped):
            gpusim.simulate(kernel, cfg, check=False, calibration="off", **p)
    with time_limit(launch_s * 1.001):
        assert gpusim.simulate(kernel, cfg, check=False, calibration="off", **p).time_us == free.time_us
