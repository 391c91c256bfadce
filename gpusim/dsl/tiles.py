"""Traced tiles: the trace being recorded, the ``Tile`` value with Triton's operator semantics
(``binary``: promotion, broadcasting, masks; ``unary``), and the two ops a tile's own methods use
(``expand_dims`` for ``t[:, None]``, ``cast`` for ``t.to(dtype)``). The rest of the DSL is
``builder.py``; both are re-exported by ``gpusim.dsl``."""
from __future__ import annotations

import numbers

from . import ir
from .errors import trace_error
from .ir import Expr, Value


TRACES: list = []


class Trace:
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


def current() -> Trace:
    if not TRACES:
        raise trace_error("DSL ops can only be used inside a kernel being traced")
    return TRACES[-1]


class Tile:
    """A traced tile value with numpy-like operators."""

    __slots__ = ("v",)
    __array_priority__ = 1000

    def __init__(self, v: Value):
        self.v = v

    shape = property(lambda self: self.v.shape)
    dtype = property(lambda self: self.v.dtype)

    __hash__ = object.__hash__      # tiles stay hashable by identity although == builds a mask

    def __add__(self, o): return binary("add", self, o)
    def __radd__(self, o): return binary("add", o, self)
    def __sub__(self, o): return binary("sub", self, o)
    def __rsub__(self, o): return binary("sub", o, self)
    def __mul__(self, o): return binary("mul", self, o)
    def __rmul__(self, o): return binary("mul", o, self)
    def __truediv__(self, o): return binary("div", self, o)
    def __rtruediv__(self, o): return binary("div", o, self)
    def __lt__(self, o): return binary("lt", self, o)
    def __le__(self, o): return binary("le", self, o)
    def __gt__(self, o): return binary("gt", self, o)
    def __ge__(self, o): return binary("ge", self, o)
    def __eq__(self, o): return binary("eq", self, o)
    def __ne__(self, o): return binary("ne", self, o)
    def __and__(self, o): return binary("and", self, o)
    def __rand__(self, o): return binary("and", o, self)
    def __or__(self, o): return binary("or", self, o)
    def __ror__(self, o): return binary("or", o, self)
    def __invert__(self): return unary("not", self)
    def __neg__(self): return unary("neg", self)
    def __pos__(self): return self
    def __abs__(self): return unary("abs", self)

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
            return binary(_UFUNC_BINARY[ufunc.__name__], *inputs)
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


def broadcast(a, b):
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


def operand(x):
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


def check_int_const(comp, *xs):
    for x in xs:
        if comp == "int32" and not isinstance(x, Value) and not INT32_RANGE[0] <= x <= INT32_RANGE[1]:
            raise trace_error(f"integer constant {x} does not fit an int32 tile operation")


def binary(op, a, b) -> Tile:
    va, vb = operand(a), operand(b)
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
    check_int_const(comp, va, vb)
    sa = va.shape if isinstance(va, Value) else ()
    sb = vb.shape if isinstance(vb, Value) else ()
    t = current()
    out = t.new_value(broadcast(sa, sb), dt)
    t.emit(ir.Binary(out, op, va, vb))
    return Tile(out)


_UFUNC_BINARY = {"add": "add", "subtract": "sub", "multiply": "mul", "true_divide": "div", "divide": "div",
                 "maximum": "maximum", "minimum": "minimum", "less": "lt", "less_equal": "le", "greater": "gt",
                 "greater_equal": "ge", "equal": "eq", "not_equal": "ne"}
_UFUNC_DSL = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt", "tanh": "tanh",
              "sin": "sin", "cos": "cos", "absolute": "abs", "fabs": "abs"}
_TRANSCENDENTAL = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin", "cos")


def unary(op, a) -> Tile:
    if not isinstance(a, Tile):
        raise trace_error(f"{op}: expected a tile, got {type(a).__name__}")
    if op == "not" and a.dtype != "bool":
        raise trace_error(f"~ is logical not of a mask (bool tile); got {a.dtype} (bitwise not is not supported)")
    if op in ("neg", "abs") and a.dtype == "bool":
        raise trace_error(f"{op} of a bool tile; cast it first (.to('int32'))")
    dt = "fp32" if op in _TRANSCENDENTAL else a.dtype
    t = current()
    out = t.new_value(a.shape, dt)
    t.emit(ir.Unary(out, op, a.v))
    return Tile(out)


def expand_dims(a: Tile, axis: int) -> Tile:
    t = current()
    shape = list(a.shape)
    shape.insert(axis, 1)
    out = t.new_value(shape, a.dtype)
    t.emit(ir.ExpandDims(out, a.v, axis))
    return Tile(out)


def cast(a: Tile, dtype: str) -> Tile:
    if dtype not in ir.DTYPE_BYTES:
        raise trace_error(f"unknown dtype {dtype!r}; dtypes: {', '.join(ir.DTYPE_BYTES)}")
    t = current()
    out = t.new_value(a.shape, dtype)
    t.emit(ir.Cast(out, a.v))
    return Tile(out)
