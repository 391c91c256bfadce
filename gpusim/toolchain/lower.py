"""Lowering: IR programs to Triton source.

This module owns the IR -> Triton translation. ``lower`` writes one readable ``@triton.jit``
function per ``ir.Program`` (nothing is hand-written per kernel). ``backends/triton/run.py``
imports that source and runs (``run_workload``, through torch tensors, on CUDA or on CPU under
``TRITON_INTERPRET=1``) or times (``time_workload``) whole workloads; ``compile.py`` compiles it
for sm_90 without a GPU.

Semantics follow ``gpusim.backends.numpy_exec`` (the specification):

* Tensor shapes and strides are concrete, so they are baked into the source as constants; each
  kernel parameter is one pointer per ``TensorArg``.
* Loads and stores are masked against the tensor bounds. A bound that interval analysis of the
  index expressions proves always true (for the launch grid when one is given) is left out.
  Leading (non-tiled) dims are scalar offsets, checked the same way.
* bf16 arithmetic is computed in fp32 and rounded back, as the numpy executor emulates it;
  transcendental ops and reductions compute in fp32 where the IR says the result is fp32.
* ``maximum``/``minimum`` propagate NaN, as numpy does.
* ``dot`` accumulates in fp32 and runs as ``dtypes.dot_mode`` says (the rule the timing model charges):
  fp16 or bf16 operands on the tensor cores; fp32 (or mixed) operands with
  ``input_precision="ieee"`` (no TF32: FFMA on the FP32 pipe), which matches numpy's fp32 matmul.
* Under the Triton interpreter (device="cpu") bf16 results can differ from numpy by one bf16
  ulp: the interpreter's fp32 -> bf16 conversion truncates where GPUs round to nearest even.
* fp8 is ``tl.float8e4nv`` / ``tl.float8e5``, converted to with rounding to nearest even, saturated
  (cvt.rn.satfinite), first in fp32 under the interpreter, which does not (``interp_fp8``).
* A ``Loop`` becomes ``for iN in tl.range(start, end, step, num_stages=S)`` (plain ``range``
  when nothing is pipelined) over tuple-assigned loop-carried variables; the launch passes
  ``num_warps`` and ``num_stages`` (the deepest loop's stages).

triton and torch are imported inside functions only, so importing this module is cheap.
"""
from __future__ import annotations

import math
import re

from ..dsl import ir
from ..dsl.analysis import expr_bounds
from ..dsl.dtypes import dot_mode
from .interp_fp8 import FP8_ARGS, FP8_ROUND_SOURCE, makes_fp8

TL_DTYPE = {"fp16": "tl.float16", "bf16": "tl.bfloat16", "fp32": "tl.float32", "int32": "tl.int32", "bool": "tl.int1",
            "fp8e4m3": "tl.float8e4nv", "fp8e5m2": "tl.float8e5"}     # OCP fp8 (Triton 3.9's names)
_BIN_SYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
            "eq": "==", "ne": "!=", "and": "&", "or": "|"}
_COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")
_UNARY_FN = {"exp": "tl.exp", "exp2": "tl.exp2", "log": "tl.log", "log2": "tl.log2", "sqrt": "tl.sqrt",
             "rsqrt": "tl.rsqrt", "abs": "tl.abs", "sin": "tl.sin", "cos": "tl.cos", "erf": "tl.erf",
             "sigmoid": "tl.sigmoid", "tanh": "_tanh"}
# tanh: libdevice's tanhf on the GPU (MUFU.EX2 + MUFU.RCP + an FMA polynomial in SASS); the
# interpreter has no libdevice, so there an equivalent formula (odd polynomial near 0, else
# (1 - e^-2|x|) / (1 + e^-2|x|)), accurate to a few fp32 ulps.
_TANH_LIBDEVICE = "from triton.language.extra.cuda.libdevice import tanh as _tanh"
_TANH_INTERPRETER = """

@triton.jit
def _tanh(x):
    ax = tl.abs(x)
    t = tl.exp(-2.0 * ax)
    big = (1.0 - t) / (1.0 + t)
    x2 = x * x
    small = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))))
    return tl.where(ax < 0.125, small, tl.where(x < 0, -big, big))"""
_REDUCE_FN = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}
_WIDE_INDEX_ELEMS = 2 ** 30     # tensors this large index in int64 (headroom for masked indices past the end)


class LoweringError(ValueError):
    """The program cannot be expressed in Triton (non power-of-two tile, too-small dot, ...)."""


# --------------------------------------------------------------------------- interval analysis
# (of index expressions: ``dsl.analysis.expr_bounds``)
def _loop_range(loop: ir.Loop, pid_hi, loop_rng: dict) -> tuple:
    """Inclusive range of the loop variable over every iteration that runs."""
    slo, shi = expr_bounds(loop.start, pid_hi, loop_rng)
    _, ehi = expr_bounds(loop.end, pid_hi, loop_rng)
    hi = ehi - 1
    if slo == shi and not math.isinf(ehi):
        hi = slo + max(0, (ehi - 1 - slo) // loop.step) * loop.step
    return slo, max(slo, hi)


# --------------------------------------------------------------------------- source emission
def _float_lit(x: float) -> str:
    x = float(x)
    if math.isnan(x):
        return "float('nan')"
    if math.isinf(x):
        return "float('inf')" if x > 0 else "float('-inf')"
    return repr(x)


def _is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _ident(name: str) -> str:
    s = re.sub(r"\W", "_", name)
    return s if s and not s[0].isdigit() else "_" + s


def _fmt_meta(v) -> str:
    return _float_lit(v) if isinstance(v, float) else repr(v)


def launch_stages(program: ir.Program) -> int:
    """``num_stages`` to launch with: the deepest software pipeline among the program's loops."""
    return max([op.stages for op in ir.walk(program.body) if isinstance(op, ir.Loop)] or [1])


class _Emitter:
    def __init__(self, program: ir.Program, grid, interpreter: bool):
        self.p = program
        self.interpreter = interpreter
        self.pid_hi = tuple(g - 1 for g in grid) if grid is not None else None
        self.stages = launch_stages(program)
        self.lines = []
        self.n_access = 0
        self.loop_names = {}
        self.loop_rng = {}
        self.ptr = {t.name: f"{_ident(t.name)}_ptr" for t in program.params}

    # ----------------------------------------------------------------- helpers
    def w(self, ind: int, text: str) -> None:
        self.lines.append("    " * ind + text)

    def expr(self, e: ir.Expr) -> str:
        return ir.expr_str(e, ("pid0", "pid1", "pid2"), self.loop_names)

    def bounds(self, e: ir.Expr) -> tuple:
        return expr_bounds(e, self.pid_hi, self.loop_rng)

    @staticmethod
    def name(v: ir.Value) -> str:
        return f"v{v.id}"

    def as_dtype(self, x, dtype: str) -> str:
        """Source for Value ``x`` converted to ``dtype`` (no-op when it already is)."""
        if x.dtype == dtype:
            return self.name(x)
        if self.interpreter and dtype in FP8_ARGS and x.dtype not in FP8_ARGS:
            return f"_fp8_round({self.as_dtype(x, 'fp32')}, {FP8_ARGS[dtype]}).to({TL_DTYPE[dtype]})"
        return f"{self.name(x)}.to({TL_DTYPE[dtype]})"

    def operand(self, x, dtype: str, int_ok: bool = False) -> str:
        """A Value cast to ``dtype``, or a constant literal (an int literal where ``int_ok``). A
        float literal is written as given: Triton rounds it to the tile's dtype itself."""
        if isinstance(x, ir.Value):
            return self.as_dtype(x, dtype)
        if dtype == "bool":
            return str(bool(x))
        if int_ok and float(x).is_integer():
            return str(int(x))
        return _float_lit(x)

    # ----------------------------------------------------------------- memory access
    def access(self, ind: int, tensor: ir.TensorArg, offsets: tuple, tile: tuple, what: str):
        """Emit index vectors for a tile access; returns (pointer source, mask source or None)."""
        for s in tile:
            if not _is_pow2(s):
                raise LoweringError(f"{self.p.name}: tile shape {tile} on {tensor.name}: Triton needs "
                                    f"power-of-two tile dims")
        self.n_access += 1
        k = self.n_access
        lead = len(tensor.shape) - len(tile)
        strides = [1] * len(tensor.shape)
        for d in range(len(tensor.shape) - 2, -1, -1):
            strides[d] = strides[d + 1] * tensor.shape[d + 1]
        wide = strides[0] * tensor.shape[0] >= _WIDE_INDEX_ELEMS
        desc, index_lines, terms, conds = [], [], [], []
        for d, (off, size) in enumerate(zip(offsets, tensor.shape)):
            o = self.expr(off)
            lo, hi = self.bounds(off)
            if d < lead:
                desc.append(o)
                shaped, extent = o, 1
                if lo < 0 or hi >= size:
                    # A checked leading index becomes a 1-element block: the interpreter mis-types
                    # masks broadcast from scalar comparisons.
                    shaped = f"l{k}_{d}"
                    index_lines.append(f"{shaped} = {o} + tl.arange(0, 1)")
                if off.op == "const" and shaped == o:
                    if off.args[0]:
                        terms.append(str(off.args[0] * strides[d]))
                else:
                    base = f"{shaped}.to(tl.int64)" if wide else shaped
                    terms.append(base if strides[d] == 1 else f"{base} * {strides[d]}")
            else:
                t = d - lead
                extent = tile[t]
                desc.append(f"{o}:+{extent}")
                idx = f"o{k}_{t}"
                rng = f"tl.arange(0, {extent})"
                index_lines.append(f"{idx} = {rng}" if off.op == "const" and off.args[0] == 0 else f"{idx} = {o} + {rng}")
                shaped = idx if len(tile) == 1 else f"{idx}[:, None]" if t == 0 else f"{idx}[None, :]"
                base = f"{shaped}.to(tl.int64)" if wide else shaped
                terms.append(base if strides[d] == 1 else f"{base} * {strides[d]}")
            if lo < 0:
                conds.append(f"({shaped} >= 0)")
            if hi + extent > size:
                conds.append(f"({shaped} < {size})")
        self.w(ind, f"# {what} {tensor.name}[{', '.join(desc)}]")
        for line in index_lines:
            self.w(ind, line)
        ptr = " + ".join([self.ptr[tensor.name]] + terms)
        return ptr, (" & ".join(conds) if conds else None)

    # ----------------------------------------------------------------- ops
    def emit_ops(self, ops, ind: int) -> None:
        for op in ops:
            getattr(self, "op_" + type(op).__name__.lower())(op, ind)

    def op_load(self, op: ir.Load, ind):
        ptr, mask = self.access(ind, op.tensor, op.offsets, op.out.shape, "load")
        extra = f", mask={mask}, other={_float_lit(op.other)}" if mask else ""
        self.w(ind, f"{self.name(op.out)} = tl.load({ptr}{extra})")

    def op_store(self, op: ir.Store, ind):
        ptr, mask = self.access(ind, op.tensor, op.offsets, op.value.shape, "store")
        extra = f", mask={mask}" if mask else ""
        self.w(ind, f"tl.store({ptr}, {self.as_dtype(op.value, op.tensor.dtype)}{extra})")

    def op_full(self, op: ir.Full, ind):
        fill = self.operand(op.fill, op.out.dtype, int_ok=op.out.dtype in ("int32", "bool"))
        self.w(ind, f"{self.name(op.out)} = tl.full({list(op.out.shape)}, {fill}, {TL_DTYPE[op.out.dtype]})")

    def op_iota(self, op: ir.Iota, ind):
        shape = op.out.shape
        n = shape[op.axis]
        if not _is_pow2(n):
            raise LoweringError(f"{self.p.name}: arange of length {n}: Triton needs a power of two")
        src = f"tl.arange(0, {n})"
        if not (op.start.op == "const" and op.start.args[0] == 0):
            src = f"{self.expr(op.start)} + {src}"
            if len(shape) > 1:
                src = f"({src})"
        if len(shape) > 1:
            idx = ", ".join(":" if d == op.axis else "None" for d in range(len(shape)))
            src = f"{src}[{idx}]"
            if any(s != 1 for d, s in enumerate(shape) if d != op.axis):
                src = f"tl.broadcast_to({src}, {list(shape)})"
        self.w(ind, f"{self.name(op.out)} = {src}")

    def op_binary(self, op: ir.Binary, ind):
        """Tile operands are converted explicitly to the computation dtype (``ir.binary_dtypes``);
        a literal then adopts the tile's dtype by Triton's own rule (a constant of a kind not above
        the tile's), so Triton has nothing left to decide. bf16 arithmetic runs in fp32 on
        bf16-rounded constants and is rounded back, as numpy_exec does."""
        comp, out = ir.binary_dtypes(op.op, op.a, op.b)
        if op.op in ir.LOGICAL_OPS:
            a, b = (self.operand(x, "bool") for x in (op.a, op.b))
            self.w(ind, f"{self.name(op.out)} = {a} {_BIN_SYM[op.op]} {b}")
            return
        work = "fp32" if comp == "bf16" else comp
        a, b = (self.operand(x, work, int_ok=work == "int32") for x in (op.a, op.b))
        if work == "fp32" and comp == "bf16":     # constants were rounded to bf16, keep them exact in fp32
            a, b = (self.operand(x, work) if isinstance(x, ir.Value) else _float_lit(ir.const_value(x, "bf16"))
                    for x in (op.a, op.b))
        if not isinstance(op.a, ir.Value) and not isinstance(op.b, ir.Value):
            raise LoweringError(f"{self.p.name}: binary {op.op} of two constants")
        if op.op in ("maximum", "minimum"):
            nan = ", propagate_nan=tl.PropagateNan.ALL" if work in ir.FLOAT_DTYPES else ""
            src = f"tl.{op.op}({a}, {b}{nan})"
        else:
            src = f"{a} {_BIN_SYM[op.op]} {b}"
        if op.op not in _COMPARE and work != out:
            src = f"({src}).to({TL_DTYPE[out]})"
        self.w(ind, f"{self.name(op.out)} = {src}")

    def op_unary(self, op: ir.Unary, ind):
        out = op.out.dtype
        if op.op == "not":
            src = f"~{self.name(op.a)}"
        elif op.op in ("neg", "abs") and out == "bf16":
            fn = "-" if op.op == "neg" else "tl.abs"
            src = f"({fn}({self.as_dtype(op.a, 'fp32')})).to(tl.bfloat16)"
        else:
            x = self.as_dtype(op.a, out)
            src = f"-{x}" if op.op == "neg" else f"{_UNARY_FN[op.op]}({x})"
        self.w(ind, f"{self.name(op.out)} = {src}")

    def op_where(self, op: ir.Where, ind):
        cond = self.name(op.cond) if op.cond.dtype == "bool" else f"({self.name(op.cond)} != 0)"
        out = op.out.dtype
        a, b = (self.operand(x, out, int_ok=out == "int32") for x in (op.a, op.b))
        self.w(ind, f"{self.name(op.out)} = tl.where({cond}, {a}, {b})")

    def op_cast(self, op: ir.Cast, ind):
        self.w(ind, f"{self.name(op.out)} = {self.as_dtype(op.a, op.out.dtype)}")

    def op_reduce(self, op: ir.Reduce, ind):
        x = self.as_dtype(op.a, op.out.dtype)
        self.w(ind, f"{self.name(op.out)} = {_REDUCE_FN[op.op]}({x}, axis={op.axis})")

    def op_expanddims(self, op: ir.ExpandDims, ind):
        rank = len(op.a.shape)
        if rank == 0:
            src = f"tl.expand_dims({self.name(op.a)}, 0)"
        else:
            idx = [":"] * rank
            idx.insert(op.axis, "None")
            src = f"{self.name(op.a)}[{', '.join(idx)}]"
        self.w(ind, f"{self.name(op.out)} = {src}")

    def op_trans(self, op: ir.Trans, ind):
        self.w(ind, f"{self.name(op.out)} = tl.trans({self.name(op.a)})")

    def op_dot(self, op: ir.Dot, ind):
        (m, k), (_, n) = op.a.shape, op.b.shape
        if min(m, n, k) < 16:
            raise LoweringError(f"{self.p.name}: dot of {op.a.shape} x {op.b.shape}: tl.dot needs every dim >= 16")
        dts = {op.a.dtype, op.b.dtype}
        if not dts <= set(ir.FLOAT_DTYPES):
            raise LoweringError(f"{self.p.name}: dot of {'/'.join(sorted(dts))} operands is not supported")
        comp, _, precision = dot_mode(op.a.dtype, op.b.dtype)    # the rule the timing model charges
        if comp == "bf16" and self.interpreter:
            comp, precision = "fp32", "ieee"      # exact: bf16 products are exact in fp32
        args = [self.as_dtype(op.a, comp), self.as_dtype(op.b, comp)]
        if op.acc is not None:
            args.append(self.as_dtype(op.acc, "fp32"))
        if precision is not None:
            args.append(f'input_precision="{precision}"')
        self.w(ind, f"{self.name(op.out)} = tl.dot({', '.join(args)})")

    def op_loop(self, op: ir.Loop, ind):
        if op.step <= 0:
            raise LoweringError(f"{self.p.name}: loop step {op.step} must be positive")
        var = f"i{op.var}"
        start, end = self.expr(op.start), self.expr(op.end)
        rng = _loop_range(op, self.pid_hi, self.loop_rng)
        carried = ", ".join(self.name(a) for a in op.args)
        if op.args:
            self.w(ind, f"{carried} = {', '.join(self.name(x) for x in op.init)}")
        if op.stages == 1 and self.stages == 1:
            head = f"range({start}, {end}, {op.step})"
        else:
            head = f"tl.range({start}, {end}, {op.step}, num_stages={op.stages})"
        self.w(ind, f"for {var} in {head}:")
        self.loop_names[op.var] = var
        self.loop_rng[op.var] = rng
        self.emit_ops(op.body, ind + 1)
        if op.args:
            self.w(ind + 1, f"{carried} = {', '.join(self.name(y) for y in op.yields)}")
        elif not op.body:
            self.w(ind + 1, "pass")
        del self.loop_names[op.var], self.loop_rng[op.var]
        if op.outs:
            self.w(ind, f"{', '.join(self.name(o) for o in op.outs)} = {carried}")

    # ----------------------------------------------------------------- whole function
    def source(self, grid) -> str:
        p = self.p
        meta = ", ".join(f"{k}={_fmt_meta(v)}" for k, v in p.meta.items())
        self.w(0, f"# Generated by gpusim.toolchain.lower from IR program {p.name!r}.")
        self.w(0, f"# tile params: {meta or '(none)'}")
        for t in p.params:
            self.w(0, f"# {self.ptr[t.name]}: {t.dtype}{list(t.shape)} (contiguous)")
        grid_txt = f"grid={tuple(grid)}, " if grid is not None else ""
        self.w(0, f"# launch: {grid_txt}num_warps={p.num_warps}, num_stages={self.stages}")
        if self.interpreter:
            self.w(0, "# target: TRITON_INTERPRET=1 (bf16 dot operands widened to fp32)")
        self.w(0, "import triton")
        self.w(0, "import triton.language as tl")
        if any(isinstance(op, ir.Unary) and op.op == "tanh" for op in ir.walk(p.body)):
            self.lines += (_TANH_INTERPRETER if self.interpreter else _TANH_LIBDEVICE).splitlines()
        if self.interpreter and makes_fp8(p):
            self.lines += FP8_ROUND_SOURCE.splitlines()
        self.w(0, "")
        self.w(0, "")
        self.w(0, "@triton.jit")
        self.w(0, f"def {kernel_name(p)}({', '.join(self.ptr[t.name] for t in p.params)}):")
        for k in range(p.grid_rank):
            self.w(1, f"pid{k} = tl.program_id({k})")
        self.emit_ops(p.body, 1)
        return "\n".join(self.lines) + "\n"


def kernel_name(program: ir.Program) -> str:
    """Name of the ``@triton.jit`` function that ``lower`` generates for ``program``."""
    return f"{_ident(program.name)}_kernel"


def lower(program: ir.Program, grid: tuple | None = None, *, interpreter: bool = False) -> str:
    """Triton source (a module with one ``@triton.jit`` function) for ``program``.

    ``grid``, when given, bounds ``program_id`` so that provably in-bounds masks are left out
    and is named in the header; the source is then valid for that grid (or a smaller one).
    ``interpreter`` targets ``TRITON_INTERPRET=1``, whose ``tl.dot`` multiplies bf16 operands
    as raw bits: there bf16 dot operands are widened to fp32 first (exact, so same result)."""
    if grid is not None and len(grid) < program.grid_rank:
        raise LoweringError(f"{program.name}: grid {tuple(grid)} has fewer than {program.grid_rank} dims")
    return _Emitter(program, grid, interpreter).source(grid)


def workload_source(workload: ir.Workload) -> str:
    """Generated Triton source of every launch of ``workload``, each headed by its name and grid."""
    parts = [f"# ===== launch {launch.name}: grid={tuple(launch.grid)}\n{lower(launch.program, launch.grid)}"
             for launch in workload.launches]
    return "\n\n".join(parts)
