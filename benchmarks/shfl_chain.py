"""The dependent latency of a warp shuffle on its own, measured on a GPU (round 14): one warp runs
T iterations of a chain of 8 ``shfl.sync.bfly`` (each reading the one before), and the same loop
with 8 dependent FADDs in their place (the loop's own overhead plus 8 known 4-cycle steps). The
scoreboard's fit (benchmarks/fit_latency.py) cannot tell a shuffle's latency from a shared
store's visibility; this measures the first alone.

usage: python benchmarks/shfl_chain.py OUT.json       (on a machine with an NVIDIA GPU)
       python benchmarks/shfl_chain.py --sass         (print the compiled loops' SASS mix, no GPU)"""
from __future__ import annotations

import json
import subprocess
import sys

import triton
import triton.language as tl

CHAIN = 8
_SHFL = "\n".join(["shfl.sync.bfly.b32 $0, $1, 1, 31, -1;"] + ["shfl.sync.bfly.b32 $0, $0, 1, 31, -1;"] * (CHAIN - 1))
_FADD = "\n".join(["add.f32 $0, $1, 0f3F800000;"] + ["add.f32 $0, $0, 0f3F800000;"] * (CHAIN - 1))


@triton.jit
def _chain(out_ptr, T, SHFL: tl.constexpr):
    x = tl.arange(0, 32).to(tl.float32)
    for _ in range(0, T):
        if SHFL:
            x = tl.inline_asm_elementwise(_SHFL_ASM, "=f,f", [x], dtype=tl.float32, is_pure=False, pack=1)
        else:
            x = tl.inline_asm_elementwise(_FADD_ASM, "=f,f", [x], dtype=tl.float32, is_pure=False, pack=1)
    tl.store(out_ptr + tl.arange(0, 32), x)


_SHFL_ASM = tl.constexpr(_SHFL)
_FADD_ASM = tl.constexpr(_FADD)


def _clock_hz() -> float:
    out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
    return float(out) * 1e6


def measure() -> dict:
    import numpy as np
    import torch
    from triton.testing import do_bench

    clock = _clock_hz()
    out = torch.empty(32, device="cuda", dtype=torch.float32)
    rows = {}
    for T in (1 << 14, 1 << 16):
        for shfl in (True, False):
            fn = lambda: _chain[(1,)](out, T, SHFL=shfl, num_warps=1)
            fn()
            torch.cuda.synchronize()
            got = out.cpu().numpy()
            # the butterfly swaps lane pairs: an even number of swaps per iteration leaves x as it was
            want = np.arange(32, dtype=np.float32) if shfl else np.arange(32, dtype=np.float32) + CHAIN * T
            ok = bool(np.allclose(got, want))
            us = 1000.0 * float(do_bench(fn, warmup=5, rep=30, return_mode="median"))
            rows[f"{'shfl' if shfl else 'fadd'}_{T}"] = {"T": T, "us": us, "cycles_per_iter": us * 1e-6 * clock / T,
                                                        "ok": ok}
            print(rows[f"{'shfl' if shfl else 'fadd'}_{T}"], flush=True)
    T = 1 << 16
    s, f = rows[f"shfl_{T}"]["cycles_per_iter"], rows[f"fadd_{T}"]["cycles_per_iter"]
    # per shuffle: (shfl loop - fadd loop) / CHAIN + the FADD's 4 cycles it replaced
    return {"clock_hz": clock, "chain": CHAIN, "rows": rows, "shfl_latency_cycles": (s - f) / CHAIN + 4.0}


def main(argv) -> int:
    if argv[:1] == ["--sass"]:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        for shfl in (True, False):
            k = triton.compile(ASTSource(_chain, {"out_ptr": "*fp32", "T": "i32", "SHFL": "constexpr"},
                                         {"SHFL": shfl}), target=GPUTarget("cuda", 90, 32), options={"num_warps": 1})
            print(f"SHFL={shfl}:", [ln.strip() for ln in k.asm["ptx"].splitlines() if ln.strip().startswith(("shfl.sync", "add.f32"))])
        return 0
    res = measure()
    print("shuffle latency:", round(res["shfl_latency_cycles"], 1), "cycles")
    with open(argv[0], "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
