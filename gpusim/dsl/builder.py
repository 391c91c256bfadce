"""Tracing front end: Triton-flavoured functions that append IR ops to the current trace.

    def body(q, k, v, o, *, BLOCK_M):
        m = program_id(0)
        qt = load(q, (bh, m * BLOCK_M, 0), (BLOCK_M, D))
        ...

``trace(fn, params, ...)`` runs ``fn`` once with ``TensorArg``s and returns a ``Program``.
Operators on ``Tile`` objects build ``Binary`` ops; Python floats become constants.
"""
from __future__ import annotations

import math

from . import ir
from .ir import Expr, TensorArg, Value

_STACK: list = []


class TraceError(ValueError):
    """A kernel body used the DSL wrongly (shape mismatch, bad dtype, ...)."""


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
        raise TraceError("DSL ops can only be used inside a kernel being traced")
    return _STACK[-1]


class Tile:
    """A traced tile value with numpy-like operators."""

    __slots__ = ("v",)
    __array_priority__ = 1000

    def __init__(self, v: Value):
        self.v = v

    shape = property(lambda self: self.v.shape)
    dtype = property(lambda self: self.v.dtype)

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
    def __and__(self, o): return _binary("and", self, o)
    def __or__(self, o): return _binary("or", self, o)
    def __neg__(self): return _unary("neg", self)

    def __getitem__(self, idx):
        """Only ``t[:, None]`` / ``t[None, :]`` (insert an axis), as in Triton."""
        if not isinstance(idx, tuple):
            idx = (idx,)
        axis = None
        for i, s in enumerate(idx):
            if s is None:
                if axis is not None:
                    raise TraceError("only one None index is supported")
                axis = i
            elif not (isinstance(s, slice) and s == slice(None)):
                raise TraceError("tiles support only [:, None] and [None, :] indexing")
        if axis is None or len(idx) != len(self.shape) + 1:
            raise TraceError(f"bad index {idx} for a tile of shape {self.shape}")
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
            raise TraceError(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def _promote(da, db):
    if da == db:
        return da
    order = ["bool", "int32", "fp16", "bf16", "fp32"]
    return order[max(order.index(da), order.index(db))]


def _operand(x):
    if isinstance(x, Tile):
        return x.v
    if isinstance(x, (int, float)):
        return float(x)
    raise TraceError(f"cannot use {type(x).__name__} as a tile operand")


def _binary(op, a, b) -> Tile:
    va, vb = _operand(a), _operand(b)
    sa = va.shape if isinstance(va, Value) else ()
    sb = vb.shape if isinstance(vb, Value) else ()
    if isinstance(va, Value) and isinstance(vb, Value):
        dt = _promote(va.dtype, vb.dtype)
    else:
        dt = (va if isinstance(va, Value) else vb).dtype
    if op in ("lt", "le", "gt", "ge", "eq", "ne"):
        dt = "bool"
    t = _cur()
    out = t.new_value(_broadcast(sa, sb), dt)
    t.emit(ir.Binary(out, op, va, vb))
    return Tile(out)


def _unary(op, a: Tile) -> Tile:
    t = _cur()
    dt = a.dtype if op == "neg" or a.dtype == "fp32" else "fp32"
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
        raise TraceError(f"load from {tensor.name}: {len(offsets)} offsets for a {len(tensor.shape)}-d tensor")
    if not 1 <= len(shape) <= 2 or len(shape) > len(tensor.shape):
        raise TraceError(f"load from {tensor.name}: tile shape {shape} must be 1-d or 2-d")
    t = _cur()
    out = t.new_value(shape, tensor.dtype)
    t.emit(ir.Load(out, tensor, offsets, float(other)))
    return Tile(out)


def store(tensor: TensorArg, offsets, value: Tile) -> None:
    offsets = tuple(ir.as_expr(o) for o in offsets)
    if len(offsets) != len(tensor.shape):
        raise TraceError(f"store to {tensor.name}: {len(offsets)} offsets for a {len(tensor.shape)}-d tensor")
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
        raise TraceError(f"dot: shapes {a.shape} and {b.shape} do not multiply")
    shape = (a.shape[0], b.shape[1])
    if acc is not None and tuple(acc.shape) != shape:
        raise TraceError(f"dot: accumulator shape {acc.shape} != {shape}")
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
        raise TraceError(f"unknown dtype {dtype!r}")
    t = _cur()
    out = t.new_value(a.shape, dtype)
    t.emit(ir.Cast(out, a.v))
    return Tile(out)


def _reduce(op, a: Tile, axis: int) -> Tile:
    axis = axis % len(a.shape)
    t = _cur()
    out = t.new_value(a.shape[:axis] + a.shape[axis + 1:], "fp32" if a.dtype != "fp32" else a.dtype)
    t.emit(ir.Reduce(out, op, a.v, axis))
    return Tile(out)


def tsum(a: Tile, axis: int) -> Tile:
    return _reduce("sum", a, axis)


def tmax(a: Tile, axis: int) -> Tile:
    return _reduce("max", a, axis)


def exp(a): return _unary("exp", a)
def exp2(a): return _unary("exp2", a)
def log(a): return _unary("log", a)
def sqrt(a): return _unary("sqrt", a)
def maximum(a, b): return _binary("maximum", a, b)
def minimum(a, b): return _binary("minimum", a, b)


def where(cond: Tile, a, b) -> Tile:
    va, vb = _operand(a), _operand(b)
    shapes = [cond.shape] + [x.shape for x in (va, vb) if isinstance(x, Value)]
    shape = shapes[0]
    for s in shapes[1:]:
        shape = _broadcast(shape, s)
    dts = [x.dtype for x in (va, vb) if isinstance(x, Value)]
    t = _cur()
    out = t.new_value(shape, dts[0] if dts else "fp32")
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
        raise TraceError(f"loop body returned {len(res)} values for {len(init)} carried values")
    yields = []
    for a, r in zip(args, res):
        if tuple(r.shape) != tuple(a.shape):
            raise TraceError(f"loop-carried value changes shape {a.shape} -> {r.shape}")
        if r.dtype != a.dtype:
            r = cast(r, a.dtype)
            body_ops.append(t.blocks[-1].pop())
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
