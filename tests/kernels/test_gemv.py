"""gemv_splitk: exact on numpy against float64 (split and unsplit, masked rows, columns and K), its
launches and traffic, and faster than the tiled matmul at decode shapes."""
import pytest

import gpusim
from gpusim.backends import numpy_exec as ne
from gpusim.kernels import KERNELS, build

TOL = {"fp16": 2e-3, "bf16": 1.6e-2, "fp32": 1e-5}
SHAPES = [dict(M=1, N=100, K=300, BLOCK_N=32, BLOCK_K=64, SPLIT_K=3),       # ragged N and K, split
          dict(M=5, N=64, K=256, BLOCK_N=16, BLOCK_K=32, SPLIT_K=1),        # one launch
          dict(M=20, N=70, K=130, BLOCK_N=32, BLOCK_K=32, SPLIT_K=4),       # two row blocks
          dict(M=3, N=50, K=70, BLOCK_N=16, BLOCK_K=16, SPLIT_K=8)]         # more splits than K chunks


@pytest.mark.parametrize("p", SHAPES, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_gemv_matches_float64(p, dtype):
    w = build("gemv_splitk", dict(p, dtype=dtype))
    assert ne.check(w, seed=4) <= TOL[dtype]


def test_launches_and_split_plan():
    w = build("gemv_splitk", dict(M=1, N=4096, K=4096, BLOCK_N=32, BLOCK_K=128, SPLIT_K=4))
    assert [(lc.name, lc.grid) for lc in w.launches] == [("gemv_split", (128, 4, 1)), ("gemv_reduce", (16, 1))]
    assert w.tensors["part"].shape == (4, 1, 4096) and w.tensors["w"].shape == (4096, 4096)
    one = build("gemv_splitk", dict(M=1, N=4096, K=4096, SPLIT_K=1))
    assert [lc.name for lc in one.launches] == ["gemv"] and "part" not in one.tensors
    # 8 splits of a 300-long K in steps of 64 leave 5 non-empty chunks of 64
    assert build("gemv_splitk", dict(M=1, N=64, K=300, BLOCK_K=64, SPLIT_K=8)).launches[0].grid[1] == 5
    assert "gemv_splitk" in KERNELS


def test_reads_the_weight_once_and_beats_the_tiled_matmul_at_batch_1():
    p = dict(M=1, N=4096, K=4096, dtype="bf16")
    # the mechanism (one read of the weight at the HBM rate), so the mechanistic times
    g = gpusim.simulate("gemv_splitk", "h100", check=False, calibration="off", BLOCK_N=32, BLOCK_K=128, SPLIT_K=1,
                        num_stages=4, **p)
    m = gpusim.simulate("matmul", "h100", check=False, calibration="off", BLOCK_M=16, BLOCK_N=32, BLOCK_K=128, **p)
    w_bytes = 4096 * 4096 * 2
    assert g.dram_read_bytes == pytest.approx(w_bytes, rel=0.01)
    assert g.time_us < 0.8 * m.time_us
    assert g.dram_read_bytes / (g.time_us * 1e-6) > 0.6 * 3.1e12     # most of the H100's HBM bandwidth
