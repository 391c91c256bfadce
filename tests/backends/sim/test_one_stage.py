"""One pipeline stage: Triton copies no tile with cp.async; each tile that feeds a dot is loaded
with LDG into registers and stored with STS, in program order, so a staged tile loaded after a dot
(flash's V after Q K^T) is requested only once the tiles before that dot have arrived. Measured on
the H200 by benchmarks/kernels/chain_dot_stages.yaml (micro/val_chain_dot_stages): one stage takes
1.3-2.1x the time of two."""
import pytest

from gpusim import simulate
from gpusim.backends.sim import codegen
from gpusim.backends.sim import steps as st
from gpusim.hardware import load_gpu
from gpusim.kernels import build

CHAIN = "benchmarks/kernels/chain_dot.py:chain_dot"


@pytest.fixture(scope="module")
def h200():
    return load_gpu("configs/h200.yaml")


def _loop(kernel, h200, **p):
    prog = build(kernel, p).launches[0].program
    steps, _ = st.compile_program(prog, h200)
    (loop,) = [s for s in steps if isinstance(s, st.LoopStep)]
    return loop


def test_flash_v_waits_for_k_at_one_stage_only(h200):
    one = _loop("attention_flash", h200, num_stages=1, seq_len=256, batch=1, heads=1)
    k, v = [ld for ld in one.loads if ld.sram]
    assert (k.after_dot, v.after_dot) == (False, True)
    assert k.via_registers and v.via_registers
    assert codegen.one_stage_serial(one) == ((k.idx,), (v.idx,))
    two = _loop("attention_flash", h200, num_stages=2, seq_len=256, batch=1, heads=1)
    assert not any(ld.via_registers for ld in two.loads)


def test_a_gemm_has_nothing_to_chain(h200):
    # A and B feed the same dot: both are requested at the top of the iteration
    loop = _loop("matmul", h200, num_stages=1, M=256, N=256, K=256)
    assert codegen.one_stage_serial(loop) is None
    assert all(ld.via_registers for ld in loop.loads if ld.sram)


@pytest.mark.parametrize("D,BLOCK_M", [(64, 64), (128, 64)])
def test_one_stage_is_slower_than_two(h200, D, BLOCK_M):
    # measured 1.53x (D 64) and 1.93x (D 128) at BLOCK_M 64, one CTA per SM; two stages copy both
    # tiles together with cp.async
    t = [simulate(CHAIN, h200, trips=256, BLOCK_N=64, num_warps=4, num_stages=s, D=D, BLOCK_M=BLOCK_M,
                  ctas=132).time_us for s in (1, 2)]
    assert 1.3 < t[0] / t[1] < 2.2
