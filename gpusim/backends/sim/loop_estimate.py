"""A loop iteration's dependent-chain cycles and instruction mix without the compiled kernel: the
estimated view's counterpart of ``warp.loop_latency_cycles`` and ``issue.loop_issue_cycles``,
written from the DSL ops of each loop body in the layouts Triton gives them (``compiler.layouts``).

* Elementwise ops and reductions as ``straight_estimate`` emits them, ``LOOP_GROUP`` (4) elements
  of each thread at a time rather than 2 (ptxas interleaves more in a loop body: a streamed
  softmax's two bodies 754 / 473 cycles against the compiled 679 / 414 at 4, 993 / 673 at 2; a
  causal 128 x 64 flash tile 1176 against 1132, 1304 at 2), except that a value in a
  dot's result layout holds that layout's elements per thread (the blocks its warps repeat,
  ``cost.mma_duplication``, included) and is reduced across the 4 (along N) or 8 (along M) lanes
  and the warps that share its rows or columns.
* Each mma.sync dot: the ``LDSM`` a warp issues to read its shared-memory operands (its B columns;
  its A rows unless A stays in registers, a computed A first stored to shared memory behind a
  barrier), each 512 bytes, then its ``HMMA.16816``, which wait for them. A wgmma reads shared
  memory itself and adds nothing here.
* Loop-carried values: each yield is written to its carried value's register, so one
  iteration's chain feeds the next.

The body goes through the same scoreboard as a compiled body (``warp.iteration_cycles``: the
dependent latencies, the SFU, shuffle and shared-memory rates). What it leaves out (address
arithmetic, the copies' issue) only makes it a floor, which the engine uses as the compiled
view uses its own. A 16-row flash tile on 4 warps is held by its warps' shared-memory operand reads
(each warp re-reads its K and V columns for 16 rows) and its cross-warp softmax, not by the
tensor pipe.
"""
from __future__ import annotations

from collections import Counter

from ...compiler.layouts import MMA, OPERAND, SLICE, SMEM, Graph, ceil_div, dot_layouts, mma_issued, value_layouts
from ...dsl import analysis, ir
from ...hardware import GPUConfig
from .issue import loop_issue_cycles
from .straight_estimate import Emitter
from .warp import iteration_cycles, scoreboard_rates, schedulers

LDSM_BYTES = 512        # one LDSM.x4: four 8x8 matrices of 16-bit elements
LOOP_GROUP = 4          # elements per thread interleaved in a loop body's element code (module docstring)


def estimated_loops(program: ir.Program, cfg: GPUConfig) -> list:
    """Per top-level loop of ``program``, in order: (dependent-chain cycles of one CTA iteration,
    (issue cycles, SFU cycles) of its instruction mix). Empty without the config's latencies."""
    loops = [op for op in program.body if isinstance(op, ir.Loop)]
    if not loops or not cfg.dependent_latency_cycles:
        return []
    g = Graph(program)
    dots = dot_layouts(g, cfg.compute_capability or 90)
    lay = value_layouts(g, dots)
    fused = analysis.fma_contractions(program)
    out = []
    for lp in loops:
        body = loop_body(program, lp, lay, dots, fused)
        cyc = iteration_cycles(body, cfg.dependent_latency_cycles, scoreboard_rates(cfg), program.num_warps,
                               schedulers(cfg))
        mix = Counter(i.split("|", 1)[0].split(".", 1)[0] for i in body)
        out.append((cyc, loop_issue_cycles(None, program.num_warps, cfg, dict(mix))))
    return out


def loop_body(program: ir.Program, loop: ir.Loop, lay: dict, dots: dict, fused: frozenset = frozenset()) -> tuple:
    """One warp's instructions (``OP|dst regs|src regs``) for one iteration of ``loop``."""
    em = _LoopEmitter(program.num_warps, fused, lay, dots)
    for a, y in zip(loop.args, loop.yields):
        if isinstance(y, ir.Value) and isinstance(a, ir.Value):
            em.alias[y.id] = a.id
    em.emit(loop.body)
    return tuple(em.code)


class _LoopEmitter(Emitter):
    interleave = LOOP_GROUP

    def __init__(self, num_warps: int, fused: frozenset, lay: dict, dots: dict):
        super().__init__(num_warps, fused)
        self.lay, self.dots = lay, dots

    def _mma(self, v: ir.Value):
        """(layout, (kind, wm, wn)) of a value in a dot's result, slice or operand layout, else None."""
        lay = self.lay.get(v.id)
        if lay is None or lay[0] not in (MMA, SLICE, OPERAND) or self.dots[lay[1]][0] == "fma":
            return None
        return lay, self.dots[lay[1]]

    def per_thread(self, v: ir.Value) -> int:
        found = self._mma(v) if isinstance(v, ir.Value) and len(v.shape) == 2 else None
        if found is None:
            return super().per_thread(v)
        lay, (kind, wm, wn) = found
        m, n = v.shape
        if lay[0] == SLICE:     # a row (column) vector of the result: 2 rows (columns) per block
            return ceil_div(m, 16 * wm) * 2 if n == 1 else ceil_div(n, 8 * wn) * 2
        issued_m, issued_n = mma_issued(kind, m, n, wm, wn)
        return max(1, issued_m * issued_n // (32 * self.warps))

    def threads_along(self, v: ir.Value, axis: int) -> tuple:
        found = self._mma(v)
        if found is None or found[0][0] != MMA:
            return super().threads_along(v, axis)
        _, (kind, wm, wn) = found
        return (4, wn) if axis == 1 else (8, max(1, wm // 4) if kind == "v3" else wm)

    def dot(self, op: ir.Dot):
        """An mma.sync dot's shared-memory operand reads and MMAs (a wgmma: nothing here)."""
        kind, wm, wn = self.dots.get(id(op), ("fma", 1, 1))
        if kind != "v2":
            return
        (m, k), n = op.a.shape, op.b.shape[1]
        rows, cols, eb = ceil_div(m, 16 * wm), ceil_div(n, 8 * wn), ir.DTYPE_BYTES[op.a.dtype]
        a_lay = self.lay.get(op.a.id, (SMEM,))
        srcs = []
        if a_lay[0] != OPERAND:
            if a_lay[0] != SMEM:        # a computed A through shared memory: store, barrier, load
                for j in range(self.per_thread(op.a)):
                    self.code.append(f"STS|-|{self.reg(op.a, j)}")
                self.code.append("BAR|-|")
            srcs += self._ldsm(f"a{op.out.id}", rows * 16 * k * eb)
        srcs += self._ldsm(f"b{op.out.id}", k * cols * 8 * eb)
        per = self.per_thread(op.out)
        acc = [self.reg(op.acc, j) for j in range(per)] if isinstance(op.acc, ir.Value) else [""] * per
        mmas = rows * cols * ceil_div(k, 16)
        for i in range(mmas):
            j = i % per
            self.code.append(f"HMMA.16816.F32|{self.reg(op.out, j)}|{srcs[i % len(srcs)]} {acc[j]}".rstrip())

    def _ldsm(self, tag: str, nbytes: int) -> list:
        regs = [f"{tag}.{i}" for i in range(max(1, ceil_div(nbytes, LDSM_BYTES)))]
        self.code += [f"LDSM.16.M88.4|{r}|" for r in regs]
        return regs
