"""The numbers docs/attention-is-memory-bound.md claims, checked fast (benchmarks/essay.py prints them all)."""
import pytest

import gpusim
from gpusim.hardware import load_gpu

SHAPE = dict(head_dim=64, dtype="fp16")


@pytest.mark.parametrize("n, mb", [(2048, 8.4), (4096, 33.6), (8192, 134.2), (16384, 536.9)])
def test_score_matrix_per_head(n, mb):
    w = gpusim.build("attention_naive", dict(SHAPE, batch=1, heads=1, seq_len=n))
    assert round(w.tensors["s"].nbytes / 1e6, 1) == mb


def test_batch8_heads32_score_matrices_and_four_crossings():
    w = gpusim.build("attention_naive", dict(SHAPE, batch=8, heads=32, seq_len=8192))
    s = w.tensors["s"].nbytes
    assert round(s / 1e9, 1) == 34.4
    assert round(4 * s / 1e9) == 137
    assert 4 * s / 2e12 * 1e3 == pytest.approx(68.7, abs=0.05)          # ms at the essay's 2 TB/s
    cfg = load_gpu("a100-80gb-ideal")
    assert cfg.hbm_read_bandwidth_bytes_per_s == 2.039e12
    # gpusim's naive workload holds three n x n buffers (S, S/sqrt(d), P): more than the 80 GB part holds
    nn = sum(t.nbytes for t in w.tensors.values() if t.shape[-1] == t.shape[-2] == 8192)
    assert round(nn / 1e9, 1) == 103.1 and nn > cfg.hbm_bytes


def test_crossings_from_counters_scale_down():
    """B1 H4 N8192 (S = 537 MB, far larger than the L2): the essay's four crossings come out of the
    per-launch counters as 4 x S, and gpusim's separate scale pass adds 2 x S."""
    p = dict(SHAPE, batch=1, heads=4, seq_len=8192)
    s = gpusim.build("attention_naive", p).tensors["s"].nbytes
    r = gpusim.simulate("attention_naive", "a100-80gb-ideal", check=False, **p)
    qk, sc, sm, pv = (r.launch(x) for x in ("qk", "scale", "softmax", "pv"))
    four = qk.dram_write_bytes + sm.dram_read_bytes + sm.dram_write_bytes + pv.dram_read_bytes
    assert four == pytest.approx(4 * s, rel=0.05)
    assert sc.dram_read_bytes + sc.dram_write_bytes == pytest.approx(2 * s, rel=0.05)
    # the launches are memory-bound: each takes about its DRAM bytes over the HBM bandwidth
    bw = load_gpu("a100-80gb-ideal").hbm_read_bandwidth_bytes_per_s
    for k in (qk, sc, sm, pv):
        assert k.time_us * 1e-6 == pytest.approx((k.dram_read_bytes + k.dram_write_bytes) / bw, rel=0.1)
    assert r.bound == "memory"
    assert r.arithmetic_intensity < load_gpu("a100-80gb-ideal").ridge_flop_per_byte("fp16")


def test_flash_compute_bound_and_ridges():
    assert load_gpu("a100-80gb-ideal").ridge_flop_per_byte("fp16") == pytest.approx(153, abs=0.5)
    assert load_gpu("a100-ideal").ridge_flop_per_byte("fp16") == pytest.approx(201, abs=0.5)
    # 3 stages: at 2 Triton's pipeliner copies no tile ahead (each iteration waits for its own loads,
    # measured by benchmarks/micro_fidelity.py mlp), so the loop is latency-bound, not compute-bound
    f = gpusim.simulate("attention_flash", "a100-80gb-ideal", check=False,
                        **dict(SHAPE, batch=1, heads=4, seq_len=8192, num_stages=3))
    assert f.bound in ("tensor", "simt") and f.arithmetic_intensity > 201


def test_fused_elementwise_about_3x_above_l2():
    c = gpusim.simulate("elementwise_chain", "a100-80gb-ideal", n=1 << 26)
    f = gpusim.simulate("elementwise_fused", "a100-80gb-ideal", n=1 << 26)
    assert c.time_us / f.time_us > 2.7
    assert c.dram_bytes / f.dram_bytes == pytest.approx(3, rel=0.05)


def test_fused_elementwise_about_2x_when_tiny():
    c = gpusim.simulate("elementwise_chain", "a100-80gb-ideal", n=1 << 12)
    f = gpusim.simulate("elementwise_fused", "a100-80gb-ideal", n=1 << 12)
    assert c.time_us / f.time_us == pytest.approx(2, abs=0.1)
