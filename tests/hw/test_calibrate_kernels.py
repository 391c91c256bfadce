"""Calibration kernels and stages on the Triton interpreter (TRITON_INTERPRET=1): the microbenchmark
kernels compute what they should, and the whole benchmark sequence runs with a stand-in timer.
Needs triton and torch (the whole module is skipped without them)."""
import json
import math
import os

import numpy as np
import pytest

if os.environ.get("GPUSIM_TRITON_TEST_DEVICE", "cpu") == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"     # before triton is imported

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from gpusim.hardware import load_gpu  # noqa: E402
from gpusim.hw.calibrate import bench, compute, fit, ops  # noqa: E402
from gpusim.hw.calibrate.plan import Plan  # noqa: E402
from gpusim.hw.calibrate.runner import Calibrator  # noqa: E402

MIB = 1 << 20
needs_interp = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs the Triton interpreter")


@needs_interp
def test_streaming_kernels():
    x = torch.arange(4 * 64, dtype=torch.float32)
    out = torch.zeros(4)
    bench.launch_read(x, out, block=64)
    assert torch.allclose(out, x.view(4, 64).sum(1))
    y = torch.zeros_like(x)
    bench.launch_write(y, 2.5, block=64)
    assert torch.all(y == 2.5)
    bench.launch_copy(x, y, block=64)
    assert torch.equal(x, y)
    sums = torch.zeros(3)
    bench.launch_sweep(x, sums, working_elems=128, total_iters=2 * 10, grid=3, block=64)   # 2 chunks, 20 reads
    assert float(sums.sum()) == pytest.approx(10 * float(x[:128].sum()))


@needs_interp
def test_chase_kernel_follows_the_cycle():
    pos, nxt = fit.cyclic_chase(50, 8, seed=1)
    buf = torch.zeros(400, dtype=torch.int32)
    buf[torch.from_numpy(pos)] = torch.from_numpy(nxt.astype(np.int32))
    out = torch.zeros(1, dtype=torch.int32)
    bench.launch_chase(buf, out, 7, int(pos[0]))
    assert int(out[0]) == int(pos[7])
    bench.launch_chase(buf, out, 50, int(pos[0]))
    assert int(out[0]) == int(pos[0])


@needs_interp
@pytest.mark.parametrize("dtype,tf32", [("fp16", False), ("fp32", True)])
def test_mma_kernel(dtype, tf32):
    tdt = torch.float16 if dtype == "fp16" else torch.float32
    a = torch.randn(32, 16).to(tdt)
    b = torch.randn(16, 64).to(tdt)
    c = torch.zeros(2 * 32 * 64)
    bench.launch_mma(a, b, c, 3, 32, 64, 16, grid=2, num_warps=4, tf32=tf32)
    ref = 3 * (a.float() @ b.float())
    assert torch.allclose(c[32 * 64:].view(32, 64), ref, rtol=1e-3, atol=1e-3)


@needs_interp
def test_fma_and_exp2_kernels_compute_their_chains():
    out = torch.zeros(2 * 64)
    bench.launch_fma(out, 3, grid=2, a=0.5, b=1.0, block=64)
    x = np.arange(64, dtype=np.float64) * 1e-3 + 1
    for _ in range(3 * bench.FMA_PER_ITER):
        x = x * 0.5 + 1.0
    assert np.allclose(out[64:].numpy(), x, rtol=1e-5)
    bench.launch_exp2(out, 2, grid=2, c=0.25, block=64)
    x = np.arange(64, dtype=np.float64) * 1e-4
    for _ in range(2 * bench.FMA_PER_ITER):
        x = np.exp2(x) * 0.25
    assert np.allclose(out[:64].numpy(), x, rtol=1e-5)
    t = torch.zeros(1)
    bench.launch_tiny(t)
    assert float(t[0]) == 1.0


TINY = Plan(repeats=2, curve_repeats=2, rep_ms=1, warmup_ms=1, hbm_buffer_bytes=32 * 4096 * 4,
            l2_sizes_mib=(1, 2), l2_sweep_bytes=2 * MIB, sm_load_configs=((4, 1024),),
            tile_shapes=((16, 16, 16, 4), (32, 16, 32, 4)), tile_flops_per_cta=1.0, tile_rep_ms=1,
            tile_budget_s=120.0, hbm_latency_buffers=(80 * 4160,), l2_chase_nodes=16, hbm_chase_hops=(16, 64),
            fma_iters=2, exp2_iters=2, sm_load_cta_bytes=64 * 1024, sm_load_buffer_bytes=256 * 1024,
            tf32_shapes=((32, 32, 16, 4),))


@needs_interp
def test_whole_benchmark_sequence_on_the_interpreter(tmp_path):
    """Every stage's launches and self-checks run; the timer is a stand-in (1 ms, then 1.1 ms, ...)."""
    base = load_gpu("h200-ideal")
    c = Calibrator(TINY, base, device="cpu")
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
    cfg, rejected = fit.build_config(base, json.loads(json.dumps(raw)), "interp-measured")
    assert {"l2_latency_cycles", "hbm_latency_cycles"} <= set(rejected)     # 0 cycles with a flat timer
    out = tmp_path / "interp-measured.yaml"
    fit.write_config(cfg, out)
    assert load_gpu(out).name == "interp-measured"
    assert math.isfinite(load_gpu(out).hbm_write_bandwidth_bytes_per_s)


def test_simt_ops_stage_records_rates(monkeypatch):
    monkeypatch.setattr(ops, "measure", lambda sm, clk, log=print: ({"mul": 100.0, "sfu": 15.0},
                                                                    {"mul": 10.0, "exp2": 20.0}))
    c = Calibrator(TINY, load_gpu("h200-ideal"), device="cpu")
    compute.simt_ops(c)
    assert c.raw["fields"]["simt_lane_ops_per_clk_per_sm.mul"]["value"] == 100.0
    assert "simt_lane_ops_per_clk_per_sm.sfu" not in c.raw["fields"]
    assert c.raw["measurements"][0]["field"] == "sfu_ops_per_clk_per_sm[calibrate_ops exp2]"
    assert "simt_ops_failed" in c.raw["errors"]          # the other op kinds did not run
    cfg, _ = fit.build_config(load_gpu("h200-ideal"), c.raw, "x")
    assert cfg.simt_lane_ops_per_clk_per_sm == {"mul": 100.0}
