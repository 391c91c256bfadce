"""Physics on every result: a result faster than its roofline, with a utilisation above 1 or a
non-finite number is unphysical, never ok."""
from dataclasses import replace

from gpusim import physics, simulate


def _ok():
    return simulate("matmul", "h100", check=False, M=512, N=512, K=512)


def test_a_real_result_is_physical():
    r = _ok()
    assert r.status == "ok" and physics.violations(r) == [] and physics.judge(r) is r


def test_faster_than_the_compute_bound_is_unphysical():
    r = _ok()
    fast = replace(r, time_us=r.flops / r.peak_flops_per_s * 1e6 * 0.5)
    j = physics.judge(fast)
    assert j.status == "unphysical" and "below the compute bound" in j.reason
    assert "utilisation" in j.reason     # the pipe was busy more than the whole (halved) time


def test_non_finite_is_unphysical():
    for bad in (float("nan"), float("inf"), -1.0):
        j = physics.judge(replace(_ok(), time_us=bad))
        assert j.status == "unphysical" and "time_us" in j.reason


def test_dram_above_peak_is_unphysical():
    r = _ok()
    j = physics.judge(replace(r, hbm_bandwidth_bytes_per_s=r.dram_bytes / (r.time_us * 1e-6) / 2))
    assert j.status == "unphysical" and "dram utilisation 2" in j.reason


def test_not_simulated_is_left_alone():
    r = replace(_ok(), status="infeasible", time_us=None)
    assert physics.judge(r) is r


def test_copy_bandwidth_above_read_plus_write_is_caught():
    """The what-if of issue 32: copy bandwidth at 1.99999x read ran DRAM at 1.13x its peak, reported ok."""
    from gpusim.hardware import load_gpu

    cfg = load_gpu("h100")
    cfg = cfg.model_copy(update={"hbm_copy_bandwidth_bytes_per_s": 1.99999 * cfg.hbm_read_bandwidth_bytes_per_s})
    r = simulate("elementwise_fused", cfg, check=False)
    assert r.status in ("ok", "unphysical")
    if r.status == "ok":     # the model was fixed at its cause: then the result must be physical
        assert physics.violations(r) == []
    else:
        assert "dram utilisation" in r.reason
