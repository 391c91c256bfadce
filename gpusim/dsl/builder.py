"""Tracing front end: Triton-flavoured functions that append IR ops to the current trace.

    def body(q, k, v, o, *, BLOCK_M):
        m = program_id(0)
        qt = load(q, (bh, m * BLOCK_M, 0), (BLOCK_M, D))
        ...

``trace(fn, params, ...)`` runs ``fn`` once with ``TensorArg``s and returns a ``Program``.

Semantics are Triton's: operators on ``Tile`` objects build ``Binary`` ops whose dtype follows
Triton's promotion (``ir.promote``: ``int32 * 0.5`` is fp32, ``fp16 * 0.5`` is fp16, ``/`` is
fp32); ==, !=, <, <=, >, >= make masks (bool tiles), combined with &, | and ~. A tile has no
Python truth value: ``if tile:``, ``and``, ``or`` and ``not`` raise a TraceError naming the
user's file and line, as does every other misuse. Two deliberate differences from Triton,
both stricter or more precise, never silently different: exp/exp2/log/log2/sqrt/rsqrt accept any
dtype and compute in fp32 (Triton requires fp32 input; the lowering inserts the cast), and sums of
fp16/bf16 tiles accumulate in fp32 (Triton's tl.sum returns the input dtype).
"""
from __future__ import annotations

import builtins
import math
import numbers

from . import ir
from .errors import TraceError, trace_error, user_site  # noqa: F401  (TraceError, user_site: public here)
from .ir import Expr, TensorArg, Value

_STACK: list = []


class _Trace:
    def __init__(self):
        self.next_id = 0
        self.next_loop = 0
        self.blocks = [[]]

    def new_value(self, shape, dtype) -> Value:
        self.next_id += 1
        return Value(self.next_id, tuple(int(s) for s in shape), dtype)

    def emit(self, op):
        self.blocks[-1].append(op)
        return op


def _cur() -> _Trace:
    if not _STACK:
        raise trace_error("DSL ops can only be used inside a kernel being traced")
    return _STACK[-1]


class Tile:
    """A traced tile value with numpy-like operators."""

    __slots__ = ("v",)
    __array_priority__ = 1000

    def __init__(self, v: Value):
        self.v = v

    shape = property(lambda self: self.v.shape)
    dtype = property(lambda self: self.v.dtype)

    __hash__ = object.__hash__      # tiles stay hashable by identity although == builds a mask

    def __add__(self, o): return _binary("add", self, o)
    def __radd__(self, o): return _binary("add", o, self)
    def __sub__(self, o): return _binary("sub", self, o)
    def __rsub__(self, o): return _binary("sub", o, self)
    def __mul__(self, o): return _binary("mul", self, o)
    def __rmul__(self, o): return _binary("mul", o, self)
    def __truediv__(self, o): return _binary("div", self, o)
    def __rtruediv__(self, o): return _binary("div", o, self)
    def __lt__(self, o): return _binary("lt", self, o)
    def __le__(self, o): return _binary("le", self, o)
    def __gt__(self, o): return _binary("gt", self, o)
    def __ge__(self, o): return _binary("ge", self, o)
    def __eq__(self, o): return _binary("eq", self, o)
    def __ne__(self, o): return _binary("ne", self, o)
    def __and__(self, o): return _binary("and", self, o)
    def __rand__(self, o): return _binary("and", o, self)
    def __or__(self, o): return _binary("or", self, o)
    def __ror__(self, o): return _binary("or", o, self)
    def __invert__(self): return _unary("not", self)
    def __neg__(self): return _unary("neg", self)
    def __pos__(self): return self
    def __abs__(self): return _unary("abs", self)

    def __bool__(self):
        raise trace_error(f"a tile ({self.dtype}{list(self.shape)}) has no single truth value: `if`, `while`, `and`, "
                    f"`or` and `not` cannot look inside it while tracing; use where(mask, a, b) to select, and "
                    f"&, |, ~ to combine masks")

    def __index__(self):
        raise trace_error("a tile cannot be used as a Python integer (loop bounds and offsets are ints or program_id "
                    "expressions)")

    def __float__(self):
        raise trace_error("a tile cannot be converted to a Python float while tracing (math.* functions take "
                          "numbers; on a tile use the DSL's exp, log, sqrt, rsqrt, tanh, sigmoid, erf, sin, cos, abs)")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """numpy scalars combined with a tile trace as DSL ops; other ufuncs are an error naming the DSL call."""
        if method == "__call__" and ufunc.__name__ in _UFUNC_BINARY and len(inputs) == 2 and not kwargs:
            return _binary(_UFUNC_BINARY[ufunc.__name__], *inputs)
        dsl = _UFUNC_DSL.get(ufunc.__name__)
        hint = f"use gpusim.dsl.{dsl}(tile)" if dsl else "the DSL has no such function"
        raise trace_error(f"numpy's np.{ufunc.__name__} cannot run on a traced tile; {hint}")

    __int__ = __index__

    def __getitem__(self, idx):
        """Only ``t[:, None]`` / ``t[None, :]`` (insert an axis), as in Triton."""
        if not isinstance(idx, tuple):
            idx = (idx,)
        axis = None
        for i, s in enumerate(idx):
            if s is None:
                if axis is not None:
                    raise trace_error("only one None index is supported")
                axis = i
            elif not (isinstance(s, slice) and s == slice(None)):
                raise trace_error("tiles support only [:, None] and [None, :] indexing")
        if axis is None or len(idx) != len(self.shape) + 1:
            raise trace_error(f"bad index {idx} for a tile of shape {self.shape}")
        return expand_dims(self, axis)

    def to(self, dtype: str) -> "Tile":
        return cast(self, dtype)

    def __repr__(self):
        return f"Tile(%{self.v.id}: {self.dtype}{list(self.shape)})"


def _val(x):
    return x.v if isinstance(x, Tile) else x


def _broadcast(a, b):
    ra, rb = len(a), len(b)
    n = max(ra, rb)
    a = (1,) * (n - ra) + tuple(a)
    b = (1,) * (n - rb) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise trace_error(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


INT32_RANGE = (-2 ** 31, 2 ** 31 - 1)


def _operand(x):
    """A Tile's Value, or a Python constant (numpy scalars become bool/int/float)."""
    if isinstance(x, Tile):
        return x.v
    if isinstance(x, (bool, _np_bool())):
        return bool(x)
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        return float(x)
    if isinstance(x, Expr):
        raise trace_error("a program_id/loop-index expression is not a tile; make an index tile with arange(expr, n)")
    raise trace_error(f"cannot use {type(x).__name__} as a tile operand")


def _np_bool():
    import numpy as np

    return np.bool_


def _check_int_const(comp, *xs):
    for x in xs:
        if comp == "int32" and not isinstance(x, Value) and not INT32_RANGE[0] <= x <= INT32_RANGE[1]:
            raise trace_error(f"integer constant {x} does not fit an int32 tile operation")


def _binary(op, a, b) -> Tile:
    va, vb = _operand(a), _operand(b)
    if not isinstance(va, Value) and not isinstance(vb, Value):
        raise trace_error(f"{op}: at least one operand must be a tile")
    if op in ir.LOGICAL_OPS:
        for x in (va, vb):
            dt = x.dtype if isinstance(x, Value) else ir.const_dtype(x)
            if dt != "bool":
                sym = "&" if op == "and" else "|"
                raise trace_error(f"{sym} combines masks (bool tiles, e.g. from a < b); got {dt}: compare first "
                            f"(x != 0) or cast")
    comp, dt = ir.binary_dtypes(op, va, vb)
    _check_int_const(comp, va, vb)
    sa = va.shape if isinstance(va, Value) else ()
    sb = vb.shape if isinstance(vb, Value) else ()
    t = _cur()
    out = t.new_value(_broadcast(sa, sb), dt)
    t.emit(ir.Binary(out, op, va, vb))
    return Tile(out)


_UFUNC_BINARY = {"add": "add", "subtract": "sub", "multiply": "mul", "true_divide": "div", "divide": "div",
                 "maximum": "maximum", "minimum": "minimum", "less": "lt", "less_equal": "le", "greater": "gt",
                 "greater_equal": "ge", "equal": "eq", "not_equal": "ne"}
_UFUNC_DSL = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt", "tanh": "tanh",
              "sin": "sin", "cos": "cos", "absolute": "abs", "fabs": "abs"}
_TRANSCENDENTAL = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin", "cos")


def _unary(op, a) -> Tile:
    if not isinstance(a, Tile):
        raise trace_error(f"{op}: expected a tile, got {type(a).__name__}")
    if op == "not" and a.dtype != "bool":
        raise trace_error(f"~ is logical not of a mask (bool tile); got {a.dtype} (bitwise not is not supported)")
    if op in ("neg", "abs") and a.dtype == "bool":
        raise trace_error(f"{op} of a bool tile; cast it first (.to('int32'))")
    dt = "fp32" if op in _TRANSCENDENTAL else a.dtype
    t = _cur()
    out = t.new_value(a.shape, dt)
    t.emit(ir.Unary(out, op, a.v))
    return Tile(out)


# --------------------------------------------------------------------------- public DSL
def program_id(axis: int) -> Expr:
    return Expr("pid", (int(axis),))


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def load(tensor: TensorArg, offsets, shape, other: float = 0.0) -> Tile:
    """HBM -> SRAM: the tile of ``shape`` at ``offsets`` (one offset per tensor dim)."""
    offsets = tuple(ir.as_expr(o) for o in offsets)
    if len(offsets) != len(tensor.shape):
        raise trace_error(f"load from {tensor.name}: {len(offsets)} offsets for a {len(tensor.shape)}-d tensor")
    if not 1 <= len(shape) <= 2 or len(shape) > len(tensor.shape):
        raise trace_error(f"load from {tensor.name}: tile shape {shape} must be 1-d or 2-d")
    t = _cur()
    out = t.new_value(shape, tensor.dtype)
    t.emit(ir.Load(out, tensor, offsets, float(other)))
    return Tile(out)


def store(tensor: TensorArg, offsets, value: Tile) -> None:
    offsets = tuple(ir.as_expr(o) for o in offsets)
    if len(offsets) != len(tensor.shape):
        raise trace_error(f"store to {tensor.name}: {len(offsets)} offsets for a {len(tensor.shape)}-d tensor")
    if value.dtype != tensor.dtype:
        value = cast(value, tensor.dtype)
    _cur().emit(ir.Store(tensor, offsets, value.v))


def full(shape, fill: float, dtype: str = "fp32") -> Tile:
    t = _cur()
    out = t.new_value(shape, dtype)
    t.emit(ir.Full(out, float(fill)))
    return Tile(out)


def zeros(shape, dtype: str = "fp32") -> Tile:
    return full(shape, 0.0, dtype)


def arange(start, n: int, shape=None, axis: int = 0) -> Tile:
    """Index tile: ``start + position`` along ``axis`` of ``shape`` (default 1-d of length n)."""
    t = _cur()
    out = t.new_value(shape or (n,), "int32")
    t.emit(ir.Iota(out, axis, ir.as_expr(start)))
    return Tile(out)


def dot(a: Tile, b: Tile, acc: Tile | None = None) -> Tile:
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
        raise trace_error(f"dot: shapes {a.shape} and {b.shape} do not multiply")
    shape = (a.shape[0], b.shape[1])
    if acc is not None and tuple(acc.shape) != shape:
        raise trace_error(f"dot: accumulator shape {acc.shape} != {shape}")
    t = _cur()
    out = t.new_value(shape, "fp32")
    t.emit(ir.Dot(out, a.v, b.v, acc.v if acc is not None else None))
    return Tile(out)


def trans(a: Tile) -> Tile:
    t = _cur()
    out = t.new_value(a.shape[::-1], a.dtype)
    t.emit(ir.Trans(out, a.v))
    return Tile(out)


def expand_dims(a: Tile, axis: int) -> Tile:
    t = _cur()
    shape = list(a.shape)
    shape.insert(axis, 1)
    out = t.new_value(shape, a.dtype)
    t.emit(ir.ExpandDims(out, a.v, axis))
    return Tile(out)


def cast(a: Tile, dtype: str) -> Tile:
    if dtype not in ir.DTYPE_BYTES:
        raise trace_error(f"unknown dtype {dtype!r}; dtypes: {', '.join(ir.DTYPE_BYTES)}")
    t = _cur()
    out = t.new_value(a.shape, dtype)
    t.emit(ir.Cast(out, a.v))
    return Tile(out)


def _reduce(op, a: Tile, axis: int) -> Tile:
    if not isinstance(a, Tile):
        raise trace_error(f"{op} reduction: expected a tile, got {type(a).__name__}")
    if not -len(a.shape) <= axis < len(a.shape):
        raise trace_error(f"{op} reduction: axis {axis} out of range for a tile of shape {a.shape}")
    axis = axis % len(a.shape)
    t = _cur()
    out = t.new_value(a.shape[:axis] + a.shape[axis + 1:], "fp32" if a.dtype in ir.FLOAT_DTYPES else "int32")
    t.emit(ir.Reduce(out, op, a.v, axis))
    return Tile(out)


def tsum(a: Tile, axis: int) -> Tile:
    return _reduce("sum", a, axis)


def tmax(a: Tile, axis: int) -> Tile:
    return _reduce("max", a, axis)


def tmin(a: Tile, axis: int) -> Tile:
    return _reduce("min", a, axis)


def exp(a): return _unary("exp", a)
def exp2(a): return _unary("exp2", a)
def log(a): return _unary("log", a)
def log2(a): return _unary("log2", a)
def sqrt(a): return _unary("sqrt", a)
def rsqrt(a): return _unary("rsqrt", a)
def tanh(a): return _unary("tanh", a)
def sigmoid(a): return _unary("sigmoid", a)
def erf(a): return _unary("erf", a)
def sin(a): return _unary("sin", a)
def cos(a): return _unary("cos", a)


def gelu(a, approximate: str = "none"):
    """GELU: ``x/2 * (1 + erf(x/sqrt 2))``, or with ``approximate="tanh"`` the tanh form
    ``x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`` (PyTorch's names). fp32 result."""
    x = cast(a, "fp32")
    if approximate == "tanh":
        return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    if approximate != "none":
        raise trace_error(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return 0.5 * x * (1.0 + erf(x * 0.7071067811865476))


def silu(a):
    """SiLU (swish): ``x * sigmoid(x)``, fp32 result."""
    x = cast(a, "fp32")
    return x * sigmoid(x)


def maximum(a, b): return _binary("maximum", a, b)
def minimum(a, b): return _binary("minimum", a, b)


def abs(a):   # noqa: A001 - Triton's name (tl.abs); plain numbers get Python's abs
    return _unary("abs", a) if isinstance(a, Tile) else builtins.abs(a)


def where(cond: Tile, a, b) -> Tile:
    """``cond ? a : b`` elementwise; ``cond`` must be a mask (a bool tile, e.g. ``x > 0``)."""
    if not isinstance(cond, Tile) or cond.dtype != "bool":
        got = f"a {cond.dtype} tile" if isinstance(cond, Tile) else type(cond).__name__
        raise trace_error(f"where: the condition must be a mask (bool tile from a comparison), got {got}")
    va, vb = _operand(a), _operand(b)
    dt = ir.promote(va, vb)
    _check_int_const(dt, va, vb)
    shapes = [cond.shape] + [x.shape for x in (va, vb) if isinstance(x, Value)]
    shape = shapes[0]
    for s in shapes[1:]:
        shape = _broadcast(shape, s)
    t = _cur()
    out = t.new_value(shape, dt)
    t.emit(ir.Where(out, cond.v, va, vb))
    return Tile(out)


def loop(start, end, step: int, init, body, stages: int = 1):
    """``for i in range(start, end, step)`` with loop-carried tiles, kept as a loop in the IR.

    ``body(i, *carried) -> tuple of new carried tiles``; returns the final carried tiles.
    ``stages`` is the software-pipelining depth (Triton's ``num_stages``)."""
    t = _cur()
    init = tuple(init)
    t.next_loop += 1
    var = t.next_loop
    args = tuple(Tile(t.new_value(x.shape, x.dtype)) for x in init)
    t.blocks.append([])
    res = body(Expr("loopvar", (var,)), *args)
    res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
    body_ops = t.blocks.pop()
    if len(res) != len(init):
        raise trace_error(f"loop body returned {len(res)} values for {len(init)} carried values")
    yields = []
    for a, r in zip(args, res):
        if tuple(r.shape) != tuple(a.shape):
            raise trace_error(f"loop-carried value changes shape {a.shape} -> {r.shape}")
        if r.dtype != a.dtype:
            raise trace_error(f"loop-carried value {len(yields)} starts as {a.dtype} but the body returns {r.dtype}; "
                        f"cast it (.to('{a.dtype}')) so its type stays the same, as Triton requires")
        yields.append(r.v)
    outs = tuple(t.new_value(x.shape, x.dtype) for x in init)
    t.emit(ir.Loop(var, ir.as_expr(start), ir.as_expr(end), int(step), int(stages),
                   tuple(x.v for x in init), tuple(a.v for a in args), tuple(body_ops), tuple(yields), outs))
    return tuple(Tile(o) for o in outs)


def trace(fn, name: str, params: list, num_warps: int = 4, **consts) -> ir.Program:
    """Run ``fn(*params, **consts)`` once under a fresh trace and return its Program."""
    t = _Trace()
    _STACK.append(t)
    try:
        fn(*params, **consts)
    finally:
        _STACK.pop()
    grid_rank = 1 + max([e.args[0] for op in ir.walk(t.blocks[0]) for e in _exprs(op) for e in _subexprs(e) if e.op == "pid"] or [0])
    return ir.Program(name, tuple(params), tuple(t.blocks[0]), int(num_warps), grid_rank, dict(consts))


def _exprs(op):
    if isinstance(op, (ir.Load, ir.Store)):
        return op.offsets
    if isinstance(op, ir.Iota):
        return (op.start,)
    if isinstance(op, ir.Loop):
        return (op.start, op.end)
    return ()


def _subexprs(e: Expr):
    yield e
    if e.op not in ("const", "pid", "loopvar"):
        for a in e.args:
            yield from _subexprs(a)


LOG2E = 1.0 / math.log(2.0)
