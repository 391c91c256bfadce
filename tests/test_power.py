"""The power-limited SM clock (backends/sim/power.py): pure functions checked by hand, and the
simulator's use of them (a launch over the limit is simulated again at the clock that fits)."""
import numpy as np
import pytest

from gpusim.api import simulate
from gpusim.backends.sim import power
from gpusim.backends.sim.l2 import L2Cache
from gpusim.hardware import load_gpu


@pytest.fixture(scope="module")
def h200():
    return load_gpu("h200")


def test_no_power_model_keeps_the_maximum_clock(h200):
    ideal = h200.model_copy(update={"power_limit_w": None})
    assert power.loaded_clock(ideal, 1.0, 0.0, 1e-3) == ideal.clock_hz
    assert power.loaded_clock(h200, 0.0, 0.5, 1e-3) == h200.clock_hz    # no SM energy: nothing to slow


def test_under_the_limit_keeps_the_maximum_clock(h200):
    # 100 W of SM power for 1 ms: far below 700 W
    assert power.loaded_clock(h200, 0.1, 0.0, 1e-3) == h200.clock_hz


def test_over_the_limit_meets_it(h200):
    e_sm, e_mem, s = 1.5, 0.05, 1e-3        # 1500 W of SM power at the maximum clock, for 1 ms
    f = power.loaded_clock(h200, e_sm, e_mem, s)
    assert 0.5 * h200.clock_hz < f < h200.clock_hz
    assert power.loop_power(h200, e_sm, e_mem, s, f) == pytest.approx(h200.power_limit_w, abs=0.5)
    # by hand: loop power = idle + (e_sm r^k + e_mem + flush) / (s / r + flush time + launch overhead)
    r, k = f / h200.clock_hz, h200.dvfs_energy_exponent
    e = h200.activity_energy_j
    flush_s = power.TIMING_LOOP_FLUSH_BYTES / h200.hbm_write_bandwidth_bytes_per_s
    flush_j = power.TIMING_LOOP_FLUSH_BYTES * (e["dram_byte"] + e["l2_byte"])
    by_hand = h200.idle_power_w + (e_sm * r ** k + e_mem + flush_j) / (s / r + flush_s + h200.launch_overhead_us * 1e-6)
    assert by_hand == pytest.approx(h200.power_limit_w, abs=0.5)
    # more energy, lower clock
    assert power.loaded_clock(h200, 2 * e_sm, e_mem, s) < f


def test_short_launch_shares_the_loop_with_the_flush(h200):
    # the same power for 10 us and for 10 ms: the short one's loop is mostly L2 flush, so it keeps a higher clock
    watts = 1500.0
    short = power.loaded_clock(h200, watts * 1e-5, 0.0, 1e-5)
    long = power.loaded_clock(h200, watts * 1e-2, 0.0, 1e-2)
    assert long < short <= h200.clock_hz


def test_at_clock_keeps_per_clock_rates(h200):
    f = 0.8 * h200.clock_hz
    c = power.at_clock(h200, f)
    assert c.clock_hz == f and c.power_limit_w is None
    assert c.tensor_flops_per_clk_per_sm("fp16") == pytest.approx(h200.tensor_flops_per_clk_per_sm("fp16"))
    assert c.vector_ops_per_clk_per_sm == pytest.approx(h200.vector_ops_per_clk_per_sm)
    # bandwidths fixed in time: more bytes per (slower) cycle; latencies fixed in time: fewer cycles
    assert c.hbm_read_bandwidth_bytes_per_s == h200.hbm_read_bandwidth_bytes_per_s
    assert c.hbm_latency_cycles == pytest.approx(0.8 * h200.hbm_latency_cycles)
    assert c.l2_latency_cycles == pytest.approx(0.8 * h200.l2_latency_cycles)


def test_l2_snapshot_restore_replays_the_same_accesses():
    l2 = L2Cache(1 << 20, 128, 16)
    l2.access(0, 64, 4096, 256, 0.0)
    l2.fill_done(10.0)
    state = l2.snapshot()
    first = l2.access(1 << 16, 32, 1024, 512, 20.0)
    l2.fill_done(30.0)
    l2.restore(state)
    again = l2.access(1 << 16, 32, 1024, 512, 20.0)
    assert first == again
    l2.release()


GEMM = dict(M=4096, N=4096, K=4096, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_stages=3, dtype="fp16", num_warps=4)


FLASH = dict(batch=4, heads=16, seq_len=4096, head_dim=128, BLOCK_M=128, BLOCK_N=64, num_stages=2, num_warps=4)


def test_power_limited_launches_keep_cycles_or_time_by_what_paces_them(h200):
    # without the L2 request coalescer the GEMM is paced by its L2 (with it, by its SMs)
    h200 = h200.model_copy(update={"l2_coalesced_fraction": {}})
    ideal = h200.model_copy(update={"power_limit_w": None})
    for kernel, params in (("matmul", GEMM), ("attention_flash", FLASH)):
        k = simulate(kernel, h200, check=False, **params).kernels[0]
        k0 = simulate(kernel, ideal, check=False, **params).kernels[0]
        assert k0.clock_hz == h200.clock_hz and k0.power_w > h200.power_limit_w   # what it would draw unlimited
        assert k.clock_hz < 0.97 * h200.clock_hz, kernel     # the H200 measured 1.67-1.83 GHz on such kernels
        assert k.power_w == pytest.approx(h200.power_limit_w, rel=0.3)
        # a launch's time is its cycles at its own clock, plus the launch overhead
        assert k.time_us == pytest.approx(k.cycles / k.clock_hz * 1e6 + h200.launch_overhead_us, rel=1e-9)
        if kernel == "matmul":        # paced by its L2 in the model: simulated again, about the same time
            assert k.time_us == pytest.approx(k0.time_us, rel=0.02)
            assert k.cycles < k0.cycles
        else:                         # paced by its SMs: the same cycles, longer
            assert k.cycles == pytest.approx(k0.cycles, rel=1e-9)
            assert k.time_us - h200.launch_overhead_us == pytest.approx(
                (k0.time_us - h200.launch_overhead_us) * h200.clock_hz / k.clock_hz, rel=1e-9)


def test_timeline_of_a_power_limited_launch_spans_its_time(h200):
    r = simulate("matmul", h200, check=False, timeline=True, **GEMM)       # memory-paced: simulated again
    k = r.kernels[0]
    assert k.clock_hz < h200.clock_hz
    ends = [e.t1 for e in r.timeline if type(e).__name__ == "CTAEvent"]
    launch = [e for e in r.timeline if type(e).__name__ == "LaunchEvent"][0]
    # events are on the point's (maximum) clock: the last CTA ends where the launch does
    assert max(ends) <= launch.t_end * (1 + 1e-9)
    assert max(ends) > launch.t_start + 0.5 * (launch.t_end - launch.t_start)
    assert (launch.t_end - launch.t_start) / h200.clock_hz * 1e6 == pytest.approx(k.time_us - h200.launch_overhead_us,
                                                                                rel=1e-6)
    assert np.isfinite(ends).all()


def test_utilisation_counts_a_power_limited_launch_on_its_own_clock(h200):
    r = simulate("attention_flash", h200, check=False, **FLASH)
    k = r.kernels[0]
    assert k.clock_hz < h200.clock_hz
    # one launch: the busiest pipe's share of the point's time is its share of the launch's time,
    # scaled by the launch's share of the point's time (the rest is launch and sync overhead)
    launch_s = k.cycles / k.clock_hz
    assert r.utilisation()["pipe"] == pytest.approx(
        max(k.tensor_busy, k.vector_busy, k.sfu_busy) * launch_s / (r.time_us * 1e-6), rel=1e-9)


def test_l2_energy_is_charged_on_the_bytes_the_slices_read(h200):
    """l2_byte was fitted on an L2 sweep in which nothing merges: reads the request coalescer
    merged cost no slice energy (benchmarks/clock_check.py: the 15 never-fitted kernels' clocks,
    median error 5.9% -> 4.2%)."""
    from gpusim.backends.sim.stats import Counters
    plain = Counters(l2_read_bytes=1e9)
    merged = Counters(l2_read_bytes=1e9, l2_merged_bytes=4e8)
    _, e_plain, _ = power.launch_energy(h200, plain, (0.0, 0.0, 0.0), 1e6)
    _, e_merged, _ = power.launch_energy(h200, merged, (0.0, 0.0, 0.0), 1e6)
    assert e_plain == pytest.approx(1e9 * h200.activity_energy_j["l2_byte"])
    assert e_merged == pytest.approx(0.6 * e_plain)
