"""Pointers of a traced Triton kernel and what ``tl.load``/``tl.store`` make of them.

A pointer is a tensor argument plus an element offset: an int or ``Lin`` (a scalar pointer) or an
``AInt`` (a tile of pointers, affine in its positions). A load or store becomes one gpusim ``Load``
or ``Store`` of a rectangular box: each tile axis that moves must step by the stride of one tensor
dimension, and the offset's symbolic base splits exactly into one start index per dimension
(each term goes to the largest stride that divides its coefficient). A mask that only repeats the
tensor's bounds is what the IR's boundary handling does already and costs nothing; any other load
mask becomes a ``where`` after the load. A store mask must be of the first kind.
"""
from __future__ import annotations

from dataclasses import dataclass

from ... import dsl
from ...dsl import ir
from .context import ctx
from .errors import misuse, unsupported
from .symbolic import AInt, Lin, as_lin, mod_groups, norm
from .tiles import Mask, TTile, dtype_name, operand, wrap


@dataclass(frozen=True)
class PtrType:
    element_ty: str

    def __eq__(self, o):
        return isinstance(o, PtrType) and o.element_ty == self.element_ty

    __hash__ = object.__hash__


class Ptr:
    """``tensor + off`` (element offset: int, Lin or AInt)."""

    __slots__ = ("tensor", "off")

    def __init__(self, tensor, off):
        self.tensor, self.off = tensor, norm(off)

    @property
    def dtype(self):
        return PtrType(self.tensor.dtype)

    type = dtype

    @property
    def shape(self):
        return self.off.shape if isinstance(self.off, AInt) else ()

    def __add__(self, o):
        if isinstance(o, (int, Lin)):
            return Ptr(self.tensor, self.off + o if not isinstance(self.off, AInt) else self.off.shifted(o))
        if isinstance(o, AInt):
            from .symbolic import aint_add
            mine = self.off if isinstance(self.off, AInt) else AInt((1,) * len(o.shape), self.off, (0,) * len(o.shape))
            return Ptr(self.tensor, aint_add(mine, o))
        raise unsupported(f"pointer arithmetic with a {getattr(o, 'dtype', type(o).__name__)} tile computed from "
                          f"loaded values (a gather: the addresses must follow from program ids, loop indices "
                          f"and tl.arange)")

    __radd__ = __add__

    def __sub__(self, o):
        if isinstance(o, (int, Lin)):
            return self + (-o)
        if isinstance(o, AInt):
            return self + o.scaled(-1)
        return self + o

    def __getitem__(self, idx):
        if not isinstance(self.off, AInt):
            raise misuse("indexing a scalar pointer")
        idx = idx if isinstance(idx, tuple) else (idx,)
        axes = [i for i, s in enumerate(idx) if s is None]
        if len(axes) != 1 or len(idx) != len(self.shape) + 1:
            raise unsupported(f"pointer tile index {idx} (only [:, None] and [None, :])")
        return Ptr(self.tensor, self.off.expand(axes[0]))

    def to(self, *a, **k):
        raise unsupported("casting a pointer")

    def __bool__(self):
        raise unsupported("a Python branch on a pointer")


class BlockPtr:
    """``tl.make_block_ptr``: a tensor, a base element offset, the block's shape, strides and offsets."""

    __slots__ = ("tensor", "base", "shape", "strides", "offsets", "block_shape", "order")

    def __init__(self, tensor, base, shape, strides, offsets, block_shape, order):
        self.tensor, self.base = tensor, norm(base)
        self.shape, self.strides = tuple(shape), tuple(int(_int(s, "block pointer strides")) for s in strides)
        self.offsets, self.block_shape = tuple(norm(o) for o in offsets), tuple(int(b) for b in block_shape)
        self.order = tuple(order)

    def advanced(self, deltas) -> "BlockPtr":
        if len(deltas) != len(self.offsets):
            raise misuse(f"tl.advance: {len(deltas)} offsets for a {len(self.offsets)}-d block pointer")
        return BlockPtr(self.tensor, self.base, self.shape, self.strides,
                        [norm(o + d) for o, d in zip(self.offsets, deltas)], self.block_shape, self.order)

    def aint(self) -> AInt:
        base = self.base
        for o, s in zip(self.offsets, self.strides):
            base = base + o * s
        return AInt(self.block_shape, base, self.strides)

    def bounds(self, dims) -> tuple:
        """Conjuncts (AInt < 0) of the boundary check along ``dims``."""
        out, n = [], len(self.block_shape)
        for d in dims:
            e = [0] * n
            e[d] = 1
            out.append(AInt(self.block_shape, norm(self.offsets[d] - self.shape[d]), e))
            e = [0] * n
            e[d] = -1
            out.append(AInt(self.block_shape, norm(-1 - as_lin(self.offsets[d])), e))
        return tuple(out)


def _int(x, what):
    if isinstance(x, Lin) or not isinstance(x, int):
        raise unsupported(f"{what} that are not plain integers")
    return x


def strides_of(shape) -> tuple:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d
    return tuple(reversed(out))


@dataclass
class Box:
    dims: tuple         # tensor dim of each tile axis (None: the axis does not move)
    starts: tuple       # Lin/int start index per tensor dim


def split(off: AInt, t: ir.TensorArg, what: str) -> Box:
    """The box an affine offset tile addresses in tensor ``t``."""
    strides, shape = strides_of(t.shape), t.shape
    dims = []
    for i, (c, n) in enumerate(zip(off.coefs, off.shape)):
        if c == 0:
            if n > 1:
                raise unsupported(f"{what} {t.name}: every element along tile axis {i} has the same address "
                                  f"(a broadcast pointer)")
            dims.append(None)
            continue
        ks = [k for k in range(len(shape)) if strides[k] == c and shape[k] > 1]
        if not ks:
            raise unsupported(f"{what} {t.name}: tile axis {i} steps {c} elements, which is the stride of no "
                              f"dimension of {t.name} (shape {list(shape)}, strides {list(strides)}); declare "
                              f"the tensor with the shape the kernel indexes")
        dims.append(ks[0])
    used = [d for d in dims if d is not None]
    if len(set(used)) != len(used):
        raise unsupported(f"{what} {t.name}: two tile axes step along the same tensor dimension")
    starts = [Lin() for _ in shape]
    groups, base = mod_groups(as_lin(off.base))
    for part, f in groups + [(Lin({atom: f}), f) for atom, f in base.terms.items()]:
        k = max((k for k in range(len(shape)) if f % strides[k] == 0), key=lambda k: strides[k])
        starts[k] = starts[k] + Lin({a: v // strides[k] for a, v in part.terms.items()})
    c = base.const
    for k in range(len(shape)):
        q, c = divmod(c, strides[k]) if k < len(shape) - 1 else (c, 0)
        starts[k] = starts[k] + q
    return Box(tuple(dims), _carry(tuple(dims), starts, shape))


def _carry(dims, starts, shape) -> tuple:
    """Start indices of dimensions the tile does not move along, brought into range by carrying
    whole multiples into the next outer dimension (the same addresses: ``pid * stride_h`` with
    pid running over batch x heads indexes the batch dimension too)."""
    sm = ctx().samples
    starts = list(starts)
    for k in range(len(shape) - 1, 0, -1):
        if k in dims or isinstance(norm(starts[k]), int) and 0 <= norm(starts[k]) < shape[k]:
            continue
        if all(0 <= v < shape[k] for v in sm.values(norm(starts[k]))):
            continue
        q = as_lin(starts[k]) // shape[k]
        starts[k - 1] = starts[k - 1] + q
        starts[k] = starts[k] - q * shape[k]
    return tuple(norm(s) for s in starts)


def _aligned(c: AInt, rank: int) -> AInt:
    pad = rank - len(c.shape)
    return AInt((1,) * pad + c.shape, c.base, (0,) * pad + c.coefs) if pad > 0 else c


def _implied(conj, box: Box, t: ir.TensorArg, rank: int) -> bool:
    """Whether every conjunct repeats a tensor bound of the box's mapped dimensions."""
    sm = ctx().samples
    for c in conj:
        c = _aligned(c, rank)
        if all(v + c.span()[1] < 0 for v in sm.values(c.base)):
            continue                                    # true on the whole tile: no mask at all
        moving = [i for i, x in enumerate(c.coefs) if x]
        if len(moving) != 1 or abs(c.coefs[moving[0]]) != 1 or box.dims[moving[0]] is None:
            return False
        k = box.dims[moving[0]]
        o = box.starts[k]
        want = o - t.shape[k] if c.coefs[moving[0]] == 1 else -as_lin(o) - 1
        if not sm.equal(c.base, want):
            return False
    return True


def _crossing(box: Box, off: AInt, t: ir.TensorArg) -> str | None:
    """Why the box leaves an inner dimension (where flat memory would wrap into the next row), or None."""
    sm = ctx().samples
    ext = {d: n for d, n in zip(box.dims, off.shape) if d is not None}
    for k in range(1, len(t.shape)):
        n = ext.get(k, 1)
        for v in sm.values(box.starts[k]):
            if v < 0 or v + n > t.shape[k]:
                return f"dimension {k} (extent {t.shape[k]}) from index {v} for {n} elements"
    return None


def _shape_to(x: TTile, shape) -> TTile:
    """``x`` with size-1 axes inserted or removed to reach ``shape`` (same elements)."""
    shape = tuple(shape)
    while len(x.shape) > len(shape):
        i = next(i for i, s in enumerate(x.shape) if s == 1)
        x = wrap(dsl.cast(dsl.tsum(x, i), x.dtype))
    while tuple(x.shape) != shape:
        i = next(i for i in range(len(shape)) if i >= len(x.shape) or x.shape[i] != shape[i])
        x = wrap(dsl.expand_dims(x, i))
    return x


def _plan(ptr, what):
    """(tensor, offset AInt, box, load shape, transposed) of a pointer."""
    if isinstance(ptr, BlockPtr):
        off = ptr.aint()
    elif isinstance(ptr, Ptr):
        off = ptr.off if isinstance(ptr.off, AInt) else AInt((1,), ptr.off, (0,))
    else:
        raise misuse(f"{what} needs a pointer, got {type(ptr).__name__}")
    t = ptr.tensor
    if len(off.shape) > 2:
        raise unsupported(f"{what} {t.name}: a {len(off.shape)}-d tile (gpusim's IR loads 1-d and 2-d tiles)")
    box = split(off, t, what)
    moving = [(i, d) for i, d in enumerate(box.dims) if d is not None]
    rank = len(t.shape)
    if not moving:
        return t, off, box, (1,), False
    if len(moving) == 1:
        i, d = moving[0]
        if d == rank - 1:
            return t, off, box, (off.shape[i],), False
        if d == rank - 2:
            return t, off, box, (off.shape[i], 1), False
    elif [d for _, d in moving] == [rank - 2, rank - 1]:
        return t, off, box, off.shape, False
    elif [d for _, d in moving] == [rank - 1, rank - 2]:
        return t, off, box, off.shape[::-1], True
    raise unsupported(f"{what} {t.name}: the tile's axes run along dimensions {[d for _, d in moving]} of a "
                      f"{rank}-d tensor; gpusim loads and stores tiles over the last dimensions")


def _offsets(box: Box, t):
    return tuple(as_lin(s).expr() for s in box.starts)


def _conj_and_tile(ptr, mask, boundary_check, shape):
    if isinstance(ptr, BlockPtr):
        dims = tuple(boundary_check or ())
        conj = ptr.bounds(dims)
        return (conj, (lambda: _conj_tile(conj, shape))) if dims else ((), None)
    if mask is None:
        return (), None
    if isinstance(mask, Mask):
        return mask.conj, mask.tile
    m = operand(mask)
    if isinstance(m, bool):
        return ((), None) if m else (None, lambda: wrap(dsl.full(shape, 0, "bool")) == 1)
    return None, (lambda: m)


def _conj_tile(conj, shape):
    from .tiles import materialize
    out = None
    for c in conj:
        m = wrap(materialize(c)) < 0
        out = m if out is None else out & m
    return out


def _mask_plan(ptr, mask, boundary_check, box, off, t, what):
    """The mask tile maker when a ``where`` is needed (None when the mask repeats the bounds)."""
    conj, make = _conj_and_tile(ptr, mask, boundary_check, off.shape)
    implied = conj is not None and _implied(conj, box, t, len(off.shape))
    why = _crossing(box, off, t)
    if why and not (implied and conj):
        raise unsupported(f"{what} {t.name}: the tile leaves {why} without a mask that stops there; "
                          f"declare {t.name} with the shape the kernel indexes")
    return None if implied else make


def _broadcast(v: TTile, shape) -> TTile:
    if tuple(v.shape) == tuple(shape):
        return v
    if v.dtype == "bool":
        return wrap(dsl.where(v, wrap(dsl.full(shape, 1, "bool")) == 1, False))
    return wrap(v + wrap(dsl.zeros(shape, v.dtype)))


def load(ptr, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
         eviction_policy="", volatile=False):
    t, off, box, lshape, trans = _plan(ptr, "tl.load from")
    ctx().loaded.append(t.name)
    make = _mask_plan(ptr, mask, boundary_check, box, off, t, "tl.load from")
    if padding_option == "nan":
        other = float("nan")
    oth = float(other) if isinstance(other, (int, float)) else 0.0
    x = wrap(dsl.load(t, _offsets(box, t), lshape, other=oth))
    if trans:
        x = wrap(dsl.trans(x))
    x = _shape_to(x, off.shape if isinstance(ptr, BlockPtr) or isinstance(ptr.off, AInt) else ())
    if make is not None:
        x = wrap(dsl.where(operand(make()), x, operand(other) if other is not None else 0.0))
        if x.dtype != t.dtype:
            x = x.to(t.dtype)
    return x


def store(ptr, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    t, off, box, lshape, trans = _plan(ptr, "tl.store to")
    ctx().stored.append(t.name)
    if _mask_plan(ptr, mask, boundary_check, box, off, t, "tl.store to") is not None:
        raise unsupported(f"tl.store to {t.name} with a mask other than the tensor's bounds (gpusim's IR "
                          f"stores whole tiles, clipped at the tensor's edges)")
    v = operand(value)
    shape = off.shape if isinstance(ptr, BlockPtr) or isinstance(ptr.off, AInt) else ()
    if not isinstance(v, TTile):
        v = wrap(dsl.full(shape, v, t.dtype))
    v = _broadcast(v, shape)
    if trans:
        v = wrap(dsl.trans(v))
    v = _shape_to(v, lshape)
    if v.dtype != t.dtype:
        v = v.to(t.dtype)
    dsl.store(t, _offsets(box, t), v)


def elem_dtype(ptr) -> str:
    return dtype_name(ptr.tensor.dtype)
