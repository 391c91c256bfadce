"""The straight-line code's dependent-chain cycles without the compiled kernel: the estimated
view's counterpart of ``warp.straight_cycles``, written from the DSL ops outside every loop.

Each op becomes, per element a thread holds, the instructions its SASS issues, each reading the
one before (a chain): a math op its measured mix (``compiler.sass_mix.MATH``: ``issue`` FP32-pipe
instructions, ``mufu`` special-function ones), an fp32 division ``MATH["div"]``, any other
elementwise op or conversion one instruction (integer class for integer tiles and widening
conversions), an add the compiler contracts into an FMA none. A reduction is a chain of adds (or
max) over the thread's elements, a shuffle and an op per halving of its lanes along the axis, and
across warps a shared-memory store, a barrier, a load and the same tree over the warps (Triton's
two-level reduction). Loads and stores issue but wait for nothing here (the engine times memory),
constants and index tiles are hoisted.

Order: consecutive elementwise ops run element-group-major, ``GROUP`` elements of each thread at a
time through the whole run, as ptxas schedules straight-line element code (2 on the sm_90 SASS of
SwiGLU, softcap, RMSNorm and softmax rows). The code goes through the same scoreboard as the
compiled body (``warp.pass_cycles``: one warp per scheduler issuing in order, the dependent
latencies of ``GPUConfig.dependent_latency_cycles``, the SFU and shuffle rates), so a few-CTA
kernel held by one long chain gets the same floor in both views.
"""
from __future__ import annotations

import math

from ...compiler.sass_mix import MATH
from ...dsl import analysis, ir
from ...hardware import GPUConfig
from .warp import pass_cycles, scoreboard_rates, schedulers

GROUP = 2       # elements per thread interleaved in straight-line element code
TWO_PATHS = ("tanh", "erf")     # libdevice computes two ways and selects one (read from their sm_90 SASS)
ELEMENTWISE = (ir.Binary, ir.Unary, ir.Where, ir.Cast)
_WIDE = {"fp32", "int32"}


def estimated_straight_cycles(program: ir.Program, cfg: GPUConfig) -> float:
    """Cycles one CTA's warps take at least to issue ``program``'s code outside its loops, from its
    DSL ops (module docstring). 0 without the config's latencies."""
    if not cfg.dependent_latency_cycles:
        return 0.0
    body = straight_body(program, analysis.fma_contractions(program))
    return pass_cycles(body, cfg.dependent_latency_cycles, scoreboard_rates(cfg), program.num_warps,
                       schedulers(cfg))


def straight_body(program: ir.Program, fused: frozenset = frozenset()) -> tuple:
    """One warp's instructions (``OP|dst regs|src regs``) for the ops outside every loop."""
    em = Emitter(program.num_warps, fused)
    em.emit(program.body)
    return tuple(em.code)


class Emitter:
    interleave = GROUP      # elements per thread interleaved through a run of elementwise ops

    def __init__(self, num_warps: int, fused: frozenset):
        self.warps, self.fused = num_warps, fused
        self.alias: dict = {}
        self.code: list = []
        self.producer: dict = {}
        self.hoisted: set = set()       # divisions whose divisor's reciprocals are taken once

    def emit(self, ops) -> None:
        """Append the code of ``ops`` in order: runs of elementwise ops interleaved, reductions as
        trees, ``dot`` where the emitter times one (straight-line code leaves it out)."""
        run: list = []
        for op in ops:
            if isinstance(op, ELEMENTWISE):
                run.append(op)
                continue
            self.elementwise(run)
            run = []
            if isinstance(op, (ir.ExpandDims, ir.Trans)):
                self.alias[op.out.id] = self.root(op.a.id)
            elif isinstance(op, ir.Reduce):
                self.reduce(op)
            elif isinstance(op, ir.Dot):
                self.dot(op)
        self.elementwise(run)

    def dot(self, op) -> None:
        """Straight-line code's ``dot``s are not part of its floor."""

    def root(self, vid: int) -> int:
        return self.alias.get(vid, vid)

    def per_thread(self, v: ir.Value) -> int:
        return max(1, -(-v.numel // (32 * self.warps)))

    def reg(self, v, j: int) -> str:
        """Register of element ``j`` of value ``v`` (a scalar operand: none)."""
        if not isinstance(v, ir.Value):
            return ""
        return f"v{self.root(v.id)}.{j % self.per_thread(v)}"

    def chain(self, ops: list, dst: str, srcs: list, tag: str):
        """``ops`` (opcodes; a ``~`` marks one off the chain, reading ``srcs``) each reading the one
        before, the first reading ``srcs``, the last writing ``dst``."""
        first = prev = " ".join(s for s in srcs if s)
        last = max(k for k, o in enumerate(ops) if not o.startswith("~"))
        for k, o in enumerate(ops):
            out = dst if k == last else f"{tag}.{k}"
            self.code.append(f"{o.lstrip('~')}|{out}|{first if o.startswith('~') else prev}")
            prev = prev if o.startswith("~") else out

    def elementwise(self, run: list):
        """A run of elementwise ops, ``GROUP`` elements of each thread at a time through the whole run."""
        plan = [(op, self.opcodes(op)) for op in run if not self.aliased(op)]
        n = max([self.per_thread(op.out) for op in run], default=0)
        for g in range(0, n, self.interleave):
            for op, ops in plan:
                self.group(op, ops, range(g, min(g + self.interleave, self.per_thread(op.out))))

    def group(self, op, ops: list, group: range):
        """``ops`` (a ``~`` marks one off the chain, reading the op's inputs) for the elements ``group``
        of ``op``, their chains interleaved instruction by instruction."""
        chained = [k for k, o in enumerate(ops) if not o.startswith("~")]
        prev = -1
        for k, o in enumerate(ops):
            off = o.startswith("~")
            for j in group:
                if o == "F2FP" and j % 2:     # one conversion packs two elements
                    continue
                src = self.sources(op, j) if prev < 0 or off else f"t{op.out.id}.{j}.{prev}"
                dst = self.reg(op.out, j) if k == chained[-1] else f"t{op.out.id}.{j}.{k}"
                self.code.append(f"{o.lstrip('~')}|{dst}|{src}")
            prev = prev if off else k

    def sources(self, op, j: int) -> str:
        regs = [self.reg(getattr(op, f), j) for f in ("cond", "a", "b") if hasattr(op, f)]
        if isinstance(op, ir.Binary) and op.op == "div" and f"q{op.out.id}" in self.hoisted:
            regs = [regs[0], f"q{op.out.id}.{j % self.per_thread(op.b)}"]
        return " ".join(r for r in regs if r)

    def opcodes(self, op) -> list:
        """The chain of opcodes one element of ``op`` issues. A float division by a constant is a
        multiply; by a tile of fewer elements (a row's sum), the divisor's reciprocals are taken once
        here and each element multiplies."""
        if isinstance(op, ir.Binary) and op.op == "div" and op.out.dtype in ir.FLOAT_DTYPES:
            if not isinstance(op.b, ir.Value):
                return ["FMUL"]
            if op.b.numel < op.out.numel:
                q = f"q{op.out.id}"
                self.hoisted.add(q)
                for i in range(self.per_thread(op.b)):
                    self.chain(_math(MATH["div"]), f"{q}.{i}", [self.reg(op.b, i)], f"{q}.{i}")
                return ["FMUL"]
        return _opcodes(op)

    def aliased(self, op) -> bool:
        """An op that issues nothing of its own (an FMA's add, a same-dtype cast): its output named as its input."""
        if isinstance(op, ir.Binary) and op.out.id in self.fused:   # the FMA's add: the multiply's instruction
            mul = [v for v in (op.a, op.b) if isinstance(v, ir.Value) and self.producer.get(self.root(v.id)) == "mul"]
            if mul:
                self.alias[op.out.id] = self.root(mul[0].id)
                return True
        self.producer[op.out.id] = getattr(op, "op", "")
        if isinstance(op, ir.Cast) and op.a.dtype == op.out.dtype:
            self.alias[op.out.id] = self.root(op.a.id)
            return True
        return False

    def threads_along(self, v: ir.Value, axis: int) -> tuple:
        """(lanes of a warp, warps) across which ``v``'s ``axis`` is spread."""
        return _threads_along(v, axis, self.warps)

    def reduce(self, op: ir.Reduce):
        """In the thread a pairwise tree over its elements, across a warp's lanes a shuffle tree,
        across warps one round through shared memory (each warp then reduces the partials itself)."""
        f = "FADD" if op.op == "sum" else "FMNMX"
        e_in, e_out = self.per_thread(op.a), self.per_thread(op.out)
        lanes, warps = self.threads_along(op.a, op.axis)
        per = max(1, e_in // e_out)
        for o in range(e_out):
            acc = f"r{op.out.id}.{o}"
            level = [self.reg(op.a, o * per + k) for k in range(per)]
            depth = 0
            while len(level) > 1:
                depth += 1
                nxt = [f"{acc}.{depth}.{k}" for k in range(len(level) // 2)]
                for k, dst in enumerate(nxt):
                    self.code.append(f"{f}|{dst}|{level[2 * k]} {level[2 * k + 1]}")
                level = nxt + level[len(nxt) * 2:]
            self.code.append(f"{f}|{acc}|{level[0]}")
            self._tree(f, acc, lanes)
            if warps > 1:
                self.chain(["STS", "BAR", "LDS"], acc, [acc], f"x{op.out.id}.{o}")
                self._tree(f, acc, warps)
            self.code.append(f"MOV|{self.reg(op.out, o)}|{acc}")

    def _tree(self, f: str, acc: str, width: int):
        for _ in range(int(math.log2(width)) if width > 1 else 0):
            self.code.append(f"SHFL.BFLY|{acc}.s|{acc}")
            self.code.append(f"{f}|{acc}|{acc} {acc}.s")


def _opcodes(op) -> list:
    """The chain of opcodes one element of ``op`` issues."""
    name = getattr(op, "op", "")
    if isinstance(op, ir.Unary) and name in MATH:
        return _math(MATH[name], name in TWO_PATHS)
    if isinstance(op, ir.Binary) and name == "div" and op.out.dtype in ir.FLOAT_DTYPES:
        return _math(MATH["div"])
    if isinstance(op, ir.Cast):
        return ["PRMT"] if op.out.dtype in _WIDE and op.a.dtype not in _WIDE else ["F2FP"]
    return ["IADD3"] if op.out.dtype in ("int32", "bool") else ["FADD"]


def _math(mix: dict, two_paths: bool = False) -> list:
    """A math op's instructions in a chain: half its FP32-pipe ones, its MUFUs, the other half; with
    ``two_paths`` (tanh, erf: two ways computed side by side and one selected) half of them off the chain."""
    n, m = int(round(mix["issue"])), int(round(mix["mufu"]))
    on = -(-n // 2) if two_paths else n
    return ["~FMUL"] * (n - on) + ["FMUL"] * (on // 2) + ["MUFU"] * m + ["FMUL"] * (on - on // 2)


def _threads_along(v: ir.Value, axis: int, num_warps: int) -> tuple:
    """(lanes of a warp, warps) across which Triton's default blocked layout spreads ``v``'s ``axis``."""
    shape = tuple(v.shape) if len(v.shape) == 2 else (1, v.numel)
    axis = axis if len(v.shape) == 2 else 1
    rows, cols = shape
    vec = max(1, min(cols, 16 // ir.DTYPE_BYTES.get(v.dtype, 4)))
    tc = max(1, min(32, cols // vec))
    tr = 32 // tc
    wr = max(1, min(num_warps, rows // tr))
    wc = max(1, num_warps // wr)
    return (tc, wc) if axis == 1 else (tr, wr)
