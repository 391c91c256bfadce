"""``for`` loops of a traced Triton kernel, kept as loops in the IR.

The kernel's source is parsed and each ``for x in range(...)`` / ``tl.range(...)`` becomes a call of
``run_loop`` with the body as a nested function of the loop variable and the carried names (those
the body assigns that are bound before the loop), as Triton's compiler carries them. ``run_loop``
traces the body twice: a probe finds how each carried value changes per iteration (tiles are
loop-carried IR values; integers, pointers and block pointers must change by a loop-invariant
step, and become ``start + iteration * step`` expressions of the loop index), then the body is
traced again with those values and emitted as one ``ir.Loop``. ``tl.static_range`` stays a Python
loop (unrolled, as Triton unrolls it)."""
from __future__ import annotations

import ast

from ... import dsl
from ...dsl import ir
from ...dsl.ir import Expr
from ...dsl.tiles import Tile
from .context import ctx
from .errors import misuse, unsupported
from .memory import BlockPtr, Ptr
from .symbolic import AInt, Lin, as_lin, lmax, norm
from .tiles import Mask, operand, wrap

LOOP_FN = "__gpusim_for"


# --------------------------------------------------------------------------- the source rewrite
def _assigned(nodes) -> set:
    out = set()
    for n in nodes:
        for x in ast.walk(n):
            if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store):
                out.add(x.id)
    return out


def _is_range(it) -> bool:
    if not isinstance(it, ast.Call):
        return False
    f = it.func
    return (isinstance(f, ast.Name) and f.id == "range") or (isinstance(f, ast.Attribute) and f.attr == "range")


class _Rewriter:
    def __init__(self):
        self.n = 0

    def block(self, stmts, bound: set) -> list:
        out, bound = [], set(bound)
        for s in stmts:
            if isinstance(s, ast.For) and _is_range(s.iter):
                out.extend(self.loop(s, bound))
            else:
                for field in ("body", "orelse", "finalbody"):
                    if isinstance(getattr(s, field, None), list) and not isinstance(s, (ast.FunctionDef, ast.ClassDef)):
                        setattr(s, field, self.block(getattr(s, field), bound))
                out.append(s)
            bound |= _assigned([s]) if not isinstance(s, ast.For) else set()
        return out

    def loop(self, s: ast.For, bound: set) -> list:
        if s.orelse:
            raise SyntaxError(f"line {s.lineno}: for ... else")
        for x in ast.walk(s):
            if isinstance(x, (ast.Break, ast.Continue, ast.Return)) and not isinstance(x, ast.FunctionDef):
                kind = type(x).__name__.lower()
                raise SourceError(s.lineno if kind != "return" else x.lineno, f"`{kind}` inside a for loop")
        if not isinstance(s.target, ast.Name):
            raise SourceError(s.lineno, "a for loop whose target is not a single name")
        carried = sorted((_assigned(s.body) & bound) - {s.target.id})
        self.n += 1
        name = f"__gpusim_body_{self.n}"
        inner = self.block(s.body, bound | {s.target.id})
        ret = ast.Return(ast.Tuple([ast.Name(c, ast.Load()) for c in carried], ast.Load()))
        fn = ast.FunctionDef(name=name, args=ast.arguments(posonlyargs=[], args=[ast.arg(s.target.id)] +
                             [ast.arg(c) for c in carried], kwonlyargs=[], kw_defaults=[], defaults=[]),
                             body=inner + [ret], decorator_list=[], returns=None, type_params=[])
        call = ast.Call(ast.Name(LOOP_FN, ast.Load()),
                        [ast.Name(name, ast.Load()), ast.Tuple([ast.Name(c, ast.Load()) for c in carried], ast.Load()),
                         ast.Constant(s.lineno)] + list(s.iter.args), list(s.iter.keywords))
        target = ast.Tuple([ast.Name(c, ast.Store()) for c in carried], ast.Store())
        assign = ast.Assign([target], call) if carried else ast.Expr(call)
        for node in (fn, assign):
            ast.copy_location(node, s)
        return [fn, assign]


class SourceError(Exception):
    def __init__(self, line, what):
        super().__init__(what)
        self.line, self.what = line, what


def rewrite(tree: ast.Module, params: list) -> ast.Module:
    fdef = tree.body[0]
    fdef.decorator_list = []
    fdef.body = _Rewriter().block(fdef.body, set(params))
    ast.fix_missing_locations(tree)
    return tree


# --------------------------------------------------------------------------- the loop at trace time
class _Same:
    """The carried value does not change."""


def _mentions(x, var: int) -> bool:
    def walk(e):
        return (e.op == "loopvar" and e.args[0] == var) or (e.op not in ("const", "pid", "loopvar")
                                                             and any(walk(a) for a in e.args))
    if isinstance(x, Lin):
        return any(walk(a) for a in x.terms)
    if isinstance(x, tuple):
        return any(_mentions(y, var) for y in x)
    return False


def _delta(x0, r, name, var):
    """How a symbolic carried value changes per iteration, or raise."""
    if r is x0:
        return _Same
    if isinstance(x0, (int, Lin)) and isinstance(r, (int, Lin)) and not isinstance(x0, bool):
        d = norm(as_lin(r) - as_lin(x0))
    elif isinstance(x0, AInt) and isinstance(r, AInt) and x0.coefs == r.coefs and x0.shape == r.shape:
        d = norm(as_lin(r.base) - as_lin(x0.base))
    elif isinstance(x0, Ptr) and isinstance(r, Ptr) and r.tensor == x0.tensor:
        a, b = x0.off, r.off
        if isinstance(a, AInt) != isinstance(b, AInt) or isinstance(a, AInt) and a.coefs != b.coefs:
            raise unsupported(f"loop-carried pointer {name!r} changes its shape or layout in the loop")
        d = norm(as_lin(b.base if isinstance(b, AInt) else b) - as_lin(a.base if isinstance(a, AInt) else a))
    elif isinstance(x0, BlockPtr) and isinstance(r, BlockPtr) and r.tensor == x0.tensor:
        d = tuple(norm(as_lin(b) - as_lin(a)) for a, b in zip(x0.offsets, r.offsets))
    elif type(x0) is type(r) and not isinstance(x0, (Lin, AInt, Ptr, BlockPtr, Mask)) and x0 == r:
        return _Same
    else:
        raise unsupported(f"loop-carried value {name!r} ({type(x0).__name__} -> {type(r).__name__})")
    if _mentions(d, var):
        raise unsupported(f"loop-carried value {name!r} changes by a step that depends on the loop index")
    return d


def _advance(x0, d, k):
    """``x0`` advanced by ``k`` (a Lin or int count) steps of ``d``."""
    if d is _Same:
        return x0
    if isinstance(x0, (int, Lin)):
        return norm(x0 + k * d)
    if isinstance(x0, AInt):
        return x0.shifted(k * d)
    if isinstance(x0, Ptr):
        return Ptr(x0.tensor, x0.off.shifted(k * d) if isinstance(x0.off, AInt) else x0.off + k * d)
    return x0.advanced(tuple(k * e for e in d))


def _is_tile(x) -> bool:
    return isinstance(x, (Tile, Mask, float)) and not isinstance(x, bool)


def _range(args, line):
    args = [getattr(a, "value", a) for a in args]
    if not 1 <= len(args) <= 3:
        raise misuse(f"range takes 1 to 3 arguments, got {len(args)}")
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
    for v, what in ((start, "start"), (end, "end"), (step, "step")):
        if not isinstance(v, (int, Lin)) or isinstance(v, bool):
            raise unsupported(f"a loop {what} of type {type(v).__name__} (loop bounds are integers computed from "
                              f"arguments and program ids, not from loaded values)")
    if not isinstance(step, int) or step <= 0:
        raise unsupported("a loop step that is not a positive plain integer")
    return start, end, step


def run_loop(body, init, line, *args, num_stages=None, **_options):
    """Trace ``for i in range(*args)`` with carried values ``init``; returns their values after the loop."""
    start, end, step = _range(args, line)
    t = dsl.tiles.current()
    t.next_loop += 1
    var = t.next_loop
    lv = Lin.atom(Expr("loopvar", (var,)))
    names = body.__code__.co_varnames[1:1 + len(init)]
    sm = ctx().samples
    sm.loops.append((var, as_lin(start).expr(), as_lin(end).expr(), step))
    try:
        plan = _probe(body, init, lv, var, names, t)
        k = (lv - start) // step
        args_, inits = [], []
        for x0, p in zip(init, plan):
            if p[0] == "tile":
                shape, dtype = p[1]
                inits.append(_as_tile(x0, shape, dtype))
                args_.append(wrap(Tile(t.new_value(shape, dtype))))
            else:
                d = p[1]
                if d is not _Same and isinstance(d, int) and step > 1 and d % step == 0:
                    args_.append(_advance(x0, d // step, lv - start))
                else:
                    args_.append(_advance(x0, d, k))
        t.blocks.append([])
        try:
            res = tuple(body(lv, *args_))
        finally:
            body_ops = t.blocks.pop()
        yields = []
        for name, a, r, p in zip(names, args_, res, plan):
            if p[0] == "tile":
                r = operand(r)
                r = r if isinstance(r, Tile) else wrap(dsl.full(a.shape, r, a.dtype))
                if tuple(r.shape) != tuple(a.shape):
                    raise unsupported(f"loop-carried tile {name!r} changes shape {a.shape} -> {r.shape}")
                yields.append((r if r.dtype == a.dtype else wrap(dsl.cast(r, a.dtype))).v)
    finally:
        sm.loops.pop()
    tiles = [i for i, p in enumerate(plan) if p[0] == "tile"]
    outs = tuple(t.new_value(args_[i].shape, args_[i].dtype) for i in tiles)
    t.emit(ir.Loop(var, as_lin(start).expr(), as_lin(end).expr(), step, int(num_stages or ctx().num_stages),
                   tuple(inits[j].v for j in range(len(inits)) if j < len(inits)), tuple(args_[i].v for i in tiles),
                   tuple(body_ops), tuple(yields), outs))
    trips = lmax(0, (norm(end - start) + step - 1) // step) if not isinstance(end - start, int) else \
        max(0, -(-(end - start) // step))
    out, oi = [], iter(outs)
    for x0, p in zip(init, plan):
        out.append(wrap(Tile(next(oi))) if p[0] == "tile" else _advance(x0, p[1], trips))
    return tuple(out)


def _probe(body, init, lv, var, names, t):
    """Per carried value: ("tile", (shape, dtype)) or ("sym", delta)."""
    args = []
    for x0 in init:
        if isinstance(x0, (Tile, Mask)):
            x = operand(x0)
            args.append(wrap(Tile(t.new_value(x.shape, x.dtype))))
        else:
            args.append(x0)
    t.blocks.append([])
    try:
        res = body(lv, *args)
    finally:
        t.blocks.pop()
    plan = []
    for name, x0, a, r in zip(names, init, args, res):
        if _is_tile(x0) or _is_tile(r):
            r = operand(r)
            if not isinstance(r, Tile):
                x = operand(x0)
                shape, dtype = (tuple(x.shape), x.dtype) if isinstance(x, Tile) else ((), "fp32")
            else:
                shape, dtype = tuple(r.shape), r.dtype
            plan.append(("tile", (shape, dtype)))
        else:
            plan.append(("sym", _delta(a, r, name, var)))
    return plan


def _as_tile(x0, shape, dtype):
    x = operand(x0)
    if isinstance(x, Tile):
        if tuple(x.shape) != tuple(shape):
            x = wrap(x + dsl.zeros(shape, x.dtype)) if x.dtype != "bool" else x
        return x if x.dtype == dtype else wrap(dsl.cast(x, dtype))
    return wrap(dsl.full(shape, x, dtype))
