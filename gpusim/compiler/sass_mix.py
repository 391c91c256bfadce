"""Instruction mixes the analytic estimate charges where the compiled view reads the SASS: what
Triton 3.9 compiles each math op and each FMA dot to for sm_90, measured once and stored here.

``MATH``: per element of a math op, the MUFU (special-function) instructions and the other
instructions it issues (FP32-pipe arithmetic, selects, predicates, integer ops of a range
reduction). Measured by ``benchmarks/sass_mix.py`` (one-op kernels over a 4096-element fp32 row,
4 warps, less a copy kernel's instructions; ``--check`` compares a fresh compile with this table).

``FMA_DOT_ISSUE``: instructions per FFMA in the loop body of an IEEE fp32 dot (FFMA, the LDS that
read its operands from shared memory, the loop's own), by accumulator elements per thread,
measured on 14 compiled fp32 GEMM tiles (16..128 rows, 16..64 K, 1..8 warps;
tests/compiler/test_fma_dot.py compiles a few again).
"""
from __future__ import annotations

# op -> per element: MUFU instructions, other instructions (static counts; triton 3.9.0, ptxas 13.4,
# sm_90; benchmarks/sass_mix.py). exp = ex2.approx with its range fix-up; log and log2 are
# libdevice polynomials (no MUFU); sqrt and rsqrt one MUFU each; tanh libdevice tanhf (MUFU.EX2 +
# MUFU.RCP); sigmoid 1 / (1 + exp(-x)); erf libdevice erff; sin and cos libdevice sinf/cosf with
# their Payne-Hanek branch for |x| > 105615 (rarely taken, counted in full as the compiled view
# counts it); div = fp32 div.full (MUFU.RCP and its correction).
MATH = {
    "exp": {"mufu": 1.0, "issue": 4.0}, "exp2": {"mufu": 1.0, "issue": 0.0},
    "log": {"mufu": 0.0, "issue": 25.0}, "log2": {"mufu": 0.0, "issue": 27.0},
    "sqrt": {"mufu": 1.0, "issue": 0.0}, "rsqrt": {"mufu": 1.0, "issue": 0.0},
    "tanh": {"mufu": 2.0, "issue": 14.0}, "sigmoid": {"mufu": 2.0, "issue": 8.0},
    "erf": {"mufu": 1.0, "issue": 27.25}, "sin": {"mufu": 0.0, "issue": 123.0},
    "cos": {"mufu": 0.0, "issue": 125.0}, "div": {"mufu": 1.0, "issue": 7.0},
}

# accumulator elements per thread -> loop instructions per FFMA (medians of the tiles with that many)
FMA_DOT_ISSUE = {8: 1.377, 16: 1.195, 32: 1.15, 64: 1.106, 128: 1.091}


def mix_of_sass(counts: dict) -> dict:
    """{"mufu": MUFU instructions, "issue": every other instruction} of an opcode-class count
    (``CompiledResources.sass``: detail keys such as ``MUFU.EX2`` repeat their class and are skipped)."""
    mufu = sum(v for k, v in counts.items() if k == "MUFU")
    issue = sum(v for k, v in counts.items() if "." not in k and k != "MUFU")
    return {"mufu": round(mufu, 3), "issue": round(issue, 3)}


def fma_dot_issue(acc_per_thread: float) -> float:
    """Instructions per FFMA of an FMA dot whose accumulator holds ``acc_per_thread`` elements per
    thread (``FMA_DOT_ISSUE``, the nearest measured size; the ends beyond)."""
    keys = sorted(FMA_DOT_ISSUE)
    best = min(keys, key=lambda k: (abs(k - acc_per_thread) / k, k))
    return FMA_DOT_ISSUE[best]
