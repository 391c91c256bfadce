"""No impossible traffic: every byte a kernel reads comes from DRAM at least once."""
import pytest

from gpusim.api import simulate
from gpusim.hardware import load_gpu


@pytest.mark.parametrize("block_k", [32, 64])
@pytest.mark.parametrize("fidelity", ["fast", "full"])
def test_gemm_reads_its_operands_from_dram_at_least_once(block_k, fidelity):
    """A BLOCK_K 32 fp16 GEMM's tile rows are 64 bytes, half an L2 line: each iteration misses its
    own two sectors of the line (the L2 is sectored). DRAM reads must cover A and B once (a count
    that marked the whole line present but charged only the bytes asked for gave half of A)."""
    M, N, K = 1024, 128, 2048
    r = simulate("matmul", load_gpu("h200"), check=False, fidelity=fidelity,
                 M=M, N=N, K=K, BLOCK_M=64, BLOCK_N=64, BLOCK_K=block_k, num_stages=3, dtype="fp16", num_warps=4)
    compulsory = 2 * (M * K + K * N)
    got = r.kernels[0].dram_read_bytes
    assert compulsory <= got <= 1.1 * compulsory
