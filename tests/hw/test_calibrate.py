"""Calibration without a GPU: the pure arithmetic, config building, and (under TRITON_INTERPRET=1)
the microbenchmark kernels and the whole benchmark sequence with a stand-in timer."""
import json
import math
import os

import numpy as np
import pytest

if os.environ.get("GPUSIM_TRITON_TEST_DEVICE", "cpu") == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"     # before triton is imported

from gpusim.hw import calibrate as cal  # noqa: E402
from gpusim.hardware import GPUConfig, load_gpu  # noqa: E402

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
    base = load_gpu("h200")
    cfg, rejected = cal.build_config(base, _raw(), "h200-measured")
    assert isinstance(cfg, GPUConfig) and cfg.name == "h200-measured"
    assert "measured" in cfg.description
    assert cfg.hbm_read_bandwidth_bytes_per_s == 4.3e12 and cfg.sm_count == 132 and isinstance(cfg.sm_count, int)
    assert cfg.tensor_flops_per_s == {"fp16": 700e12, "bf16": 690e12, "fp32": 350e12}
    assert cfg.clock_hz == 1.98e9
    assert set(rejected) == {"hbm_latency_cycles", "sram_bytes_per_cta_max", "not_a_field"}
    assert cfg.hbm_latency_cycles == base.hbm_latency_cycles
    assert cfg.sram_bytes_per_cta_max == base.sram_bytes_per_cta_max
    assert cfg.sources["hbm_read_bandwidth_bytes_per_s"].startswith("measured: synthetic (median of 3, spread 2.0%")
    assert cfg.sources["hbm_latency_cycles"].startswith("h200: ")
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
    base = load_gpu("h200")
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
    for plan in (cal.FULL, cal.QUICK):
        assert all(m >= 16 and n >= 16 and k >= 16 for m, n, k, _ in plan.tile_shapes)
        assert len(set(plan.tile_shapes)) == len(plan.tile_shapes)
        assert plan.hbm_chase_hops[1] < plan.hbm_latency_buffers[0] // 4160
    assert len(cal.QUICK.tile_shapes) < len(cal.FULL.tile_shapes)


# --------------------------------------------------------------------------- kernels (interpreter)
triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")
needs_interp = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs the Triton interpreter")


@needs_interp
def test_streaming_kernels():
    x = torch.arange(4 * 64, dtype=torch.float32)
    out = torch.zeros(4)
    cal.launch_read(x, out, block=64)
    assert torch.allclose(out, x.view(4, 64).sum(1))
    y = torch.zeros_like(x)
    cal.launch_write(y, 2.5, block=64)
    assert torch.all(y == 2.5)
    cal.launch_copy(x, y, block=64)
    assert torch.equal(x, y)
    sums = torch.zeros(3)
    cal.launch_sweep(x, sums, working_elems=128, total_iters=2 * 10, grid=3, block=64)   # 2 chunks, 20 reads
    assert float(sums.sum()) == pytest.approx(10 * float(x[:128].sum()))


@needs_interp
def test_chase_kernel_follows_the_cycle():
    pos, nxt = cal.cyclic_chase(50, 8, seed=1)
    buf = torch.zeros(400, dtype=torch.int32)
    buf[torch.from_numpy(pos)] = torch.from_numpy(nxt.astype(np.int32))
    out = torch.zeros(1, dtype=torch.int32)
    cal.launch_chase(buf, out, 7, int(pos[0]))
    assert int(out[0]) == int(pos[7])
    cal.launch_chase(buf, out, 50, int(pos[0]))
    assert int(out[0]) == int(pos[0])


@needs_interp
@pytest.mark.parametrize("dtype,tf32", [("fp16", False), ("fp32", True)])
def test_mma_kernel(dtype, tf32):
    tdt = torch.float16 if dtype == "fp16" else torch.float32
    a = torch.randn(32, 16).to(tdt)
    b = torch.randn(16, 64).to(tdt)
    c = torch.zeros(2 * 32 * 64)
    cal.launch_mma(a, b, c, 3, 32, 64, 16, grid=2, num_warps=4, tf32=tf32)
    ref = 3 * (a.float() @ b.float())
    assert torch.allclose(c[32 * 64:].view(32, 64), ref, rtol=1e-3, atol=1e-3)


@needs_interp
def test_fma_and_exp2_kernels_compute_their_chains():
    out = torch.zeros(2 * 64)
    cal.launch_fma(out, 3, grid=2, a=0.5, b=1.0, block=64)
    x = np.arange(64, dtype=np.float64) * 1e-3 + 1
    for _ in range(3 * cal.FMA_PER_ITER):
        x = x * 0.5 + 1.0
    assert np.allclose(out[64:].numpy(), x, rtol=1e-5)
    cal.launch_exp2(out, 2, grid=2, c=0.25, block=64)
    x = np.arange(64, dtype=np.float64) * 1e-4
    for _ in range(2 * cal.FMA_PER_ITER):
        x = np.exp2(x) * 0.25
    assert np.allclose(out[:64].numpy(), x, rtol=1e-5)
    t = torch.zeros(1)
    cal.launch_tiny(t)
    assert float(t[0]) == 1.0


TINY = cal.Plan(repeats=2, curve_repeats=2, rep_ms=1, warmup_ms=1, hbm_buffer_bytes=32 * 4096 * 4,
                l2_sizes_mib=(1, 2), l2_sweep_bytes=2 * MIB, sm_load_configs=((4, 1024),),
                tile_shapes=((16, 16, 16, 4), (32, 16, 32, 4)), tile_flops_per_cta=1.0, tile_rep_ms=1,
                tile_budget_s=120.0, hbm_latency_buffers=(80 * 4160,), l2_chase_nodes=16, hbm_chase_hops=(16, 64),
                fma_iters=2, exp2_iters=2, sm_load_cta_bytes=64 * 1024, sm_load_buffer_bytes=256 * 1024,
                tf32_shapes=((32, 32, 16, 4),))


@needs_interp
def test_whole_benchmark_sequence_on_the_interpreter(tmp_path):
    """Every stage's launches and self-checks run; the timer is a stand-in (1 ms, then 1.1 ms, ...)."""
    base = load_gpu("h200")
    c = cal.Calibrator(TINY, base, device="cpu")
    c.sm_count = 2
    calls = []

    def fake_bench(fn, n, rep_ms=None, warmup_ms=None):
        fn()
        calls.append(n)
        return [1.0 + 0.1 * i for i in range(n)]

    c.bench_ms = fake_bench
    raw = c.run_all()
    assert raw["errors"] == {}, raw["errors"]
    f = raw["fields"]
    for name in ("hbm_read_bandwidth_bytes_per_s", "hbm_write_bandwidth_bytes_per_s", "l2_bandwidth_bytes_per_s",
                 "sm_load_bytes_per_clk", "l2_latency_cycles", "hbm_latency_cycles", "tensor_flops_per_s.fp16",
                 "tensor_flops_per_s.bf16", "tensor_flops_per_s.fp32", "fp32_flops_per_s", "sfu_ops_per_clk_per_sm",
                 "launch_overhead_us", "sync_overhead_us"):
        assert name in f, name
    nb = TINY.hbm_buffer_bytes
    assert f["hbm_read_bandwidth_bytes_per_s"]["value"] == pytest.approx((nb / 1e-3 + nb / 1.1e-3) / 2)
    assert f["launch_overhead_us"]["value"] == pytest.approx(0.0, abs=1e-9)   # the stand-in timer: equal times
    assert len([t for t in raw["tiles"] if t.get("flops_per_s")]) == 4       # 2 fp16 shapes, bf16, tf32
    assert any(m["field"].startswith("l2_sweep_bandwidth_bytes_per_s[W=2MiB]") for m in raw["measurements"])
    raw["provenance"] = {"device_name": "interpreter"}
    cfg, rejected = cal.build_config(base, json.loads(json.dumps(raw)), "interp-measured")
    assert {"l2_latency_cycles", "hbm_latency_cycles"} <= set(rejected)     # 0 cycles with a flat timer
    out = tmp_path / "interp-measured.yaml"
    cal.write_config(cfg, out)
    assert load_gpu(out).name == "interp-measured"
    assert math.isfinite(load_gpu(out).hbm_write_bandwidth_bytes_per_s)


def test_simt_ops_stage_records_rates(monkeypatch):
    ops = pytest.importorskip("gpusim.hw.calibrate_ops")
    monkeypatch.setattr(ops, "measure", lambda sm, clk, log=print: ({"mul": 100.0, "sfu": 15.0},
                                                                     {"mul": 10.0, "exp2": 20.0}))
    c = cal.Calibrator(TINY, load_gpu("h200"), device="cpu")
    c.simt_ops()
    assert c.raw["fields"]["simt_lane_ops_per_clk_per_sm.mul"]["value"] == 100.0
    assert "simt_lane_ops_per_clk_per_sm.sfu" not in c.raw["fields"]
    assert c.raw["measurements"][0]["field"] == "sfu_ops_per_clk_per_sm[calibrate_ops exp2]"
    assert "simt_ops_failed" in c.raw["errors"]          # the other op kinds did not run
    cfg, _ = cal.build_config(load_gpu("h200"), c.raw, "x")
    assert cfg.simt_lane_ops_per_clk_per_sm == {"mul": 100.0}
