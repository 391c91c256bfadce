"""Symbolic integers of a traced Triton kernel.

``Lin`` is an integer that may depend on the program id and loop variables: a linear combination
``const + sum(coef * atom)`` whose atoms are ``ir.Expr`` trees (``pid``, ``loopvar``, or anything
non-linear such as ``pid // n``). Keeping the coefficients apart lets a pointer offset be split
exactly into one index per tensor dimension (``memory.split``). ``AInt`` is an int32 tile that is
affine in its positions: ``base + sum(coef_i * position_i)`` (``tl.arange`` and what pointer
arithmetic makes of it). ``Samples`` evaluates both at sampled (program id, loop variable) points.
"""
from __future__ import annotations

from ...dsl import ir
from ...dsl.ir import Expr
from .errors import unsupported


class Lin:
    """``const + sum(coef * atom)``; atoms are ``ir.Expr`` (frozen, hashable)."""

    __slots__ = ("terms", "const")

    def __init__(self, terms=None, const=0):
        self.terms = {a: c for a, c in (terms or {}).items() if c}
        self.const = int(const)

    @staticmethod
    def atom(e: Expr) -> "Lin":
        if e.op == "const":
            return Lin(None, e.args[0])
        return Lin({e: 1})

    @property
    def is_const(self) -> bool:
        return not self.terms

    def expr(self) -> Expr:
        out = ir.const(self.const)
        for a, c in self.terms.items():
            out = out + (a * c if c != 1 else a)
        return out

    def _lin(self, o):
        return o if isinstance(o, Lin) else Lin(None, o) if isinstance(o, int) else None

    def __add__(self, o):
        o = self._lin(o)
        if o is None:
            return NotImplemented
        t = dict(self.terms)
        for a, c in o.terms.items():
            t[a] = t.get(a, 0) + c
        return norm(Lin(t, self.const + o.const))

    __radd__ = __add__

    def __neg__(self):
        return Lin({a: -c for a, c in self.terms.items()}, -self.const)

    def __sub__(self, o):
        o = self._lin(o)
        return NotImplemented if o is None else self + (-o)

    def __rsub__(self, o):
        o = self._lin(o)
        return NotImplemented if o is None else o + (-self)

    def __mul__(self, o):
        o = self._lin(o)
        if o is None:
            return NotImplemented
        if o.is_const:
            return norm(Lin({a: c * o.const for a, c in self.terms.items()}, self.const * o.const))
        if self.is_const:
            return o * self
        return Lin.atom(Expr("mul", (self.expr(), o.expr())))

    __rmul__ = __mul__

    def __floordiv__(self, o):
        o = self._lin(o)
        if o is None:
            return NotImplemented
        if o.is_const and o.const != 0 and all(c % o.const == 0 for c in self.terms.values()) \
                and self.const % o.const == 0:
            return norm(Lin({a: c // o.const for a, c in self.terms.items()}, self.const // o.const))
        return Lin.atom(Expr("floordiv", (self.expr(), o.expr())))

    def __rfloordiv__(self, o):
        return Lin(None, o) // self

    def __mod__(self, o):
        return self - (self // o) * o

    def __rmod__(self, o):
        return Lin(None, o) % self

    def __truediv__(self, o):
        raise unsupported("true division `/` of a program-id or loop-index integer (use //)")

    __rtruediv__ = __truediv__

    def _cmp(self, o=0):
        if not isinstance(o, (int, Lin)):
            return NotImplemented
        raise unsupported("a branch or comparison on a program-id or loop-index value (control flow that "
                          "depends on which program runs)")

    __lt__ = __le__ = __gt__ = __ge__ = _cmp

    def __eq__(self, o):
        lo = self._lin(o)
        if lo is not None and self.is_const and lo.is_const:
            return self.const == lo.const
        return self._cmp(o)

    __ne__ = __eq__
    __hash__ = object.__hash__

    def __bool__(self):
        self._cmp()

    def __index__(self):
        raise unsupported("a program-id or loop-index value used where Python needs a plain int "
                          "(a shape, a static_range bound, a constexpr)")

    def to(self, dtype, **_):
        if dtype in ("int32", "int64"):
            return self
        raise unsupported(f"converting a program-id value to {dtype}")

    def __repr__(self):
        return f"Lin({ir.expr_str(self.expr())})"


def norm(x):
    """A Lin that is a constant becomes a plain int."""
    return x.const if isinstance(x, Lin) and x.is_const else x


def as_lin(x) -> Lin:
    return x if isinstance(x, Lin) else Lin(None, int(x))


def lin_of(e: Expr) -> Lin:
    """The Lin an index expression is (sums and constant multiples opened, anything else an atom)."""
    if e.op == "const":
        return Lin(None, e.args[0])
    if e.op in ("add", "sub"):
        a, b = lin_of(e.args[0]), lin_of(e.args[1])
        return a + b if e.op == "add" else a - b
    if e.op == "mul" and (e.args[0].op == "const" or e.args[1].op == "const"):
        c, x = (e.args[0], e.args[1]) if e.args[0].op == "const" else (e.args[1], e.args[0])
        return lin_of(x) * c.args[0]
    return Lin.atom(e)


def mod_groups(x: Lin) -> tuple:
    """``(groups, rest)``: each group ``k * (inner - c * (inner // c))``, which is ``k * (inner % c)``
    as ``%`` expands (``Lin.__mod__``), taken out of ``x`` whole (k > 0, every term of ``inner``
    present with k times its coefficient), and the rest of ``x``. A pointer offset's split keeps a
    group in one tensor dimension: ``(pid % n) * BLOCK`` indexes the inner dimension even where its
    two terms alone would fall into different ones."""
    groups, rest = [], Lin(x.terms, x.const)
    for atom, f in x.terms.items():
        if atom.op != "floordiv" or atom.args[1].op != "const" or atom not in rest.terms:
            continue
        c = atom.args[1].args[0]
        if c <= 1 or f % c or -f // c <= 0:
            continue
        k = -f // c
        inner = lin_of(atom.args[0])
        if inner.const or not inner.terms or any(rest.terms.get(a, 0) != k * ci for a, ci in inner.terms.items()):
            continue
        g = inner * k + Lin({atom: f})
        groups.append((g, k))
        rest = as_lin(rest - g)
    return groups, rest


def lmin(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    return Lin.atom(ir.emin(as_lin(a).expr(), as_lin(b).expr()))


def lmax(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    return Lin.atom(ir.emax(as_lin(a).expr(), as_lin(b).expr()))


class AInt:
    """An int32 tile ``base + sum(coefs[i] * position along axis i)``; ``base`` is an int or Lin."""

    __slots__ = ("shape", "base", "coefs")

    def __init__(self, shape, base, coefs):
        self.shape = tuple(int(s) for s in shape)
        self.base = norm(base)
        self.coefs = tuple(int(c) if s > 1 else 0 for c, s in zip(coefs, self.shape))

    dtype = "int32"

    def expand(self, axis: int) -> "AInt":
        sh, co = list(self.shape), list(self.coefs)
        sh.insert(axis, 1)
        co.insert(axis, 0)
        return AInt(sh, self.base, co)

    def broadcast_to(self, shape) -> "AInt":
        shape = tuple(shape)
        pad = len(shape) - len(self.shape)
        coefs = (0,) * pad + self.coefs
        for s, t in zip((1,) * pad + self.shape, shape):
            if s != t and s != 1:
                raise unsupported(f"shapes {self.shape} and {shape} do not broadcast")
        return AInt(shape, self.base, coefs)

    def shifted(self, d) -> "AInt":
        return AInt(self.shape, self.base + d, self.coefs)

    def scaled(self, k: int) -> "AInt":
        return AInt(self.shape, self.base * k, tuple(c * k for c in self.coefs))

    def span(self) -> tuple:
        """(smallest, largest) of ``sum(coef * position)`` over the tile."""
        lo = sum(c * (s - 1) for c, s in zip(self.coefs, self.shape) if c < 0)
        hi = sum(c * (s - 1) for c, s in zip(self.coefs, self.shape) if c > 0)
        return lo, hi

    def __repr__(self):
        return f"AInt({self.shape}, base={self.base!r}, coefs={self.coefs})"


def broadcast_shapes(a, b) -> tuple:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise unsupported(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def aint_add(a: AInt, b: AInt, sign: int = 1) -> AInt:
    shape = broadcast_shapes(a.shape, b.shape)
    a, b = a.broadcast_to(shape), b.broadcast_to(shape)
    return AInt(shape, a.base + b.base * sign, tuple(x + sign * y for x, y in zip(a.coefs, b.coefs)))


class Samples:
    """Evaluation points of one launch: sampled program ids, and for each the first, second and last
    iteration of every loop open at the point of evaluation."""

    def __init__(self, grid: tuple, limit: int = 256):
        g = tuple(grid) + (1,) * (3 - len(grid))
        n = g[0] * g[1] * g[2]
        idx = range(n) if n <= limit else sorted(set(
            list(range(limit // 4)) + list(range(n - limit // 4, n)) +
            [i * n // (limit // 2) for i in range(limit // 2)]))
        self.pids = [(i % g[0], (i // g[0]) % g[1], i // (g[0] * g[1])) for i in idx]
        self.loops = []          # open loops, outermost first: (var, start Expr, end Expr, step)

    def points(self):
        for pid in self.pids:
            yield from self._nest(pid, {}, 0)

    def _nest(self, pid, lv, depth):
        if depth == len(self.loops):
            yield pid, lv
            return
        var, start, end, step = self.loops[depth]
        lo, hi = ir.eval_expr(start, pid, lv), ir.eval_expr(end, pid, lv)
        its = list(range(lo, hi, step))
        for i in sorted(set(its[:2] + its[-1:])):
            yield from self._nest(pid, {**lv, var: i}, depth + 1)

    def values(self, x):
        """The values of an int or Lin at every point."""
        if isinstance(x, int):
            return [x]
        e = x.expr()
        return [ir.eval_expr(e, pid, lv) for pid, lv in self.points()]

    def equal(self, a, b) -> bool:
        d = norm(as_lin(a) - as_lin(b))
        return d == 0 if isinstance(d, int) else all(v == 0 for v in self.values(d))
