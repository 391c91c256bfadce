"""Tile values of a traced Triton kernel: ``TTile`` (a gpusim DSL tile with the operators Triton
code uses on ``tl.tensor``), ``Mask`` (a comparison kept symbolic until a tile is needed, so a
mask that only repeats the tensor bounds costs nothing), and the conversion of symbolic integers
(``Lin``, ``AInt``) into IR tiles when arithmetic needs their values."""
from __future__ import annotations

import numbers

from ... import dsl
from ...dsl.tiles import Tile
from .errors import misuse, unsupported
from .symbolic import AInt, Lin, aint_add, as_lin, norm  # noqa: F401

DTYPES = {"fp16": "fp16", "bf16": "bf16", "fp32": "fp32", "int32": "int32", "int64": "int32", "int1": "bool",
          "bool": "bool"}


def dtype_name(d) -> str:
    """gpusim's name of a Triton dtype (``tl.float16``, ``"fp16"``, a pointer's ``element_ty``)."""
    name = getattr(d, "name", d)
    if name not in DTYPES:
        raise unsupported(f"dtype {name} (gpusim's IR has fp16, bf16, fp32, int32 and bool tiles)")
    return DTYPES[name]


def materialize(x) -> Tile:
    """A DSL tile holding the values of an AInt, a Lin or a Mask."""
    if isinstance(x, Mask):
        return x.tile()
    if isinstance(x, Lin):
        one = dsl.arange(x.expr(), 1, shape=(1,))
        return dsl.tsum(one, 0)
    if isinstance(x, AInt):
        rank = len(x.shape)
        t = dsl.arange(as_lin(x.base).expr(), 1, shape=(1,) * rank, axis=0)
        for i, (c, s) in enumerate(zip(x.coefs, x.shape)):
            if c:
                sh = [1] * rank
                sh[i] = s
                t = t + dsl.arange(0, s, shape=tuple(sh), axis=i) * c
        if t.shape != x.shape:
            t = t + dsl.zeros(x.shape, "int32")
        return t
    raise misuse(f"expected a tile, got {type(x).__name__}")


def operand(x):
    """What a DSL op takes: a Tile or a Python constant."""
    if isinstance(x, Tile):
        return x
    if isinstance(x, (AInt, Lin, Mask)):
        return TTile(materialize(x).v)
    if isinstance(x, (bool, numbers.Real)):
        return x
    if hasattr(x, "value") and type(x).__name__ == "constexpr":
        return operand(x.value)
    raise unsupported(f"using a {type(x).__name__} as a tile operand")


def wrap(t):
    return TTile(t.v) if isinstance(t, Tile) and not isinstance(t, TTile) else t


def _bin(name):
    def f(self, o):
        return wrap(dsl.tiles.binary(name, operand(self), operand(o)))

    def r(self, o):
        return wrap(dsl.tiles.binary(name, operand(o), operand(self)))
    return f, r


class TTile(Tile):
    """A traced tile with the rest of ``tl.tensor``'s surface."""

    __slots__ = ()

    __add__, __radd__ = _bin("add")
    __sub__, __rsub__ = _bin("sub")
    __mul__, __rmul__ = _bin("mul")
    __truediv__, __rtruediv__ = _bin("div")
    __lt__ = _bin("lt")[0]
    __le__ = _bin("le")[0]
    __gt__ = _bin("gt")[0]
    __ge__ = _bin("ge")[0]
    __eq__ = _bin("eq")[0]
    __ne__ = _bin("ne")[0]
    __and__, __rand__ = _bin("and")
    __or__, __ror__ = _bin("or")
    __hash__ = object.__hash__

    def __neg__(self):
        return wrap(Tile.__neg__(self))

    def __invert__(self):
        return wrap(Tile.__invert__(self))

    def __abs__(self):
        return wrap(Tile.__abs__(self))

    def _no(self, *_):
        raise unsupported("%, //, **, shifts and bitwise ^ on tiles (gpusim's IR has no such tile op)")

    __mod__ = __rmod__ = __floordiv__ = __rfloordiv__ = __pow__ = __rpow__ = _no
    __lshift__ = __rshift__ = __xor__ = __rxor__ = _no

    def __getitem__(self, idx):
        return wrap(Tile.__getitem__(self, idx))

    def to(self, dtype, **_):
        d = dtype_name(dtype)
        return self if d == self.dtype else wrap(dsl.cast(self, d))

    cast = to

    def __bool__(self):
        raise unsupported("a Python `if`, `while`, `and`, `or` or `not` on a tile value (control flow that "
                          "depends on loaded data)")

    @property
    def T(self):   # noqa: N802 -- tl.tensor's name
        return wrap(dsl.trans(self))


class Mask:
    """A bool tile kept symbolic: ``conj`` is a tuple of AInts, each meaning ``value < 0``, all of
    which must hold (None: not of that form). ``tile()`` builds the IR tile when it is needed."""

    __slots__ = ("conj", "shape", "_make")

    dtype = "bool"

    def __init__(self, conj, shape, make):
        self.conj, self.shape, self._make = conj, tuple(shape), make

    def tile(self) -> TTile:
        return wrap(self._make())

    def __and__(self, o):
        if isinstance(o, Mask) and self.conj is not None and o.conj is not None:
            from .symbolic import broadcast_shapes
            shape = broadcast_shapes(self.shape, o.shape)
            return Mask(self.conj + o.conj, shape, lambda: self.tile() & o.tile())
        return operand(self) & operand(o)

    __rand__ = __and__

    def __or__(self, o):
        return operand(self) | operand(o)

    __ror__ = __or__

    def __invert__(self):
        return ~self.tile()

    def __getitem__(self, idx):
        if self.conj is None:
            return self.tile()[idx]
        idx = idx if isinstance(idx, tuple) else (idx,)
        axis = [i for i, s in enumerate(idx) if s is None]
        if len(axis) != 1:
            return self.tile()[idx]
        return Mask(tuple(c.expand(axis[0]) for c in self.conj), _ins(self.shape, axis[0]),
                    lambda: self.tile()[idx])

    def __bool__(self):
        raise unsupported("a Python branch on a mask (control flow that depends on tile values)")

    def to(self, dtype, **_):
        return self.tile().to(dtype)


def _ins(shape, axis):
    s = list(shape)
    s.insert(axis, 1)
    return tuple(s)


_CANON = {"lt": lambda a, b: (a, b, 0), "le": lambda a, b: (a, b, 1), "gt": lambda a, b: (b, a, 0),
          "ge": lambda a, b: (b, a, 1)}


def _as_aint(x, shape):
    if isinstance(x, AInt):
        return x
    return AInt(shape, x, (0,) * len(shape))


def compare(op: str, a, b):
    """``a op b`` where one side is an AInt: a Mask (lt/le/gt/ge) or a bool tile."""
    shape = a.shape if isinstance(a, AInt) else b.shape

    def make():
        return dsl.tiles.binary(op, operand(a), operand(b))
    if op in _CANON and all(isinstance(x, (AInt, int, Lin)) for x in (a, b)):
        x, y, plus = _CANON[op](a, b)
        d = aint_add(_as_aint(x, shape), _as_aint(y, shape), -1).shifted(-plus)
        return Mask((d,), d.shape, make)
    return wrap(make())


def scalar_tile(x, dtype: str) -> TTile:
    """A 0-d tile of ``dtype`` holding a runtime scalar argument (Triton types them: fp32, int32)."""
    return wrap(dsl.full((), float(x) if dtype != "int32" else int(x), dtype))


def _aint_arith(self, o, sign=1, rev=False):
    if isinstance(o, (int, Lin)):
        return self.shifted(o * sign) if not rev else self.scaled(-1).shifted(o) if sign == -1 else self.shifted(o)
    if isinstance(o, AInt):
        return aint_add(self, o, sign) if not rev else aint_add(o, self, sign)
    if isinstance(o, bool) or not isinstance(o, (numbers.Real, Tile, Mask)):
        return NotImplemented
    a, b = (o, self) if rev else (self, o)
    return wrap(dsl.tiles.binary("sub" if sign == -1 else "add", operand(a), operand(b)))


def _aint_mul(self, o):
    if isinstance(o, int) and not isinstance(o, bool):
        return self.scaled(o)
    if isinstance(o, Lin) and o.is_const:
        return self.scaled(o.const)
    if isinstance(o, (Lin, numbers.Real, Tile, AInt, Mask)):
        return wrap(operand(self) * operand(o))
    return NotImplemented


def _aint_mod(self, m):
    from .context import ctx
    if not isinstance(m, int):
        raise unsupported("% on an index tile by a value that is not a plain integer")
    lo, hi = self.span()
    for v in ctx().samples.values(self.base):
        if v + lo < 0 or v + hi >= m:
            raise unsupported(f"% {m} on an index tile that wraps around (values {v + lo}..{v + hi} at a sampled "
                              f"program): the addresses are no longer a rectangular box")
    return self


def _aint_floordiv(self, d):
    if isinstance(d, int) and d and all(c % d == 0 for c in self.coefs) and isinstance(self.base, int) \
            and self.base % d == 0:
        return AInt(self.shape, self.base // d, tuple(c // d for c in self.coefs))
    raise unsupported("// on an index tile (gpusim's IR has no integer division of tiles)")


def _aint_cmp(op):
    def f(self, o):
        if isinstance(o, (int, Lin, AInt)) and not isinstance(o, bool):
            return compare(op, self, o)
        return wrap(dsl.tiles.binary(op, operand(self), operand(o)))
    return f


def _aint_getitem(self, idx):
    idx = idx if isinstance(idx, tuple) else (idx,)
    axes = [i for i, s in enumerate(idx) if s is None]
    if len(axes) != 1 or len(idx) != len(self.shape) + 1:
        raise unsupported(f"index {idx} on an index tile (only [:, None] and [None, :])")
    return self.expand(axes[0])


def _aint_to(self, dtype, **_):
    d = dtype_name(dtype)
    return self if d == "int32" else materialize(self).to(d) if isinstance(materialize(self), TTile) \
        else wrap(materialize(self)).to(d)


def _install():
    A = AInt
    A.__add__ = lambda s, o: _aint_arith(s, o)
    A.__radd__ = lambda s, o: _aint_arith(s, o, 1, True)
    A.__sub__ = lambda s, o: _aint_arith(s, o, -1)
    A.__rsub__ = lambda s, o: _aint_arith(s, o, -1, True)
    A.__mul__ = A.__rmul__ = _aint_mul
    A.__neg__ = lambda s: s.scaled(-1)
    A.__mod__ = _aint_mod
    A.__floordiv__ = _aint_floordiv
    A.__truediv__ = lambda s, o: wrap(operand(s) / operand(o))
    A.__rtruediv__ = lambda s, o: wrap(operand(o) / operand(s))
    for op, name in (("lt", "__lt__"), ("le", "__le__"), ("gt", "__gt__"), ("ge", "__ge__"), ("eq", "__eq__"),
                     ("ne", "__ne__")):
        setattr(A, name, _aint_cmp(op))
    A.__hash__ = object.__hash__
    A.__getitem__ = _aint_getitem
    A.to = _aint_to
    A.__bool__ = lambda s: (_ for _ in ()).throw(unsupported("a Python branch on an index tile"))


_install()

__all__ = ["TTile", "Mask", "compare", "materialize", "operand", "wrap", "dtype_name", "norm", "scalar_tile"]
