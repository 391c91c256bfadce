"""Dtypes of the IR and Triton's type promotion: which dtype a binary op computes in and returns,
and how a Python constant is typed and rounded. Every backend asks here, so they agree."""
from __future__ import annotations

import math
import struct

COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
LOGICAL_OPS = ("and", "or")
FP8_DTYPES = ("fp8e4m3", "fp8e5m2")
TENSOR_DOT_DTYPES = ("fp16", "bf16") + FP8_DTYPES    # operand dtypes a dot runs on the tensor cores in
# OCP FP8 formats as Hopper stores them (torch.float8_e4m3fn / float8_e5m2, Triton's float8e4nv /
# float8e5): (mantissa bits, exponent of the smallest normal, largest finite value). A conversion to
# fp8 rounds to nearest even and saturates to the largest finite value (PTX cvt.rn.satfinite, what
# Triton emits on sm_90); e4m3 has no infinity.
FP8_FORMATS = {"fp8e4m3": (3, -6, 448.0), "fp8e5m2": (2, -14, 57344.0)}


def dot_mode(a: str, b: str) -> tuple:
    """(operand dtype, unit, input precision) of a ``dot`` of ``a`` x ``b`` operands, as the Triton
    lowering emits it and the timing model and the register estimate charge it (one rule for all):

    * both operands fp16, both bf16, or both the same fp8: ``(dtype, "tensor", None)``, a
      tensor-core MMA (wgmma on sm_90, mma.sync elsewhere; fp8 at the config's fp8 rate, products
      accumulated in fp32);
    * anything else (fp32, or two different dtypes, converted to fp32 first):
      ``("fp32", "fma", "ieee")``, ``tl.dot(..., input_precision="ieee")``: exact fp32 products
      (what numpy computes), which Triton compiles to FFMA instructions on the FP32 pipe, with the
      operands read from shared memory (no TF32 tensor cores)."""
    if a == b and a in TENSOR_DOT_DTYPES:
        return a, "tensor", None
    return "fp32", "fma", "ieee"


def _kind(dtype: str) -> int:
    """Triton's dtype kinds, ordered: bool < int < float."""
    return 0 if dtype == "bool" else 1 if dtype == "int32" else 2


def const_dtype(x) -> str:
    """The dtype Triton gives a Python constant: bool -> bool, int -> int32, float -> fp32."""
    if isinstance(x, bool):
        return "bool"
    return "int32" if isinstance(x, int) else "fp32"


def promote(a, b, div: bool = False) -> str:
    """Computation dtype of a binary op on operands ``a``, ``b`` (Values or Python constants),
    following ``computation_type_impl`` in triton/language/semantic.py (Triton 3.x):

    * a constant whose kind (bool < int < float) is not above the tile's adopts the tile's dtype
      (``fp16_tile * 0.5`` is fp16, ``int32_tile * 0.5`` is fp32, ``int32_tile + 1`` is int32);
    * ``/`` computes in fp32 (Triton has no fp16 division, and int / int is fp32);
    * fp32 with anything -> fp32; fp16 with fp16, bf16 or fp8 -> fp16 (rule 4 comes before the bf16
      rule); bf16 with bf16 -> bf16, with fp8 -> fp32; an fp8 with the same fp8 -> that fp8, with
      the other fp8 -> fp16; int32 with int32 or bool -> int32; bool with bool -> bool; an fp8
      with int32 or bool is a TypeError, as in Triton."""
    a_const, b_const = _is_const(a), _is_const(b)
    da = const_dtype(a) if a_const else a.dtype
    db = const_dtype(b) if b_const else b.dtype
    if a_const != b_const:
        c, t = (da, db) if a_const else (db, da)
        if _kind(c) <= _kind(t):
            da = db = t
    if div:
        return "fp32"
    if "fp32" in (da, db):
        return "fp32"
    if "fp16" in (da, db):
        return "fp16"
    if "bf16" in (da, db):
        return "bf16" if da == db else "fp32"
    if da in FP8_DTYPES and db in FP8_DTYPES:
        return da if da == db else "fp16"
    if da in FP8_DTYPES or db in FP8_DTYPES:
        raise TypeError(f"unexpected types {da} and {db}: Triton does not mix fp8 with integer tiles; "
                        f"convert one with .to(...)")
    if "int32" in (da, db):
        return "int32"
    return "bool"


def binary_dtypes(op: str, a, b) -> tuple:
    """(computation dtype, result dtype) of ``Binary(op, a, b)``; every backend uses this."""
    if op in LOGICAL_OPS:
        return "bool", "bool"
    comp = promote(a, b, div=op == "div")
    return comp, "bool" if op in COMPARE_OPS else comp


def const_value(x, dtype: str):
    """A Python constant as a value of ``dtype`` (rounded to fp16/bf16/fp8 as Triton's scalar cast does)."""
    if dtype == "bool":
        return bool(x)
    if dtype == "int32":
        return int(x)
    x = float(x)
    if dtype == "fp16":
        try:
            return struct.unpack("<e", struct.pack("<e", x))[0]
        except OverflowError:
            return math.copysign(math.inf, x)
    if dtype in FP8_FORMATS:
        return round_fp8(x, dtype)
    if dtype == "bf16" and math.isfinite(x):
        u = struct.unpack("<I", struct.pack("<f", x))[0]
        u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000) & 0xFFFFFFFF
        return struct.unpack("<f", struct.pack("<I", u))[0]
    return struct.unpack("<f", struct.pack("<f", x))[0] if math.isfinite(x) and abs(x) < 3.4e38 else x


def round_fp8(x: float, dtype: str) -> float:
    """``x`` rounded to the nearest value of the fp8 format ``dtype`` (ties to even), saturated to
    its largest finite value (infinities too); NaN stays NaN. The quantum in the binade of |x| is
    2^(max(e, e_min) - mantissa bits), so subnormals round on the same grid as the smallest normals."""
    mant, emin, vmax = FP8_FORMATS[dtype]
    if math.isnan(x):
        return x
    a = abs(x)
    if a >= vmax:
        return math.copysign(vmax, x)
    if a == 0.0:
        return x
    e = max(math.frexp(a)[1] - 1, emin)
    q = math.ldexp(1.0, e - mant)
    return math.copysign(min(round(a / q) * q, vmax), x)     # round(): ties to even


def _is_const(x) -> bool:
    """A Python constant operand (tiles are ``ir.Value``s, which have a dtype)."""
    return isinstance(x, (bool, int, float))
