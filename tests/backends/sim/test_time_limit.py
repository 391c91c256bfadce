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


def test_work_cap_needs_a_dot_in_every_loop_and_trips():
    from gpusim.backends.sim.time_limit import work_cap

    assert work_cap([], 4, 8, 2, 1) is None                 # no loop
    assert work_cap([100.0, 0.0], 4, 8, 2, 1) is None       # a loop without a dot
    assert work_cap([100.0], 0, 8, 2, 1) is None            # a CTA without trips
    rate, slack, span = work_cap([100.0, 50.0], 4, 8, 2, 2)
    assert rate == pytest.approx(8 * 1.25 / 50.0)           # 8 pipes, 50 cycles an iteration, 1 end per 4
    assert slack == pytest.approx(8 * 2 * (2 * 1.25 + 1))   # a step of 2 units and an end per resident CTA
    assert span == pytest.approx(2 * 4 * 50.0)


BOUNDED = [dict(M=2048, N=2048, K=512, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, num_warps=4, num_stages=2),   # sampled
           dict(M=2048, N=1024, K=1024, BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, num_warps=8, num_stages=4),
           dict(M=1024, N=1024, K=256, BLOCK_M=64, BLOCK_N=128, BLOCK_K=32, num_warps=4, num_stages=3)]   # not sampled


@pytest.mark.parametrize("p", BOUNDED, ids=["sampled", "sampled-long", "one-pass"])
def test_the_least_cycles_never_exceed_the_launchs_cycles(p, monkeypatch):
    """At every CTA end the proven least cycles (``sampling._least_cycles``: the CTAs not yet
    dispatched on the tensor pipes, the skipped middle at a rate the window cannot beat) stay
    below what the finished simulation gives, and from the first CTA end on they are well ahead
    of the clock (before the window the old bound was the clock alone)."""
    from gpusim.backends.sim import engine
    from gpusim.hardware import load_gpu

    cfg = load_gpu("h100").model_copy(update={"sm_count": 8, "power_limit_w": None})
    seen = []
    least = engine.LaunchSim._least_cycles

    def spy(self):
        v = least(self)
        seen.append((v, self.now, len(self.completions), len(self.order)))
        return v
    monkeypatch.setattr(engine.LaunchSim, "_least_cycles", spy)
    with time_limit(1.0):               # far above: every check runs, none stops it
        r = gpusim.simulate("matmul", cfg, check=False, calibration="off", **p)
        assert reached() is None
    cycles = r.kernels[0].cycles
    assert seen and max(v for v, *_ in seen) <= cycles * (1 + 1e-12)
    first, now = seen[0][:2]
    assert first > now * 1.1          # from the first CTA end on, ahead of the clock
