"""Calibration arithmetic without a GPU, triton or torch: statistics, timings -> config numbers,
config building and writing, the plans, and the DSL op microbenchmarks' rate solving."""
import pytest

from gpusim.hardware import GPUConfig, load_gpu
from gpusim.hw.calibrate import fit as cal
from gpusim.hw.calibrate import ops
from gpusim.hw.calibrate.plan import FULL, QUICK

MIB = 1 << 20


def test_stats_median_and_spread():
    s = cal.stats([3.0, 1.0, 2.0, float("nan")])
    assert s["value"] == 2.0 and s["min"] == 1.0 and s["max"] == 3.0 and s["n"] == 3
    assert s["spread"] == pytest.approx(1.0)
    assert cal.stats([])["value"] is None


def test_launch_overhead_arithmetic():
    launch, sync = cal.launch_overheads(5.0, 32.0)      # 9 extra launches cost 27 us
    assert launch == pytest.approx(3.0) and sync == pytest.approx(2.0)
    launch, sync = cal.launch_overheads(5.0, 4.0)       # noise: never negative
    assert launch == 0.0 and sync == 5.0
    launch, sync = cal.launch_overheads(2.0, 47.0)      # launches cost more than one alone: no sync left
    assert launch == pytest.approx(5.0) and sync == 0.0


def test_latency_conversion():
    # 1000 extra hops took 0.5 ms more: 500 ns per hop at 2 GHz = 1000 cycles
    assert cal.latency_cycles(1e-3, 1.5e-3, 1000, 2000, 2e9) == pytest.approx(1000.0)
    with pytest.raises(ValueError):
        cal.latency_cycles(1.0, 2.0, 10, 10, 1e9)


def test_l2_falloff_on_synthetic_curve():
    tb = 1e12
    curve = [(1 * MIB, 10 * tb), (4 * MIB, 11 * tb), (16 * MIB, 9 * tb), (32 * MIB, 9.5 * tb),
             (64 * MIB, 5 * tb), (128 * MIB, 4 * tb), (512 * MIB, 4 * tb)]
    f = cal.l2_falloff(curve, 16 * MIB)
    assert f["plateau"] == pytest.approx(10 * tb)          # median of 10, 11, 9
    assert f["floor"] == pytest.approx(4 * tb)
    assert f["threshold"] == pytest.approx(7 * tb)
    # between 32 MiB (9.5) and 64 MiB (5): (9.5 - 7) / 4.5 of the way in log2
    expect = 2 ** (5 + 2.5 / 4.5) * MIB
    assert f["falloff_bytes"] == pytest.approx(expect)
    assert 32 * MIB < f["falloff_bytes"] < 64 * MIB
    # a measured HBM rate moves the threshold; a curve that never drops has no fall-off
    assert cal.l2_falloff(curve, 16 * MIB, hbm_bytes_per_s=2 * tb)["threshold"] == pytest.approx(6 * tb)
    flat = [(w, 10 * tb) for w, _ in curve]
    assert cal.l2_falloff(flat)["falloff_bytes"] is None
    assert cal.l2_falloff([])["plateau"] is None


def test_cyclic_chase_is_one_cycle():
    pos, nxt = cal.cyclic_chase(1000, 64, seed=3)
    succ = dict(zip(pos.tolist(), nxt.tolist()))
    cur, seen = int(pos[0]), set()
    for _ in range(1000):
        assert cur not in seen
        seen.add(cur)
        cur = succ[cur]
    assert cur == int(pos[0]) and len(seen) == 1000
    assert all(p % 64 == 0 for p in seen)


def _raw():
    f = lambda v, m="synthetic": {"value": v, "min": v * 0.99, "max": v * 1.01, "spread": 0.02, "n": 3,  # noqa: E731
                                  "samples": [v * 0.99, v, v * 1.01], "method": m}
    tiles = [{"m": 128, "n": 128, "k": 64, "num_warps": 8, "dtype": "fp16", "flops_per_s": 700e12, "spread": 0.01,
              "repeats": 100},
             {"m": 16, "n": 16, "k": 16, "num_warps": 4, "dtype": "fp16", "flops_per_s": 70e12, "spread": 0.01,
              "repeats": 100},
             {"m": 32, "n": 32, "k": 16, "num_warps": 4, "dtype": "fp16", "error": "OutOfResources"},
             {"m": 128, "n": 128, "k": 64, "num_warps": 8, "dtype": "bf16", "flops_per_s": 690e12}]
    return {"quick": False, "provenance": {"device_name": "NVIDIA H200", "date": "2026-11-29", "hostname": "h",
                                           "driver_version": "580", "torch_version": "2.11"},
            "fields": {"hbm_read_bandwidth_bytes_per_s": f(4.3e12), "hbm_write_bandwidth_bytes_per_s": f(4.1e12),
                       "l2_bandwidth_bytes_per_s": f(1.1e13), "sm_load_bytes_per_clk": f(80.0),
                       "l2_latency_cycles": f(270.0), "hbm_latency_cycles": f(-5.0),    # invalid: base kept
                       "tensor_flops_per_s.fp16": f(700e12), "tensor_flops_per_s.bf16": f(690e12),
                       "tensor_flops_per_s.fp32": f(350e12), "fp32_flops_per_s": f(60e12),
                       "sfu_ops_per_clk_per_sm": f(15.5), "launch_overhead_us": f(4.0), "sync_overhead_us": f(2.0),
                       "clock_hz": f(1.98e9), "sm_count": f(132.0), "l2_bytes": f(62914560.0),
                       "sram_bytes_per_cta_max": f(1e9),                                 # > per SM: base kept
                       "simt_lane_ops_per_clk_per_sm.mul": f(120.0), "simt_lane_ops_per_clk_per_sm.cast": f(30.0),
                       "not_a_field": f(1.0)},
            "measurements": [{"field": "l2_sweep_bandwidth_bytes_per_s[W=1MiB]", "value": 1.1e13, "spread": 0.01,
                              "method": "sweep"},
                             {"field": "hbm_copy_bandwidth_bytes_per_s", "value": 4.2e12, "spread": None,
                              "method": "copy"}],
            "tiles": tiles}


def test_build_config_validates_loads_and_keeps_provenance(tmp_path):
    base = load_gpu("h200-ideal")
    cfg, rejected = cal.build_config(base, _raw(), "h200-measured")
    assert isinstance(cfg, GPUConfig) and cfg.name == "h200-measured"
    assert "measured" in cfg.description
    assert cfg.hbm_read_bandwidth_bytes_per_s == 4.3e12 and cfg.sm_count == 132 and isinstance(cfg.sm_count, int)
    assert cfg.tensor_flops_per_s == {"fp16": 700e12, "bf16": 690e12, "fp32": 350e12,   # measured
                                      "fp8e4m3": 1979e12, "fp8e5m2": 1979e12}              # the base's
    assert cfg.clock_hz == 1.98e9
    assert set(rejected) == {"hbm_latency_cycles", "sram_bytes_per_cta_max", "not_a_field"}
    assert cfg.hbm_latency_cycles == base.hbm_latency_cycles
    assert cfg.sram_bytes_per_cta_max == base.sram_bytes_per_cta_max
    assert cfg.sources["hbm_read_bandwidth_bytes_per_s"].startswith("measured: synthetic (median of 3, spread 2.0%")
    assert cfg.sources["hbm_latency_cycles"].startswith("h200-ideal: ")
    assert "fp16: measured" in cfg.sources["tensor_flops_per_s"] and "fp32: measured" in cfg.sources["tensor_flops_per_s"]
    effs = {(e.m, e.n, e.k, e.num_warps): e.efficiency for e in cfg.tensor_tile_efficiency}
    assert effs == {(128, 128, 64, 8): 1.0, (16, 16, 16, 4): 0.1}
    fields = [m.field for m in cfg.measurements]
    assert "l2_sweep_bandwidth_bytes_per_s[W=1MiB]" in fields and "hbm_copy_bandwidth_bytes_per_s" in fields
    assert any(f.startswith("tile_flops_per_s[fp16 m=16") for f in fields)
    assert cfg.simt_lane_ops_per_clk_per_sm == {"mul": 120.0, "cast": 30.0}
    assert cfg.sources["simt_lane_ops_per_clk_per_sm"].startswith("mul: measured")
    assert cfg.provenance["device_name"] == "NVIDIA H200"
    out = tmp_path / "h200-measured.yaml"
    cal.write_config(cfg, out, "header line")
    loaded = load_gpu(out)
    assert loaded == cfg
    assert out.read_text().startswith("# header line\n")
    assert loaded.tile_efficiency(16, 16, 16, 4) == pytest.approx(0.1)


def test_build_config_with_nothing_measured_is_the_base():
    base = load_gpu("h200-ideal")
    cfg, rejected = cal.build_config(base, {"fields": {}, "tiles": []}, "x")
    assert cfg.hbm_read_bandwidth_bytes_per_s == base.hbm_read_bandwidth_bytes_per_s and not rejected


def test_tile_efficiencies():
    tiles = [{"m": 64, "n": 64, "k": 32, "num_warps": 4, "flops_per_s": 300.0},
             {"m": 64, "n": 64, "k": 32, "num_warps": 8, "flops_per_s": 600.0, "dtype": "fp16"},
             {"m": 64, "n": 64, "k": 32, "num_warps": 8, "flops_per_s": 900.0, "dtype": "bf16"},
             {"m": 16, "n": 16, "k": 16, "num_warps": 4, "error": "x"}]
    effs = cal.tile_efficiencies(tiles, 600.0)
    assert [e["efficiency"] for e in effs] == [0.5, 1.0]


def test_plans_are_sane():
    for plan in (FULL, QUICK):
        assert all(m >= 16 and n >= 16 and k >= 16 for m, n, k, _ in plan.tile_shapes)
        assert len(set(plan.tile_shapes)) == len(plan.tile_shapes)
        assert plan.hbm_chase_hops[1] < plan.hbm_latency_buffers[0] // 4160
    assert len(QUICK.tile_shapes) < len(FULL.tile_shapes)


def test_launch_costs_smallest_increment():
    # T(k) = 5 + 2 (k - 1) with a host that falls behind at k = 4: the smallest slope is the cost
    per, fixed = cal.launch_costs((1, 2, 3, 4), (5.0, 7.0, 9.0, 14.0))
    assert per == pytest.approx(2.0) and fixed == pytest.approx(3.0)
    assert cal.launch_costs((1, 2), (5.0, 4.0)) == (0.0, 5.0)          # noise: never negative


def test_clock_from_device_order_of_sources():
    dev = {"nvidia_smi": {"clocks.max.sm": "1980"}, "triton": {"sm_clock_rate": 1755000}, "clock_rate": 1500000}
    assert cal.clock_from_device(dev) == (1.98e9, "nvidia-smi clocks.max.sm")
    dev["nvidia_smi"] = {"clocks.max.sm": "[N/A]"}                     # unreadable: the next source
    assert cal.clock_from_device(dev)[0] == pytest.approx(1.755e9)
    del dev["triton"]
    assert cal.clock_from_device(dev)[0] == pytest.approx(1.5e9)
    assert cal.clock_from_device({"nvidia_smi": {"error": "not found"}}) == (None, "")


def test_op_rates_from_times():
    # 132 SMs at 2 GHz; every op kind's loop trips cover elems = sm x CTAs x tile x REPS lane-ops
    sm, clk = 132, 2e9
    elems = sm * ops.CTAS_PER_SM * ops.ROWS * ops.COLS * ops.REPS

    def us(cycles_per_sm):
        return cycles_per_sm / clk * 1e6

    per_sm = elems / sm
    times = {"mul": us(per_sm / 128), "add": us(per_sm / 64),
             "maximum": us(per_sm / 128 + per_sm / 64 + per_sm / 32)}       # maximum itself: 32 per clock
    r = ops.rates_from_times(times, sm, clk)
    assert r["mul"] == pytest.approx(128.0) and r["add"] == pytest.approx(64.0)
    assert r["maximum"] == pytest.approx(32.0)
    assert "cast" not in r and "sfu" not in r
