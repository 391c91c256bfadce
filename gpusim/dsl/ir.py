"""The gpusim IR: the one closed set of data types every backend consumes.

A kernel body is traced once (see ``gpusim.dsl.builder``) into a ``Program``:
a list of ops in SSA form over tile ``Value``s. Index arithmetic (offsets, loop
bounds) is kept symbolic as ``Expr`` trees over ``program_id`` and loop
variables, so the numpy executor, the timing model and the Triton
lowering all read the same structure. Shapes are concrete: tile sizes are
compile-time constants, as ``tl.constexpr`` values are in Triton.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from .dtypes import FP8_DTYPES, COMPARE_OPS, LOGICAL_OPS, binary_dtypes, const_dtype, const_value, promote  # noqa: F401

DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "int32": 4, "bool": 1, "fp8e4m3": 1, "fp8e5m2": 1}
FLOAT_DTYPES = ("fp16", "bf16", "fp32") + FP8_DTYPES


# --------------------------------------------------------------------------- index expressions
@dataclass(frozen=True)
class Expr:
    """Symbolic integer: op in const | pid | loopvar | add | sub | mul | floordiv | min | max."""

    op: str
    args: tuple

    def _wrap(self, other):
        return other if isinstance(other, Expr) else const(int(other))

    def __add__(self, o):
        return _fold("add", self, self._wrap(o))

    def __radd__(self, o):
        return _fold("add", self._wrap(o), self)

    def __sub__(self, o):
        return _fold("sub", self, self._wrap(o))

    def __rsub__(self, o):
        return _fold("sub", self._wrap(o), self)

    def __mul__(self, o):
        return _fold("mul", self, self._wrap(o))

    def __rmul__(self, o):
        return _fold("mul", self._wrap(o), self)

    def __floordiv__(self, o):
        return _fold("floordiv", self, self._wrap(o))

    def __repr__(self):
        return expr_str(self)


IntLike = Union[int, Expr]

_PY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
       "floordiv": lambda a, b: a // b, "min": min, "max": max}


def const(v: int) -> Expr:
    return Expr("const", (int(v),))


def _fold(op: str, a: Expr, b: Expr) -> Expr:
    if a.op == "const" and b.op == "const":
        return const(_PY[op](a.args[0], b.args[0]))
    if op in ("add", "sub") and b.op == "const" and b.args[0] == 0:
        return a
    if op == "add" and a.op == "const" and a.args[0] == 0:
        return b
    if op == "mul" and ((a.op == "const" and a.args[0] == 0) or (b.op == "const" and b.args[0] == 0)):
        return const(0)
    if op == "mul" and b.op == "const" and b.args[0] == 1:
        return a
    if op == "mul" and a.op == "const" and a.args[0] == 1:
        return b
    return Expr(op, (a, b))


def as_expr(v: IntLike) -> Expr:
    return v if isinstance(v, Expr) else const(int(v))


def emin(a: IntLike, b: IntLike) -> Expr:
    return _fold("min", as_expr(a), as_expr(b))


def emax(a: IntLike, b: IntLike) -> Expr:
    return _fold("max", as_expr(a), as_expr(b))


def eval_expr(e: Expr, pid: tuple, loopvars: dict) -> int:
    op = e.op
    if op == "const":
        return e.args[0]
    if op == "pid":
        return pid[e.args[0]]
    if op == "loopvar":
        return loopvars[e.args[0]]
    return _PY[op](eval_expr(e.args[0], pid, loopvars), eval_expr(e.args[1], pid, loopvars))


def expr_str(e: Expr, pid_names=("pid0", "pid1", "pid2"), loop_names=None) -> str:
    """Python/Triton source text of an expression."""
    op = e.op
    if op == "const":
        return str(e.args[0])
    if op == "pid":
        return pid_names[e.args[0]]
    if op == "loopvar":
        return (loop_names or {}).get(e.args[0], f"i{e.args[0]}")
    a, b = (expr_str(x, pid_names, loop_names) for x in e.args)
    if op in ("min", "max"):
        return f"{op}({a}, {b})" if loop_names is None else f"tl.{'minimum' if op == 'min' else 'maximum'}({a}, {b})"
    sym = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//"}[op]
    return f"({a} {sym} {b})"


# --------------------------------------------------------------------------- tensors and values
@dataclass(frozen=True)
class TensorArg:
    """A kernel parameter that names an HBM tensor (shape and dtype are concrete)."""

    name: str
    shape: tuple
    dtype: str

    @property
    def nbytes(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True, eq=False)
class Value:
    """An SSA tile value (or a 0-d scalar when shape == ())."""

    id: int
    shape: tuple
    dtype: str

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


# --------------------------------------------------------------------------- ops (the closed set)
# Pipes a computation occupies in the timing model; loads/stores use the memory system.
ELEMENTWISE_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "lt", "le", "gt", "ge", "eq", "ne", "and", "or")
ELEMENTWISE_UNARY = ("neg", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "not",
                     "tanh", "sigmoid", "erf", "sin", "cos")
# math ops beyond exp/log: (MUFU ops, other FP32-pipe ops) per element in the SASS that Triton 3.9
# emits for sm_90 (fp32, counted from nvdisasm of a one-op kernel):
#   tanh    libdevice tanhf: MUFU.EX2 + MUFU.RCP, 6 FFMA, 2 FMUL, 2 FADD, 2 FSETP, 1 SEL
#   sigmoid tl.sigmoid = 1/(1+exp(-x)): MUFU.EX2 + MUFU.RCP, 5 FMUL, 1 FADD, 2 FSETP, 1 FSEL
#   erf     tl.erf (erff): MUFU.EX2, 7 FFMA + 3 HFMA2 (constants), FMUL, 2 FADD, FSEL, FSETP
#   sin/cos tl.sin/tl.cos (precise sinf/cosf, no MUFU): fast path 9 FFMA, 3 FMUL, FADD, 2 FSEL,
#           2 FSETP, F2I + I2F (range reduction); the Payne-Hanek branch for |x| > 105615 is not costed
MATH_UNARY = {"tanh": (2, 13), "sigmoid": (2, 9), "erf": (1, 15), "sin": (0, 20), "cos": (0, 20)}
SFU_UNARY = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt") + tuple(MATH_UNARY)   # costed apart from the SIMT mix
REDUCTIONS = ("sum", "max", "min")


@dataclass(frozen=True, eq=False)
class Load:
    """HBM -> on-chip tile at ``offsets`` (one per tensor dim); the tile covers the last len(shape) dims.
    Elements outside the tensor read as ``other`` (boundary masking)."""

    out: Value
    tensor: TensorArg
    offsets: tuple
    other: float = 0.0


@dataclass(frozen=True, eq=False)
class Store:
    """On-chip tile -> HBM at ``offsets``; elements outside the tensor are not written."""

    tensor: TensorArg
    offsets: tuple
    value: Value


@dataclass(frozen=True, eq=False)
class Full:
    out: Value
    fill: float


@dataclass(frozen=True, eq=False)
class Iota:
    """Index tile: element value = start + position along ``axis``."""

    out: Value
    axis: int
    start: Expr


@dataclass(frozen=True, eq=False)
class Binary:
    """Elementwise ``op`` with numpy broadcasting; an operand may be a Python bool/int/float
    constant. Operands are converted to ``binary_dtypes(op, a, b)[0]`` (Triton's promotion)."""

    out: Value
    op: str
    a: object
    b: object


@dataclass(frozen=True, eq=False)
class Unary:
    """``neg``/``abs`` keep the dtype; ``not`` is logical not of a bool tile; exp, exp2, log,
    log2, sqrt, rsqrt, tanh, sigmoid, erf, sin, cos compute in fp32 (the input is converted to fp32 first)."""

    out: Value
    op: str
    a: Value


@dataclass(frozen=True, eq=False)
class Where:
    """``cond`` (a bool tile) ? a : b; a and b are converted to ``promote(a, b)``."""

    out: Value
    cond: Value
    a: object
    b: object


@dataclass(frozen=True, eq=False)
class Cast:
    out: Value
    a: Value


@dataclass(frozen=True, eq=False)
class Reduce:
    """sum/max/min along ``axis``: float tiles reduce in fp32, int32 and bool tiles in int32."""

    out: Value
    op: str
    a: Value
    axis: int


@dataclass(frozen=True, eq=False)
class ExpandDims:
    out: Value
    a: Value
    axis: int


@dataclass(frozen=True, eq=False)
class Trans:
    out: Value
    a: Value


@dataclass(frozen=True, eq=False)
class Dot:
    """out = a @ b (+ acc), fp32 accumulation on the tensor pipe."""

    out: Value
    a: Value
    b: Value
    acc: Value | None


@dataclass(frozen=True, eq=False)
class Loop:
    """for var in range(start, end, step), pipelined ``stages`` deep, with loop-carried values.

    ``args`` are the body's names for the carried values, ``init`` their initial values,
    ``yields`` the values the body passes to the next iteration, ``outs`` the final values."""

    var: int
    start: Expr
    end: Expr
    step: int
    stages: int
    init: tuple
    args: tuple
    body: tuple
    yields: tuple
    outs: tuple


OPS = (Load, Store, Full, Iota, Binary, Unary, Where, Cast, Reduce, ExpandDims, Trans, Dot, Loop)


@dataclass(frozen=True)
class Program:
    """A traced kernel: its tensor parameters, body ops and launch-independent metadata."""

    name: str
    params: tuple           # TensorArg, in call order
    body: tuple             # ops
    num_warps: int = 4
    grid_rank: int = 1
    meta: dict = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Launch:
    """One kernel launch: a program, its grid, and which workload tensor binds each parameter."""

    name: str
    program: Program
    grid: tuple
    bindings: dict          # param name -> workload tensor name

    @property
    def num_programs(self) -> int:
        n = 1
        for g in self.grid:
            n *= g
        return n


@dataclass(frozen=True)
class Workload:
    """A sequence of launches over named HBM tensors.

    ``reference``, when set, maps ``{input name: array}`` to float64 ``{output name: array}``
    computed without the IR (``gpusim.kernels.Kernel.build`` attaches the kernel's).
    ``make_inputs``, when set, maps a seed to ``{input name: array}``: the kernel's own input
    generator (``numpy_exec.random_inputs`` uses it instead of independent random normals)."""

    name: str
    tensors: dict           # name -> TensorArg
    inputs: tuple
    outputs: tuple
    launches: tuple
    params: dict = field(default_factory=dict, hash=False, compare=False)
    reference: object = field(default=None, hash=False, compare=False, repr=False)
    make_inputs: object = field(default=None, hash=False, compare=False, repr=False)


def walk(ops):
    """Yield every op, descending into loop bodies."""
    for op in ops:
        yield op
        if isinstance(op, Loop):
            yield from walk(op.body)

