"""Timing model: traffic against closed forms, physical floors, sampling against full simulation."""
import math

import pytest

import gpusim
from gpusim.hardware import load_gpu
from gpusim.result import METRIC_COLUMNS

GPUS = ("a100-ideal", "h100-ideal", "h200-ideal")    # datasheet arithmetic


def naive_closed_form_bytes(b, h, n, d, es=2):
    s = b * h * n * n * es
    qkvo = 4 * b * h * n * d * es
    # qk writes S; scale reads and writes it; softmax reads it and writes P; pv reads P
    return 6 * s + qkvo


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("b,h,n", [pytest.param(4, 16, 1024, marks=pytest.mark.slow), (1, 8, 4096)])
def test_naive_dram_matches_closed_form(gpu, b, h, n):
    """The essay's regime: S (here >= 134 MB) is larger than the L2, so every crossing reaches HBM."""
    r = gpusim.simulate("attention_naive", gpu, batch=b, heads=h, seq_len=n, head_dim=64, check=False)
    assert r.dram_bytes == pytest.approx(naive_closed_form_bytes(b, h, n, 64), rel=0.05)


def test_naive_small_scores_hit_l2():
    """When S fits in the L2 (16 x 1024^2 x 2 B = 34 MB < 50 MB on h100), scale/softmax re-reads hit it."""
    r = gpusim.simulate("attention_naive", "h100", batch=2, heads=8, seq_len=1024, head_dim=64, check=False)
    assert r.dram_bytes < 0.95 * naive_closed_form_bytes(2, 8, 1024, 64)
    assert r.launch("scale").l2_hit_rate > 0.5


@pytest.mark.parametrize("block_m", [16, 32, 64, 128])
def test_flash_traffic_follows_tile_size(block_m):
    """SRAM<-L2 bytes = Q once + K and V once per query block (Theta(N^2 d^2 / M)); DRAM stays near
    the compulsory Q+K+V+O because K/V re-reads hit L2."""
    b, h, n, d = 1, 8, 4096, 64
    r = gpusim.simulate("attention_flash", "h100", batch=b, heads=h, seq_len=n, head_dim=d, BLOCK_M=block_m,
                        BLOCK_N=64, check=False)
    tile = b * h * n * d * 2
    assert r.l2_read_bytes == pytest.approx(tile * (1 + 2 * math.ceil(n / block_m)), rel=0.02)
    assert r.dram_write_bytes == pytest.approx(tile, rel=0.01)
    assert 3 * tile * 0.99 <= r.dram_read_bytes <= 3 * tile * 1.3


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("kernel,p", [
    ("attention_naive", dict(batch=1, heads=8, seq_len=2048)),
    ("attention_flash", dict(batch=2, heads=8, seq_len=2048)),
    ("attention_flash", dict(batch=2, heads=8, seq_len=2048, causal=True, BLOCK_M=64)),
    ("elementwise_chain", dict(n=1 << 22)),
    ("matmul", dict(M=2048, N=2048, K=2048)),
])
def test_no_kernel_beats_its_floor(gpu, kernel, p):
    cfg = load_gpu(gpu)
    r = gpusim.simulate(kernel, gpu, check=False, **p)
    for k in r.kernels:
        t = k.cycles / cfg.clock_hz
        floor_mem = k.dram_read_bytes / cfg.hbm_read_bandwidth_bytes_per_s + k.dram_write_bytes / cfg.hbm_write_bandwidth_bytes_per_s
        floor_flops = k.tensor_flops / cfg.tensor_flops_per_s[p.get("dtype", "fp16")]
        assert t >= max(floor_mem, floor_flops) * (1 - 1e-9), k.launch


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("n", [1024, 2048, pytest.param(8192, marks=pytest.mark.slow)])   # 8192: 4 s a GPU
def test_flash_faster_than_naive(gpu, n):
    p = dict(batch=2, heads=16, seq_len=n, head_dim=64, check=False)
    assert gpusim.simulate("attention_flash", gpu, **p).time_us < gpusim.simulate("attention_naive", gpu, **p).time_us


@pytest.mark.parametrize("gpu", [pytest.param(g, marks=pytest.mark.slow) if g != "h100-ideal" else g for g in GPUS])
def test_elementwise_fusion_ratio(gpu):
    def ratio(n):
        return (gpusim.simulate("elementwise_chain", gpu, n=n).time_us
                / gpusim.simulate("elementwise_fused", gpu, n=n).time_us)
    big, mid, small = ratio(1 << 28), ratio(1 << 20), ratio(1 << 10)
    assert 2.7 <= big <= 3.05
    assert 1.8 <= small <= 2.3
    assert small < mid < big


# the default run keeps one point of each kernel and of the sliding window (about 1 s each); the
# larger flash and naive points (3-5 s each) run with the slow tests
@pytest.mark.parametrize("kernel,p,tol", [
    ("attention_flash", dict(batch=1, heads=16, seq_len=2048, head_dim=64), 0.02),
    pytest.param("attention_flash", dict(batch=16, heads=32, seq_len=1024, head_dim=64, BLOCK_M=64), 0.02,
                 marks=pytest.mark.slow),
    pytest.param("attention_flash", dict(batch=4, heads=32, seq_len=2048, head_dim=64, causal=True, BLOCK_M=64),
                 0.02, marks=pytest.mark.slow),
    # a sliding window: the short CTAs at the start of each head end in bunches for several waves
    # after the synchronised start (a rate counted from completions was 10% slow here)
    ("attention_flash", dict(batch=1, heads=32, seq_len=8192, head_dim=128, causal=True, window=2048, BLOCK_M=128,
                             BLOCK_N=64, num_warps=8), 0.02),
    pytest.param("attention_naive", dict(batch=2, heads=8, seq_len=2048, head_dim=64), 0.02, marks=pytest.mark.slow),
    ("matmul", dict(M=8192, N=8192, K=512), 0.02),
    # 4 stages, long K, one wave: merged steps of a loop with two tiles in flight ahead (pipeline.merged_wait;
    # the rule of up to 3 stages had fast mode 23% faster than full on h100)
    pytest.param("matmul", dict(M=6144, N=256, K=4096, BLOCK_M=128, BLOCK_N=64, BLOCK_K=32, num_stages=4,
                                num_warps=4), 0.04, marks=pytest.mark.slow),
])
@pytest.mark.parametrize("gpu", ["h100-ideal", "h100"])
def test_sampling_matches_full_simulation(kernel, p, tol, gpu, request):
    # flash B1 H16 N2048 d64 on h100 was a known gap (fast mode 9.5% slower than full) until the estimated
    # view's loop floor (loop_estimate.py) held both runs to it: 57.6 vs 55.5 us, 3.7%
    # on the measured h100 (fill rates and per-iteration latency, which merged loop steps charge
    # once per group of iterations) fast mode is within 3% of full. A merged tile's lines are ready
    # for the CTAs that share them only when its last iteration's would be (MemoryPath.load): when
    # they were all ready after one latency, flash d=64 at 2048 (K/V shared by 16 CTAs) was 9% fast
    # once a tile's round trip grew with its lines (request_latency_cycles)
    tol = tol if gpu.endswith("-ideal") else 0.05
    fast = gpusim.simulate(kernel, gpu, check=False, **p)
    full = gpusim.simulate(kernel, gpu, check=False, fidelity="full", **p)
    assert any(k.simulated_ctas < k.total_ctas or k.loop_group > 1 for k in fast.kernels), "no approximation was used"
    assert all(k.simulated_ctas == k.total_ctas and k.loop_group == 1 for k in full.kernels)
    assert fast.time_us == pytest.approx(full.time_us, rel=tol)
    assert fast.dram_bytes == pytest.approx(full.dram_bytes, rel=tol)
    # arithmetic depends on the shape alone: a sampled launch counts it exactly
    assert fast.tensor_flops == full.tensor_flops and fast.flops == full.flops


def test_infeasible_tile_is_reported_not_simulated():
    r = gpusim.simulate("attention_flash", "h100", head_dim=256, BLOCK_M=256, BLOCK_N=256, num_stages=3)
    assert r.status == "infeasible"
    assert "KiB of SRAM per CTA, h100 allows 227 KiB" in r.reason
    assert r.time_us is None


def test_occupancy_limits():
    r = gpusim.simulate("attention_flash", "h100", batch=1, heads=4, seq_len=1024, head_dim=128, BLOCK_M=128,
                        BLOCK_N=128, num_stages=3, check=False)
    k = r.kernels[0]
    # Q 32 KiB + 3 stages x (K 32 KiB + V 32 KiB) = 224 KiB: one CTA per SM, limited by SRAM
    assert (k.ctas_per_sm, k.occupancy_limiter) == (1, "sram")


def test_launch_overhead_is_counted():
    cfg = load_gpu("h100")
    r = gpusim.simulate("elementwise_chain", "h100", n=128)
    assert r.time_us >= 3 * cfg.launch_overhead_us + cfg.sync_overhead_us


def test_every_result_reports_its_simulation_wall_time():
    r = gpusim.simulate("elementwise_fused", "h100", n=4096, check=False)
    assert r.sim_wall_s is not None and r.sim_wall_s > 0
    assert r.row()["sim_wall_s"] == round(r.sim_wall_s, 4)
    assert "sim_wall_s" in METRIC_COLUMNS


def _no_wall(row):
    return {k: v for k, v in row.items() if k != "sim_wall_s"}


def test_determinism_of_results():
    a = gpusim.simulate("attention_flash", "a100", batch=1, heads=8, seq_len=2048, check=False)
    b = gpusim.simulate("attention_flash", "a100", batch=1, heads=8, seq_len=2048, check=False)
    assert _no_wall(a.row()) == _no_wall(b.row()) and [k.row(0) for k in a.kernels] == [k.row(0) for k in b.kernels]


def test_check_runs_on_small_problems():
    r = gpusim.simulate("attention_flash", "h100", batch=1, heads=1, seq_len=100, head_dim=32, BLOCK_M=32, BLOCK_N=32)
    assert r.max_rel_err is not None and r.max_rel_err <= 2e-3
