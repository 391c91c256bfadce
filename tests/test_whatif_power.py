"""What-ifs where the power limit binds: a faster resource never gives a slower time, and the
row names the power limit as what bounds it."""
import pytest

from gpusim import simulate
from gpusim.backends.sim import power
from gpusim.hardware import load_gpu
from gpusim.overrides import with_overrides

RW = ("hbm_read_bandwidth_bytes_per_s", "hbm_write_bandwidth_bytes_per_s")


def _faster_hbm(cfg, x: float):
    return with_overrides(cfg, {f: getattr(cfg, f) * x for f in RW}, "gpu_overrides")[0]


@pytest.mark.parametrize("x", [1.25, 1.5, 2.0, 0.5])
def test_the_timing_loops_flush_is_the_named_gpus(x):
    """A what-if of the HBM write rate keeps the flush between repetitions as the named GPU runs it,
    so the same launch energy gets the same clock (a shorter flush lowered it: less time to cool)."""
    cfg = load_gpu("h100")
    what = _faster_hbm(cfg, x)
    assert power.flush_energy(what) == power.flush_energy(cfg)
    e_sm, e_mem, seconds = 0.16, 0.01, 200e-6          # a tensor-heavy launch over the limit
    assert power.loaded_clock(cfg, e_sm, e_mem, seconds) < cfg.clock_hz
    assert power.loaded_clock(what, e_sm, e_mem, seconds) == power.loaded_clock(cfg, e_sm, e_mem, seconds)
    # a launch that got shorter with the faster memory draws more power: a lower clock, a shorter time
    f_base, f_fast = (power.loaded_clock(c, e_sm, e_mem, s) for c, s in ((cfg, seconds), (what, seconds * 0.97)))
    assert f_fast <= f_base and seconds * 0.97 / f_fast <= seconds / f_base


@pytest.mark.slow
def test_faster_hbm_never_slows_a_power_limited_gemm():
    """Issue 43: HBM read and write x1.5 on the h100 made this GEMM 204.8 -> 212.4 us (1625 -> 1555 MHz).
    Mechanistic times, and calibrated ones as a what-if sweep gives them (every point, the unchanged
    one included, on the transferred model: the fitted model of the named config and the transferred
    model of a what-if are two models, and only one model's factors order like the simulation)."""
    cfg = load_gpu("h100")
    p = dict(M=4096, N=4096, K=4096, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=3)
    for mode in ("off", "transferred"):
        base = simulate("matmul", cfg, check=False, calibration=mode, **p)
        assert base.bound == "power"
        for x in (1.25, 1.5, 2.0):
            r = simulate("matmul", _faster_hbm(cfg, x), check=False, calibration=mode, **p)
            assert r.time_us <= base.time_us, (mode, x, base.time_us, r.time_us)
