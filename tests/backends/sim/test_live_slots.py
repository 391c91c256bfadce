"""A SIMT op on a tile whose elements past the row's end are compile-time constants issues only the
register slots its live elements keep (``tile_elements.issued_share``)."""
from gpusim import kernels
from gpusim.backends.sim.steps import SimtStep, compile_program
from gpusim.hardware import load_gpu


def _simt_cycles(BLOCK: int, cols: int, num_warps: int) -> float:
    p = dict(rows=64, cols=cols, BLOCK=BLOCK, dtype="bf16", num_stages=2, num_warps=num_warps)
    ln = kernels.build("layernorm", p).launches[0]
    steps, _ = compile_program(ln.program, load_gpu("h100"))
    return sum(s.vector_cycles for s in steps if isinstance(s, SimtStep))


def test_a_tile_wider_than_its_row_costs_the_slots_the_row_reaches():
    # Triton's sm_90 code for a layernorm over 112 columns on 8 warps has the same 184 instructions
    # at BLOCK 4096 and 8192 (triton 3.9): the row's 112 bf16 elements reach one 8-element slot of
    # each thread, the other slots are the load's constant and fold away
    at_2048, at_8192 = _simt_cycles(2048, 112, 8), _simt_cycles(8192, 112, 8)
    assert abs(at_8192 / at_2048 - 1) < 1e-9
    # a row that fills the tile costs it all: 4x the work at 4x the width
    assert abs(_simt_cycles(8192, 8192, 8) / _simt_cycles(2048, 2048, 8) - 4) < 0.05
    # on one warp a 2048-wide tile has 8 slots of 256 elements: the 112 columns keep one of them
    assert _simt_cycles(2048, 112, 1) < 0.2 * _simt_cycles(2048, 2048, 1)
