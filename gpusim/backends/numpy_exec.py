"""Exact execution of the IR on numpy: the specification every other backend is checked against.

Storage follows the tensor dtype (fp16 as float16; bf16, fp8e4m3 and fp8e5m2 as float32 holding
values rounded to that format: fp8 to nearest even, saturated to the largest finite value as
``dtypes.FP8_FORMATS`` says); ``dot`` accumulates in fp32 as tensor cores do (fp8 products are
exact in fp32); loads outside a tensor read ``other`` and stores
outside a tensor are dropped (boundary masking). Binary ops and ``where`` convert their operands to
the dtype ``ir.binary_dtypes`` / ``ir.promote`` give (Triton's promotion; constants rounded to it),
compute in it (fp16 natively, bf16 in fp32 and rounded) and store the result in the result dtype.
"""
from __future__ import annotations

import math

import numpy as np

from ..dsl import analysis, ir
from ..dsl.dtypes import FP8_FORMATS

NP_DTYPE = {"fp16": np.float16, "bf16": np.float32, "fp32": np.float32, "int32": np.int32, "bool": np.bool_,
            "fp8e4m3": np.float32, "fp8e5m2": np.float32}


def round_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bfloat16 (ties to even), kept in a float32 array."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    r = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)).astype(np.uint32)
    out = r.view(np.float32)
    return np.where(np.isnan(x), x, out)


def round_fp8(x, dtype: str) -> np.ndarray:
    """Round values to the fp8 format ``dtype`` (``dtypes.FP8_FORMATS``): nearest, ties to even
    (``np.rint``), subnormals on the grid of the smallest normals, saturated to the largest finite
    value (infinities too), NaN kept; returned as float32 (every fp8 value is exact there). The
    arithmetic is float64 and exact: scaling by a power of two, then one rounding."""
    mant, emin, vmax = FP8_FORMATS[dtype]
    a = np.abs(np.asarray(x, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        e = np.maximum(np.frexp(np.where(np.isfinite(a), a, 1.0))[1] - 1, emin)
        q = np.ldexp(1.0, e - mant)
        r = np.minimum(np.rint(a / q) * q, vmax)
    r = np.where(np.isinf(a), vmax, r)
    return np.where(np.isnan(a), np.nan, np.copysign(r, x)).astype(np.float32)


def to_dtype(x, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return round_bf16(np.asarray(x, dtype=np.float32))
    if dtype in FP8_FORMATS:
        return round_fp8(x, dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x).astype(NP_DTYPE[dtype])


_BIN = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
        "minimum": np.minimum, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal, "and": np.logical_and, "or": np.logical_or}
_UN = {"neg": np.negative, "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
       "rsqrt": lambda x: 1.0 / np.sqrt(x), "abs": np.abs, "not": np.logical_not,
       # computed in float64 and rounded to the fp32 result: the correctly rounded value
       "tanh": lambda x: np.tanh(np.float64(x)), "sin": lambda x: np.sin(np.float64(x)),
       "cos": lambda x: np.cos(np.float64(x)),
       "sigmoid": lambda x: 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, np.float64))),
       "erf": lambda x: _erf(np.asarray(x, np.float64))}


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x) if x.size else x


class _Interp:
    def __init__(self, memory: dict, bindings: dict):
        self.mem = memory
        self.bind = bindings

    def val(self, env, x, dtype: str):
        """Operand ``x`` (Value or Python constant) converted to ``dtype`` as Triton converts it."""
        if isinstance(x, ir.Value):
            v = env[x.id]
            return v if x.dtype == dtype else to_dtype(v, dtype)
        return np.asarray(ir.const_value(x, dtype), dtype=NP_DTYPE[dtype])

    def load(self, op: ir.Load, env, pid, lv):
        offs = [ir.eval_expr(e, pid, lv) for e in op.offsets]
        arr = self.mem[self.bind[op.tensor.name]]
        tile = np.full(op.out.shape, op.other, dtype=arr.dtype)
        src, dst = analysis.tile_slices(op.tensor, offs, op.out.shape)
        if src is not None:
            tile[dst] = arr[src]
        env[op.out.id] = tile

    def store(self, op: ir.Store, env, pid, lv):
        offs = [ir.eval_expr(e, pid, lv) for e in op.offsets]
        arr = self.mem[self.bind[op.tensor.name]]
        src, dst = analysis.tile_slices(op.tensor, offs, op.value.shape)
        if src is not None:
            arr[src] = to_dtype(env[op.value.id][dst], op.tensor.dtype)

    def loop(self, op: ir.Loop, env, pid, lv):
        start, end = ir.eval_expr(op.start, pid, lv), ir.eval_expr(op.end, pid, lv)
        cur = [env[v.id] for v in op.init]
        for i in range(start, end, op.step):
            for a, c in zip(op.args, cur):
                env[a.id] = c
            self.run(op.body, env, pid, {**lv, op.var: i})
            cur = [env[y.id] for y in op.yields]
        for o, c in zip(op.outs, cur):
            env[o.id] = c

    def run(self, ops, env, pid, lv):
        for op in ops:
            t = type(op)
            if t is ir.Load:
                self.load(op, env, pid, lv)
            elif t is ir.Store:
                self.store(op, env, pid, lv)
            elif t is ir.Full:
                env[op.out.id] = np.full(op.out.shape, op.fill, dtype=NP_DTYPE[op.out.dtype])
            elif t is ir.Iota:
                n = op.out.shape[op.axis]
                shape = [1] * len(op.out.shape)
                shape[op.axis] = n
                base = np.arange(n, dtype=np.int32).reshape(shape) + ir.eval_expr(op.start, pid, lv)
                env[op.out.id] = np.broadcast_to(base, op.out.shape).astype(np.int32)
            elif t is ir.Binary:
                comp, _ = ir.binary_dtypes(op.op, op.a, op.b)
                a, b = self.val(env, op.a, comp), self.val(env, op.b, comp)
                with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                    r = _BIN[op.op](a, b)
                env[op.out.id] = to_dtype(r, op.out.dtype) if op.out.dtype != "bool" else np.asarray(r)
            elif t is ir.Unary:
                with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                    x = self.val(env, op.a, op.out.dtype)
                    env[op.out.id] = to_dtype(_UN[op.op](x), op.out.dtype)
            elif t is ir.Where:
                a, b = self.val(env, op.a, op.out.dtype), self.val(env, op.b, op.out.dtype)
                env[op.out.id] = to_dtype(np.where(env[op.cond.id], a, b), op.out.dtype)
            elif t is ir.Cast:
                env[op.out.id] = to_dtype(env[op.a.id], op.out.dtype)
            elif t is ir.Reduce:
                x = env[op.a.id].astype(NP_DTYPE[op.out.dtype])
                r = (np.sum if op.op == "sum" else np.max if op.op == "max" else np.min)(x, axis=op.axis)
                env[op.out.id] = to_dtype(r, op.out.dtype)
            elif t is ir.ExpandDims:
                env[op.out.id] = np.expand_dims(env[op.a.id], op.axis)
            elif t is ir.Trans:
                env[op.out.id] = env[op.a.id].T
            elif t is ir.Dot:
                r = env[op.a.id].astype(np.float32) @ env[op.b.id].astype(np.float32)
                if op.acc is not None:
                    r = r + env[op.acc.id]
                env[op.out.id] = r.astype(np.float32)
            elif t is ir.Loop:
                self.loop(op, env, pid, lv)
            else:  # pragma: no cover - the op coverage test guards this
                raise NotImplementedError(type(op).__name__)


def run_launch(launch: ir.Launch, memory: dict, programs=None) -> None:
    """Execute every program of the launch's grid, in grid order, against ``memory`` (name -> array);
    ``programs``, when given, only those program ids ((x, y, z) tuples), in that order."""
    interp = _Interp(memory, launch.bindings)
    for pid in analysis.program_ids(launch.grid) if programs is None else programs:
        interp.run(launch.program.body, {}, pid, {})


def random_inputs(workload: ir.Workload, seed: int = 0) -> dict:
    """The inputs of a check or a measurement: the kernel's own generator when it has one
    (``Workload.make_inputs``, e.g. a backward pass fed its forward's outputs), else
    ``random_normal_inputs``."""
    if workload.make_inputs is not None:
        return workload.make_inputs(seed)
    return random_normal_inputs(workload, seed)


BIG_INPUT = 1 << 24         # elements from which an input is drawn in parallel chunks
_CHUNK = 1 << 22


def random_normal_inputs(workload: ir.Workload, seed: int = 0, names=None) -> dict:
    """Independent random normal inputs (never zeros), rounded to the storage dtype; ``names``
    (default all inputs) in that order from one stream. An input of ``BIG_INPUT`` elements or more
    (a long KV cache: 10^9 values take minutes one at a time) is drawn as float32 from its own seed,
    in chunks of independent streams on all cores, the same values whatever the number of cores."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in (workload.inputs if names is None else names):
        t = workload.tensors[name]
        size = int(np.prod(t.shape))
        if size < BIG_INPUT:
            out[name] = to_dtype(rng.standard_normal(t.shape), t.dtype)
        else:
            out[name] = _big_normal(int(rng.integers(1 << 62)), t.shape, t.dtype)
    return out


def _big_normal(seed: int, shape, dtype: str) -> np.ndarray:
    import os
    from concurrent.futures import ThreadPoolExecutor

    flat = np.empty(int(np.prod(shape)), dtype=NP_DTYPE[dtype])
    starts = range(0, flat.size, _CHUNK)
    seqs = np.random.SeedSequence(seed).spawn(len(starts))

    def fill(i):
        a = starts[i]
        x = np.random.default_rng(seqs[i]).standard_normal(min(_CHUNK, flat.size - a), dtype=np.float32)
        flat[a:a + x.size] = to_dtype(x, dtype)

    with ThreadPoolExecutor(max_workers=max(1, min(32, os.cpu_count() or 1))) as ex:
        list(ex.map(fill, range(len(starts))))
    return flat.reshape(shape)


def execute(workload: ir.Workload, inputs: dict) -> dict:
    """Run every launch; returns all tensors (inputs, intermediates, outputs) by name."""
    mem = {}
    for name, t in workload.tensors.items():
        if name in inputs:
            mem[name] = np.array(inputs[name], dtype=NP_DTYPE[t.dtype], copy=True)
        else:
            poison = np.nan if t.dtype in ir.FLOAT_DTYPES else np.iinfo(np.int32).min if t.dtype == "int32" else False
            mem[name] = np.full(t.shape, poison, dtype=NP_DTYPE[t.dtype])   # poisoned: unwritten shows as NaN
    for launch in workload.launches:
        run_launch(launch, mem)
    return mem


def reference(workload: ir.Workload, inputs: dict) -> dict:
    """float64 reference outputs of ``workload``: the reference its kernel attached
    (``Workload.reference``), never one looked up by name."""
    if workload.reference is None:
        raise ValueError(f"workload {workload.name!r} has no reference: give its kernel one "
                         f"(@kernel(..., reference=fn)) or run with check=False")
    out = workload.reference(inputs)
    missing = [n for n in workload.outputs if n not in out]
    if missing:
        raise ValueError(f"the reference of {workload.name!r} returned no {', '.join(missing)} "
                         f"(it must return every output: {', '.join(workload.outputs)})")
    out = {n: np.asarray(v, dtype=np.float64) for n, v in out.items()}
    for n in workload.outputs:
        if out[n].shape != tuple(workload.tensors[n].shape):
            raise ValueError(f"the reference of {workload.name!r} returned {n} of shape {out[n].shape}, "
                             f"the output tensor is {tuple(workload.tensors[n].shape)}")
    return out


def max_rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    """Relative error ||out - ref||_2 / ||ref||_2 (NaN or inf anywhere counts as infinite error).

    Results report the worst (max) of this over a workload's outputs, hence the name."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if not np.all(np.isfinite(out)):
        return float("inf")
    scale = float(np.linalg.norm(ref)) or 1.0
    return float(np.linalg.norm(out - ref) / scale)


def check(workload: ir.Workload, seed: int = 0) -> float:
    """Execute on random inputs and return the worst max_rel_err over the outputs vs float64."""
    inputs = random_inputs(workload, seed)
    mem = execute(workload, inputs)
    ref = reference(workload, inputs)
    return max(max_rel_err(mem[name], ref[name]) for name in workload.outputs)
