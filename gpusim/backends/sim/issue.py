"""Warp issue from the compiled loop's instruction mix.

Models: each non-tensor SASS instruction of a compiled loop body takes one issue slot per warp (an
SM issues ``warp_issue_per_clk_per_sm`` warp-instructions per clock) and each MUFU holds the
special-function pipe for 32 lanes; a loop's SIMT steps last at least that long. Each loop takes
its own body's counts (``body_mixes``). This sees work the tile-level op list cannot: work the
compiler duplicates across warps, layout conversions, index arithmetic, the reductions' shuffles.

Measured by: the SASS of the kernels compiled for sm_90 (``toolchain/compile.py``) against the
H200's times: a streamed softmax (8192 x 32768 fp16) was 49% too slow when every loop took all
loops' counts, 19% with each loop's own (docs/model.md, "Below the tile").

Effect: part of the compiler's view (docs/model.md, ablation "compiler view (registers, spills,
SASS)" off: median / p90 |error| +1.0 / +4.2 points on the recorded points, +0.8 / +2.0 held-out).
"""
from __future__ import annotations

from collections import Counter

from ...hardware import GPUConfig


TENSOR_OPCODES = ("HGMMA", "HMMA", "WARPGROUP")   # run on the tensor pipe (costed from FLOPs)


SFU_OPCODES = ("MUFU",)


def loop_issue_cycles(compiled, num_warps: int, cfg: GPUConfig, mix: dict | None = None) -> tuple | None:
    """(issue cycles, SFU cycles) one CTA's loop iteration puts on its SM, from the compiled loop
    body's instruction mix (``mix``: one body's, see ``body_mixes``; default the kernel's loops
    together): every non-tensor instruction takes one issue slot per warp (an SM issues
    ``warp_issue_per_clk_per_sm`` warp-instructions per clock), and every MUFU instruction holds the
    special-function pipe for 32 lanes. None when the loop mix is unknown.

    This sees what the tile-level op list cannot: work the compiler duplicates across warps (a
    64-row tile on 8 warps computes its softmax in both warpgroups), layout conversions, index
    arithmetic and the reductions' shuffles."""
    if mix is None:
        mix = dict(getattr(compiled, "sass_loop", ()) or ())
    if not mix:
        return None
    issue = sfu = 0
    for op, n in mix.items():
        if "." in op or op.startswith(TENSOR_OPCODES):   # "MUFU.EX2" details repeat "MUFU"
            continue
        issue += n
        if op.startswith(SFU_OPCODES):
            sfu += n
    return (issue * num_warps / cfg.warp_issue_per_clk_per_sm,
            sfu * num_warps * 32 / cfg.sfu_ops_per_clk_per_sm)


def body_mixes(compiled, loops: int) -> list | None:
    """Per compiled loop body, in program order: {opcode: count} (``sass_loop`` split by loop), when
    the kernel has exactly ``loops`` bodies (one per loop of the tile program); else None.

    A streamed row kernel has two or three loops (softmax: the statistics pass, then the normalising
    pass); each costs its own body's instructions, not the kernel's loops together."""
    bodies = getattr(compiled, "loop_bodies", None)
    if not bodies or len(bodies) != loops:
        return None
    return [dict(Counter(ins.split("|", 1)[0].split(".", 1)[0] for ins in b)) for b in bodies]
