"""Register spills: a thread that needs more than 255 registers keeps the rest in local memory and
stores and reloads them every loop iteration (STL/LDL in the loop body).

Models: the STL + LDL bytes inside the compiled loop (or, estimated, twice 4 bytes per excess
register) times the CTA's threads cross the shared L2 channel and the SM's port once per
iteration, before its work; the STL bytes at the L2's write rate (``memory.MemoryPath.spill``,
``GPUConfig.l2_write_cost``).

Measured by: ``benchmarks/kernels/spill_live.py`` with 256 and 512 live fp32 values per thread
(runs at the L2's bandwidth for those bytes), ncu on the H200 (``micro/ncu_probe_round16.json``:
the L1 writes every local store through to the L2; the reloads miss it in kernels that hold much
shared memory), and ``benchmarks/l2_write.py`` (the L2 takes stores at 4.28 TB/s, reads at 9.07).

Effect: part of the compiler's view (docs/model.md, ablation "compiler view (registers, spills,
SASS)" off: median / p90 |error| +1.0 / +4.2 points on the recorded points, +0.8 / +2.0 held-out);
the write rate takes the 88 held-out points that spill from 11.6 / 47.6% to 8.8 / 26.7%.
"""
from __future__ import annotations

from ...dsl import ir


REGISTER_BYTES = 4


def spill_bytes_per_iteration(program: ir.Program, compiled=None, estimated_registers: int | None = None,
                              max_registers: int = 255) -> float:
    """Local-memory bytes (stores + reloads) one CTA moves per iteration of its loop.

    From the compiled kernel: the STL and LDL bytes inside its loops. Without it: every register
    beyond ``max_registers`` is stored and reloaded once per iteration."""
    threads = 32 * program.num_warps
    if compiled is not None:
        per_thread = getattr(compiled, "loop_spill_bytes", None)
        if per_thread is None:
            per_thread = compiled.spill_store_bytes + compiled.spill_load_bytes
        return float(per_thread) * threads
    if estimated_registers is None:
        return 0.0
    excess = max(0, estimated_registers - max_registers)
    return 2.0 * REGISTER_BYTES * excess * threads


def loop_spill_bytes_per_thread(compiled, ops: tuple = ("STL", "LDL"), mix: dict | None = None) -> float:
    """STL + LDL bytes per thread inside the compiled loop (``ops``: only those kinds; ``mix``: one
    loop body's opcode counts, default the kernel's loops together): the kernel's spill bytes times
    the share of its STL / LDL instructions that sit in the loop."""
    total = dict(compiled.sass)
    loop = dict(compiled.sass_loop) if mix is None else mix
    out = 0.0
    for op, nbytes in (("STL", compiled.spill_store_bytes), ("LDL", compiled.spill_load_bytes)):
        if op in ops and total.get(op):
            out += nbytes * loop.get(op, 0) / total[op]
    return out
