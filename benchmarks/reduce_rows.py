"""A row reduction's dependent chain against the number of rows one warp holds (round 15).

One CTA of one warp runs T iterations of ``x = x * c - max(x, 1)[:, None]`` over an R x C fp32
tile (``micro_fidelity._reduce_chain``), R = 1 to 32 rows of C = 32 or 128 columns, and the same
loop without the reduction (``OP`` 2); ``_warp_max`` is the one-row case as a 32-vector. A row's
reduction is a butterfly of 5 dependent shuffles; the rows are independent, so how much more each
row costs shows how far the compiled code overlaps them. These are checks of the warp scoreboard
with the measured latencies (benchmarks/fit_latency.py --check-all reads them); nothing is fitted
to them.

usage: python benchmarks/reduce_rows.py OUT.json      (on a machine with an NVIDIA GPU)"""
from __future__ import annotations

import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import micro_fidelity as mf  # noqa: E402
from micro_fidelity import _clock_hz  # noqa: E402

T = 4096
SHAPES = tuple((r, 128) for r in (1, 2, 4, 8, 16, 32)) + tuple((r, 32) for r in (1, 2, 4, 8, 16))


@triton.jit
def _warp_max(out_ptr, c, T, OP: tl.constexpr):
    x = tl.arange(0, 32).to(tl.float32) * 1e-6
    for _ in range(T):
        if OP == 0:
            x = x * c - tl.max(x, 0)
        else:
            x = x * c - x * 1e-3
    tl.store(out_ptr + tl.arange(0, 32), x)


def measure() -> dict:
    import numpy as np
    import torch
    from triton.testing import do_bench

    clock = _clock_hz()
    out = torch.empty(1 << 16, device="cuda", dtype=torch.float32)

    def reference(R: int, C: int, op: int, steps: int):
        x = ((np.arange(R)[:, None] * C + np.arange(C)[None, :]).astype(np.float32) * np.float32(1e-6))
        c = np.float32(0.999)
        for _ in range(steps):
            x = x * c - (x.max(axis=1, keepdims=True) if op == 0 else x * np.float32(1e-3))
        return x

    def run(launch, R: int, C: int, op: int) -> tuple:
        launch(16)                                  # 16 steps (T specialised as the timed 4096 is), against numpy
        torch.cuda.synchronize()
        got = out[:R * C].cpu().numpy().reshape(R, C)
        ok = bool(np.allclose(got, reference(R, C, op, 16), rtol=1e-4, atol=1e-9))
        us = 1000.0 * float(do_bench(lambda: launch(T), warmup=5, rep=40, return_mode="median"))
        return us, us * 1e-6 * clock / T, ok

    rows = []
    for op in (0, 2):
        us, cyc, ok = run(lambda t: _warp_max[(1,)](out, 0.999, t, OP=op, num_warps=1), 1, 32, op)
        rows.append({"kernel": "_warp_max", "op": "max" if op == 0 else "none", "R": 1, "C": 32, "num_warps": 1,
                     "T": T, "us": us, "cycles_per_iter": cyc, "ok": ok})
        print(rows[-1], flush=True)
    for R, C in SHAPES:
        for op in (0, 2):
            us, cyc, ok = run(lambda t: mf._reduce_chain[(1,)](out, 0.999, t, R=R, C=C, OP=op, num_warps=1), R, C, op)
            rows.append({"kernel": "_reduce_chain", "op": "max" if op == 0 else "none", "R": R, "C": C,
                         "num_warps": 1, "T": T, "us": us, "cycles_per_iter": cyc, "ok": ok})
            print(rows[-1], flush=True)
    return {"clock_hz": clock, "triton": triton.__version__, "ctas": 1, "rows": rows}


def main(argv) -> int:
    res = measure()
    with open(argv[0], "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
