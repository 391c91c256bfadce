"""The SASS instruction mix of each math op, per element, as Triton compiles it for sm_90: the
numbers the analytic estimate's ``gpusim/compiler/sass_mix.py`` stores (``MATH``).

Each op is a one-op DSL kernel over one fp32 row of 4096 elements (4 warps, 32 elements per
thread, so ptxas sees a straight run of independent elements), lowered by gpusim's own Triton
lowering and compiled by ``toolchain/compile.py`` (triton.compile for GPUTarget("cuda", 90,
32), read back with nvdisasm). The kernels store ``op(x) + y`` (``x / y + y`` for the division);
the op's mix = the kernel's static instructions less those of ``x + y``, divided by the 32
elements per thread. Static counts, as the compiled view counts them: a branch's slow path that
rarely runs (sin/cos beyond |x| > 105615, a division's denormal path) is counted in full.

usage: PYTHONPATH=$PWD python benchmarks/sass_mix.py [--check]
       (--check: exit 1 when a measured mix differs from the stored table)
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter

from gpusim.toolchain import compile as tc
from gpusim import dsl
from gpusim.compiler.sass_mix import MATH, mix_of_sass
from gpusim.dsl import load, program_id, store, trace
from gpusim.dsl.ir import TensorArg

COLS, WARPS = 4096, 4
UNARY_FNS = {op: getattr(dsl, op) for op in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
                                            "sin", "cos")}
ELEMS = COLS // (32 * WARPS)


def _kernel(op: str):
    x, y, o = (TensorArg(n, (1, COLS), "fp32") for n in ("x", "y", "o"))

    def body(x, y, o):
        a = load(x, (program_id(0), 0), (1, COLS))
        b = load(y, (program_id(0), 0), (1, COLS))
        if op == "copy":
            r = a
        elif op == "div":
            r = a / b
        else:
            r = UNARY_FNS[op](a)
        store(o, (program_id(0), 0), r + b)

    return trace(body, f"mix_{op}", [x, y, o], num_warps=WARPS)


def _counts(op: str) -> Counter:
    r = tc.compile_program(_kernel(op), (1,), 90)
    return Counter(dict(r.sass))


def measure() -> dict:
    """{op: {"mufu": per element, "issue": non-MUFU instructions per element}} measured now."""
    base = _counts("copy")
    out = {}
    for op in list(UNARY_FNS) + ["div"]:
        diff = Counter(_counts(op))
        diff.subtract(base)
        out[op] = mix_of_sass({k: v / ELEMS for k, v in diff.items() if v})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    got, bad = measure(), 0
    print(f"{'op':8s} {'mufu':>6s} {'issue':>6s}   stored")
    for op, m in got.items():
        stored = MATH.get(op)
        same = stored is not None and all(abs(stored[k] - m[k]) < 0.05 for k in ("mufu", "issue"))
        bad += not same
        print(f"{op:8s} {m['mufu']:6.2f} {m['issue']:6.2f}   {stored}{'' if same else '  <- differs'}")
    return 1 if a.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
