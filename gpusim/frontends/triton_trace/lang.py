"""The ``tl`` a traced kernel sees: Triton's language functions, each appending gpusim IR ops (or
keeping index arithmetic symbolic) instead of computing. Names Triton has and this module does
not raise one line naming the function and the kernel's source line."""
from __future__ import annotations

import builtins
import math as _math
import numbers

from ... import dsl
from ...dsl.ir import Expr
from .context import ctx
from .errors import misuse, unsupported
from .memory import BlockPtr, Ptr, load, store  # noqa: F401  (tl.load / tl.store)
from .symbolic import AInt, Lin, aint_add, as_lin, lmax, lmin, norm
from .tiles import Mask, TTile, compare, dtype_name, materialize, operand, wrap


class constexpr:   # noqa: N801 -- Triton's name; used as an annotation and as constexpr(value)
    def __new__(cls, value=None):
        return getattr(value, "value", value)


float16, bfloat16, float32, int32, int64, int1 = "fp16", "bf16", "fp32", "int32", "int64", "int1"
float64 = "fp64"


def program_id(axis=0):
    return Lin.atom(Expr("pid", (int(axis),)))


def num_programs(axis=0):
    g = ctx().grid + (1, 1, 1)
    return g[int(axis)]


def cdiv(a, b):
    return (a + b - 1) // b


def arange(start, end):
    return AInt((int(end) - int(start),), int(start), (1,))


def _shape(shape):
    shape = shape if isinstance(shape, (tuple, list)) else (shape,)
    return tuple(int(getattr(s, "value", s)) for s in shape)


def full(shape, value, dtype):
    d = dtype_name(dtype)
    if isinstance(value, (Lin, AInt, TTile)):
        return wrap(operand(value) + dsl.zeros(_shape(shape), d)).to(d)
    return wrap(dsl.full(_shape(shape), value, d))


def zeros(shape, dtype):
    return full(shape, 0, dtype)


def zeros_like(x, dtype=None):
    return zeros(x.shape, dtype or x.dtype)


def full_like(x, value, dtype=None):
    return full(x.shape, value, dtype or x.dtype)


def make_block_ptr(base, shape, strides, offsets, block_shape, order):
    if not isinstance(base, Ptr) or isinstance(base.off, AInt):
        raise misuse("tl.make_block_ptr: base must be a scalar pointer (a tensor argument plus an offset)")
    return BlockPtr(base.tensor, base.off, shape, strides, offsets, block_shape, order)


def advance(base, offsets):
    if not isinstance(base, BlockPtr):
        raise misuse("tl.advance takes a block pointer from tl.make_block_ptr")
    return base.advanced(offsets)


def dot(a, b, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None, out_dtype="fp32"):
    a, b = operand(a), operand(b)
    out = wrap(dsl.dot(a, b, operand(acc) if acc is not None else None))
    d = dtype_name(out_dtype)
    return out if d == "fp32" else out.to(d)


def _reduce(fn, x, axis, keep_dims, name, cast_back):
    x = operand(x)
    if not isinstance(x, TTile):
        raise misuse(f"tl.{name}: expected a tile")
    if axis is None:
        out = x
        while len(out.shape):
            out = wrap(fn(out, len(out.shape) - 1))
        axes = list(range(len(x.shape)))
    else:
        axis = int(getattr(axis, "value", axis)) % builtins.max(1, len(x.shape))
        out, axes = wrap(fn(x, axis)), [axis]
    if cast_back and x.dtype in ("fp16", "bf16") or x.dtype == "bool" and name != "sum":
        out = out.to(x.dtype)
    if keep_dims:
        for a in sorted(axes):
            out = wrap(dsl.expand_dims(out, a))
    return out


def sum(input, axis=None, keep_dims=False, dtype=None):   # noqa: A001 -- Triton's name
    out = _reduce(dsl.tsum, input, axis, keep_dims, "sum", input.dtype == "fp16")
    return out.to(dtype) if dtype is not None else out


def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):  # noqa: A001
    if return_indices:
        raise unsupported("tl.max(..., return_indices=True) (an argmax)")
    return _reduce(dsl.tmax, input, axis, keep_dims, "max", True)


def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):  # noqa: A001
    if return_indices:
        raise unsupported("tl.min(..., return_indices=True) (an argmin)")
    return _reduce(dsl.tmin, input, axis, keep_dims, "min", True)


def where(condition, x, y):
    c = condition.tile() if isinstance(condition, Mask) else operand(condition)
    if isinstance(c, bool):
        return x if c else y
    return wrap(dsl.where(c, operand(x), operand(y)))


def _unary(name):
    def f(x, *_, **__):
        return wrap(getattr(dsl, name)(operand(x)))
    f.__name__ = name
    return f


exp, exp2, log, log2, sqrt, rsqrt = (_unary(n) for n in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt"))
sigmoid, erf, sin, cos, tanh = (_unary(n) for n in ("sigmoid", "erf", "sin", "cos", "tanh"))
sqrt_rn = sqrt


def abs(x):   # noqa: A001
    return builtins.abs(x) if isinstance(x, numbers.Real) else wrap(dsl.abs(operand(x)))


def maximum(x, y, propagate_nan=None):
    if isinstance(x, (int, Lin)) and isinstance(y, (int, Lin)):
        return lmax(x, y)
    return wrap(dsl.maximum(operand(x), operand(y)))


def minimum(x, y, propagate_nan=None):
    if isinstance(x, (int, Lin)) and isinstance(y, (int, Lin)):
        return lmin(x, y)
    return wrap(dsl.minimum(operand(x), operand(y)))


def clamp(x, min, max, propagate_nan=None):   # noqa: A002
    return minimum(maximum(x, min), max)


def fma(x, y, z):
    return operand(x) * operand(y) + operand(z)


def fdiv(x, y, ieee_rounding=False):
    return operand(x) / operand(y)


div_rn = fdiv


def trans(x, *dims):
    x = operand(x)
    if len(x.shape) != 2 or dims not in ((), (1, 0), ((1, 0),)):
        raise unsupported("tl.trans/permute of other than a 2-d tile")
    return wrap(dsl.trans(x))


permute = trans


def expand_dims(x, axis):
    if isinstance(x, AInt):
        return x.expand(int(axis))
    return wrap(dsl.expand_dims(operand(x), int(axis)))


def broadcast_to(x, *shape):
    shape = _shape(shape[0] if len(shape) == 1 else shape)
    if isinstance(x, AInt):
        return x.broadcast_to(shape)
    x = operand(x)
    return x if tuple(x.shape) == shape else wrap(x + dsl.zeros(shape, x.dtype)) if x.dtype != "bool" else \
        wrap(dsl.tiles.binary("or", x, dsl.full(shape, 0, "bool")))


def multiple_of(x, values):
    return x


max_contiguous = max_constancy = multiple_of


def static_range(*args, **kwargs):
    args = [getattr(a, "value", a) for a in args]
    if any(isinstance(a, Lin) for a in args):
        raise unsupported("tl.static_range with bounds that depend on the program id")
    return builtins.range(*args)


def range(*args, **kwargs):   # noqa: A001 -- a loop header outside a `for` statement
    raise unsupported("tl.range used other than as the iterator of a `for` loop")


def static_assert(cond, msg=""):
    if isinstance(cond, bool) and not cond:
        raise misuse(f"tl.static_assert failed: {msg}")


def device_assert(*a, **k):
    return None


static_print = device_print = debug_barrier = device_assert


class _Namespace:
    """``tl``, ``tl.math``, ``libdevice``: module-like, with a one-line error for missing names."""

    def __init__(self, name: str, members: dict):
        self._name, self._members = name, members

    def __getattr__(self, item):
        m = self.__dict__["_members"]
        if item in m:
            return m[item]
        if item.startswith("atomic_"):
            raise unsupported(f"{self._name}.{item} (gpusim's IR has no atomic read-modify-write)")
        raise unsupported(f"{self._name}.{item}")


_NAMES = ("constexpr float16 bfloat16 float32 float64 int32 int64 int1 program_id num_programs cdiv arange full zeros "
          "zeros_like full_like make_block_ptr advance dot sum max min where exp exp2 log log2 sqrt sqrt_rn rsqrt "
          "sigmoid erf sin cos tanh abs maximum minimum clamp fma fdiv div_rn trans permute expand_dims "
          "broadcast_to multiple_of max_contiguous max_constancy static_range range static_assert device_assert "
          "static_print device_print debug_barrier load store").split()
MEMBERS = {n: globals()[n] for n in _NAMES}
LIBDEVICE = _Namespace("libdevice", MEMBERS)
MATH = _Namespace("tl.math", MEMBERS)
EXTRA = _Namespace("tl.extra", {"cuda": _Namespace("tl.extra.cuda", {"libdevice": LIBDEVICE}),
                                "libdevice": LIBDEVICE})
TL = _Namespace("tl", {**MEMBERS, "math": MATH, "extra": EXTRA, "libdevice": LIBDEVICE,
                       "tensor": TTile, "float8e5": "fp8", "pi": _math.pi})
_ = (as_lin, norm, aint_add, materialize, compare)
