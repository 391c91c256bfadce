"""Rounding to fp8 under the Triton interpreter (``TRITON_INTERPRET=1``), for ``lower``.

The interpreter's own fp32 -> fp8 conversion (``_convert_float`` in triton/runtime/interpreter.py,
Triton 3.9) is not the GPU's cvt.rn.satfinite: it rounds half up from one bit, loses the carry
into an odd exponent (1.9375 -> 1.0 in e4m3), flushes subnormals and wraps past the largest value
(500 -> 256). It converts values already on the fp8 grid exactly, so the lowering for the
interpreter first rounds in fp32 with ``_fp8_round``: nearest even through the fp32 magic number
on |x| / quantum (a power of two, so exact), saturated to the largest finite value, NaN kept;
the rule of ``dtypes.FP8_FORMATS`` and ``numpy_exec.round_fp8``."""
from __future__ import annotations

from ..dsl import ir

FP8_ARGS = {"fp8e4m3": "3, -6, 448.0", "fp8e5m2": "2, -14, 57344.0"}   # (mantissa bits, e_min, max): FP8_FORMATS
FP8_ROUND_SOURCE = """

@triton.jit
def _fp8_round(x, MANT: tl.constexpr, EMIN: tl.constexpr, VMAX: tl.constexpr):
    a = tl.abs(x)
    e = tl.maximum((a.to(tl.int32, bitcast=True) >> 23) - 127, EMIN)
    q = ((e - MANT + 127) << 23).to(tl.float32, bitcast=True)
    r = ((a / q + 8388608.0) - 8388608.0) * q
    r = tl.where(a >= VMAX, VMAX, tl.where(r > VMAX, VMAX, r))
    r = tl.where(a != a, a, r)
    return tl.where(x < 0, -r, r)"""


def makes_fp8(program: ir.Program) -> bool:
    """Whether ``program`` produces an fp8 value or stores into an fp8 tensor (it then needs ``_fp8_round``)."""
    return any(getattr(op, "out", None) is not None and op.out.dtype in FP8_ARGS
               or isinstance(op, ir.Store) and op.tensor.dtype in FP8_ARGS for op in ir.walk(program.body))
