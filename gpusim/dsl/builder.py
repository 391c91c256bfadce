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

``Tile`` and its operator semantics live in ``tiles.py``; this module holds the DSL's functions.
"""
from __future__ import annotations

import builtins
import math

from . import ir
from .errors import TraceError, trace_error, user_site  # noqa: F401  (TraceError, user_site: public here)
from .ir import Expr, TensorArg, Value
from .tiles import TRACES as _STACK, Trace as _Trace, Tile, binary as _binary, broadcast as _broadcast, cast, \
    check_int_const as _check_int_const, current as _cur, expand_dims, operand as _operand, unary as _unary  # noqa: F401


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


# A dimension of at most this many values (from a store's fixed offset) needs no wider tile: it is
# the smallest dot operand, and any power of two up to it covers the dimension.
MIN_PADDED_TILE = 16


def _outside_problem(tensor: TensorArg, offsets: tuple, shape: tuple) -> str | None:
    """Why a store of a ``shape`` tile at ``offsets`` writes past ``tensor`` at every program, or
    None: from a fixed offset, the tile starts past the end, or is wider than MIN_PADDED_TILE along
    a dimension that holds fewer (a (rows, 1) output written a whole row at a time). A wide tile on
    a wide dimension (BLOCK above the row length) is a choice of tiling, not refused here."""
    lead = len(tensor.shape) - len(shape)
    for k, width in enumerate(shape):
        d, off = lead + k, offsets[lead + k]
        if off.op != "const" or off.args[0] < 0:
            continue                 # the offset moves with the program or loop: a choice of tiling
        extent, start = tensor.shape[d], off.args[0]
        if start >= extent or extent - start <= MIN_PADDED_TILE < width:
            inside = max(0, min(width, extent - start))
            return (f"store to {tensor.name} of shape {tuple(tensor.shape)}: the {tuple(shape)} tile at offset "
                    f"{start} of dimension {d} drops {width - inside} of its {width} values along it (past the "
                    f"tensor's end) at every program; declare {tensor.name} with the shape the kernel writes, "
                    f"or store a tile that fits it")
    return None


def store(tensor: TensorArg, offsets, value: Tile) -> None:
    offsets = tuple(ir.as_expr(o) for o in offsets)
    if len(offsets) != len(tensor.shape):
        raise trace_error(f"store to {tensor.name}: {len(offsets)} offsets for a {len(tensor.shape)}-d tensor")
    why = _outside_problem(tensor, offsets, value.shape) if len(value.shape) <= len(tensor.shape) else None
    if why:
        raise trace_error(why)
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
