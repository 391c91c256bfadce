"""Occupancy is never clamped: a CTA that does not fit on one SM is infeasible, with the numbers."""
import pytest

from gpusim import simulate
from gpusim.backends.sim import cost
from gpusim.kernels import build, resolve_params
from gpusim.hardware import load_gpu

BIG = dict(M=1024, N=1024, K=1024, BLOCK_M=256, BLOCK_N=256, BLOCK_K=128, num_warps=32, num_stages=1)


def _prog(**kw):
    return build("matmul", resolve_params("matmul", kw)).launches[0].program


def test_too_many_registers_is_infeasible_with_the_numbers():
    with pytest.raises(cost.InfeasibleError, match=r"needs 107,520 registers per CTA .* 65,536 per SM"):
        cost.occupancy(_prog(**BIG), load_gpu("h100"), resources="estimated")
    r = simulate("matmul", "h100", check=False, **BIG)
    assert r.status == "infeasible" and "107,520 registers" in r.reason and r.time_us is None


def test_registers_from_the_compiled_view_decide():
    """With the compiled view the compiler's count is used: ptxas capped at 64 per thread fits."""
    from gpusim.compiler import CompilerView

    class Comp:
        registers_per_thread, spills = 64, True

    view = CompilerView("triton 3.6.0", 64, Comp())
    occ = cost.occupancy(_prog(**BIG), load_gpu("h100"), view=view)
    assert occ.ctas_per_sm == 1 and occ.resources == "compiled" and occ.registers_per_thread == 64
    with pytest.raises(cost.InfeasibleError, match=r"98,304 registers per CTA \(96 per thread, triton 3.6.0"):
        cost.occupancy(_prog(**BIG), load_gpu("h100"), view=CompilerView("triton 3.6.0", 96, Comp()))


def test_sram_per_sm_below_the_cta_is_infeasible():
    """A what-if SM with less SRAM than one CTA uses (per-CTA limit left high) refuses the point."""
    cfg = load_gpu("h100").model_copy(update={"sram_bytes_per_sm": 16 * 1024})
    prog = _prog(M=512, N=512, K=512, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=3)
    with pytest.raises(cost.InfeasibleError, match=r"KiB of SRAM per CTA, h100 has 16 KiB per SM"):
        cost.occupancy(prog, cfg, resources="estimated")


def test_a_fitting_cta_is_unchanged():
    occ = cost.occupancy(_prog(M=512, N=512, K=512, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4,
                               num_stages=3), load_gpu("h100"), resources="estimated")
    assert occ.ctas_per_sm >= 1


def test_shared_memory_the_compiler_allocates_past_the_limit_is_infeasible():
    """Triton's own shared memory (a whole-row reduction's scratch) counts: such a kernel does not
    launch (OutOfResources on an H100: 393216 bytes wanted, 232448 allowed), so it gets no time."""
    from gpusim.compiler import CompilerView

    class Comp:
        registers_per_thread, spills, shared_bytes = 64, False, 393216

    prog = build("layernorm", resolve_params("layernorm", dict(rows=512, cols=128256, BLOCK=0, num_warps=16,
                                                                 dtype="bf16"))).launches[0].program
    with pytest.raises(cost.InfeasibleError, match=r"Triton allocates 384 KiB of shared memory per CTA .* 227 KiB"):
        cost.occupancy(prog, load_gpu("h100"), view=CompilerView("triton 3.6.0", 64, Comp()))
    Comp.shared_bytes = 200 * 1024
    assert cost.occupancy(prog, load_gpu("h100"), view=CompilerView("triton 3.6.0", 64, Comp())).ctas_per_sm >= 1
