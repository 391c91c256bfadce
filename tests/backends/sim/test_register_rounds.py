"""Tiles staged through registers (LDG, then STS: rows aligned to 2 bytes, or one stage) arrive in
as many round trips as the compiled loop loads into one register before storing it
(``staging.register_rounds``): ptxas keeps few registers for the copy, so each LDG into a register
waits for the STS that empties it."""
from dataclasses import replace

import pytest

from gpusim import simulate
from gpusim.backends.sim import compiled_steps
from gpusim.backends.sim.staging import register_rounds
from gpusim.backends.sim.steps import LoopStep
from gpusim.compiler.view import RESOURCES_ENV


def test_rounds_count_loads_into_one_stored_register():
    body = ("LDG.E.U16|R7|R4 R5", "LDG.E.U16|R8|R4 R5", "STS.U16||R9 R7", "STS.U16||R9 R8",
            "LDG.E.U16|R7|R4 R5", "STS.U16||R9 R7", "LDG.E.U16|R7|R4 R5", "STS.U16||R9 R7",
            "HGMMA.64x64x16.F32|R20|UR4")
    assert register_rounds(body) == 3.0
    assert register_rounds(body, unroll=2) == 1.5


@pytest.mark.parametrize("body", [
    ("LDGSTS.E.BYPASS.128||R4 R5", "HGMMA.64x64x16.F32|R20|UR4"),      # cp.async: no registers
    ("LDG.E.128|R8 R9 R10 R11|R4 R5", "FADD|R12|R8 R9", "LDG.E.128|R8 R9 R10 R11|R4 R5"),   # not stored
    (),
])
def test_no_register_staging_is_one_round(body):
    assert register_rounds(body) == 1.0


def _with_rounds(monkeypatch, rounds):
    real = compiled_steps.adjust_loops

    def adjust(steps, program, occupancy, cfg):
        return tuple(replace(s, register_rounds=rounds) if isinstance(s, LoopStep) else s
                     for s in real(steps, program, occupancy, cfg))
    monkeypatch.setattr(compiled_steps, "adjust_loops", adjust)


def test_rounds_slow_only_tiles_staged_through_registers(monkeypatch):
    # rows 1907 bf16 elements apart (2-byte aligned): B goes LDG -> STS, each round a round trip
    gemm = dict(M=96, K=256, BLOCK_M=64, BLOCK_N=128, BLOCK_K=32, num_warps=4, num_stages=2, dtype="bf16",
                check=False, calibration="off")
    monkeypatch.setenv(RESOURCES_ENV, "estimated")     # the same step list with or without triton
    base = {n: simulate("matmul", "h100", N=n, **gemm).time_us for n in (1907, 1920)}
    _with_rounds(monkeypatch, 4.0)
    four = {n: simulate("matmul", "h100", N=n, **gemm).time_us for n in (1907, 1920)}
    assert four[1907] > 2.0 * base[1907]           # B's round trips dominate each iteration
    assert four[1920] == pytest.approx(base[1920])  # aligned rows: cp.async, no registers


def test_one_stage_loops_are_ordered_by_one_stage_serial_instead(monkeypatch):
    # at one stage every staged tile goes LDG + STS, and K and V reuse the same registers: the
    # one-stage order charges that wait already, so the rounds are not charged again
    gemm = dict(M=96, N=1907, K=256, BLOCK_M=64, BLOCK_N=128, BLOCK_K=32, num_warps=4, num_stages=1,
                dtype="bf16", check=False, calibration="off")
    monkeypatch.setenv(RESOURCES_ENV, "estimated")
    base = simulate("matmul", "h100", **gemm).time_us
    _with_rounds(monkeypatch, 4.0)
    assert simulate("matmul", "h100", **gemm).time_us == pytest.approx(base)
