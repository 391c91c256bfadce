"""FlashAttention's Theorem 2 in the simulator: with Algorithm 1's tiles for SRAM size M, the
L2 -> SRAM traffic of attention_flash is Q + (N / Bc)(K + V), i.e. Theta(N^2 d^2 / M)."""
import math

import pytest

import gpusim
from gpusim.hardware import load_gpu

KIB = 1024
B, H, N, D = 1, 2, 1024, 64


def _tiles(m_bytes, d, b=2):
    """Algorithm 1: Bc = M / 4d elements (the block that stays on chip: attention_flash's BLOCK_M),
    Br = min(Bc, d) (the streamed block: BLOCK_N); one stage, so Q + K + V tiles fit in M."""
    bc = 1 << int(math.log2(m_bytes / (4 * d * b)))
    return bc, min(bc, d)


def _gpu(m_bytes):
    cfg = load_gpu("h200")
    return cfg.model_validate({**cfg.model_dump(), "sram_bytes_per_sm": m_bytes, "sram_bytes_per_cta_max": m_bytes})


@pytest.mark.parametrize("d", [64])
def test_l2_to_sram_traffic_follows_theorem_2(d):
    sizes = [KIB * 2 ** i for i in range(3, 8)]           # 8 .. 128 KiB: Bc = 16 .. 256
    measured, closed = [], []
    for m in sizes:
        bc, br = _tiles(m, d)
        r = gpusim.simulate("attention_flash", _gpu(m), check=False, batch=B, heads=H, seq_len=N, head_dim=d,
                            BLOCK_M=bc, BLOCK_N=br, num_stages=1)
        assert r.status == "ok", r.reason
        assert r.kernels[0].occupancy_limiter in ("sram", "registers")
        measured.append(r.sram_read_bytes)
        # Theta(N^2 d^2 / M) with Algorithm 1's constant (K and V, N/Bc passes) plus Q read once
        closed.append(B * H * (8.0 * N * N * d * d * 4 / m + N * d * 2))
    for m, got, want in zip(sizes, measured, closed):
        assert got == pytest.approx(want, rel=0.10), (m, got, want)
    # and it halves each time M doubles (not just close to a formula at one end)
    for a, b in zip(measured, measured[1:]):
        assert 0.45 < b / a < 0.6


def test_tiles_that_do_not_fit_the_sram_are_infeasible():
    r = gpusim.simulate("attention_flash", _gpu(16 * KIB), check=False, batch=B, heads=H, seq_len=N, head_dim=D,
                        BLOCK_M=64, BLOCK_N=64, num_stages=1)
    assert r.status == "infeasible" and "SRAM" in r.reason
