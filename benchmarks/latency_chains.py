"""Dependent latencies the warp scoreboard needs, each measured on its own on a GPU (round 15).

Every case is a loop of T iterations whose body is one inline-PTX chain of K dependent steps; it
runs at K = 8 and K = 16, and the latency of one step is the difference of the two loops' cycles
per iteration over 8 (the loop's own overhead and the chain's set-up cancel):

* ``lds``: one warp chases a pointer through shared memory (``ld.shared.u32 p, [p]``): an LDS's
  dependent latency.
* ``bar``: a CTA of 4 warps runs K ``bar.sync 0`` back to back: a barrier when every warp
  arrives at once.
* ``exchange``: 4 warps; each step every thread stores its value to shared memory, the CTA
  synchronises once, and each thread loads the value of the thread 32 lanes away (another warp):
  one cross-warp exchange as a reduction does it (two buffers, so one barrier per step suffices).
  Its step less ``bar`` less ``lds`` is what a store takes to become visible to the other warps.
* ``exchange2``: the same with a second barrier after the load (one buffer), as a reduction
  that reuses its scratch does.
* ``hmma``: one warp, a chain of ``mma.sync.m16n8k16`` (fp16 in, fp32 accumulate), each step
  reading the accumulator the last one wrote: the tensor core's dependent latency on sm_80/sm_90.
* ``hmma4``: the same chain in each of 4 warps (one per scheduler).
* ``hmma2``: one warp, two such chains interleaved (K MMAs in all): the MMA issue rate of a warp
  that need not wait.
* ``shfl``: one warp, a chain of ``shfl.sync.bfly`` (each reading the last one's result).
* ``shfl_fadd``, ``shfl_max``: one warp, K shuffles each feeding an FADD (a FMNMX) that feeds the
  next shuffle, as a row reduction's butterfly does; the step less ``fadd``'s is a shuffle's
  latency to an ALU consumer. ``shfl_max4``: the butterfly in each of 4 warps at once.
  ``shfl_tree``: the same with the lane masks of a warp-wide reduction (16, 8, 4, 2, 1).
* ``fadd``: a chain of FADDs, the check (4 cycles published for Volta..Hopper).

Every result is checked against what the chain must leave (the values round-trip).

usage: python benchmarks/latency_chains.py OUT.json    (on a machine with an NVIDIA GPU)
       python benchmarks/latency_chains.py --sass      (print each compiled loop's SASS mix, no GPU)"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import triton
import triton.language as tl

LENGTHS = (8, 16)


def _lds(k: int) -> str:
    # the thread's slot holds its own shared address; each load reads the pointer it was given
    return ("{ .shared .align 16 .b32 s_lds[32]; .reg .u32 b, p, l; .reg .f32 f;\n"
            "mov.u32 b, s_lds; cvt.rzi.u32.f32 l, $1; add.u32 p, b, l; st.shared.u32 [p], p;\n"
            + "ld.shared.u32 p, [p];\n" * k
            + "sub.u32 l, p, b; cvt.rn.f32.u32 $0, l; }")


def _bar(k: int) -> str:
    return "{ mov.b32 $0, $1;\n" + "bar.sync 0;\n" * k + "}"


def _exchange(k: int) -> str:
    # two buffers of 128 words; step i stores to buffer i%2 at tid, loads buffer i%2 at tid^32
    lines = ["{ .shared .align 16 .b32 s_x[256]; .reg .u32 b, t, me, you; .reg .b32 v;",
             "mov.u32 b, s_x; mov.u32 t, %tid.x; shl.b32 me, t, 2; xor.b32 you, me, 128;",
             "add.u32 me, me, b; add.u32 you, you, b; mov.b32 v, $1;"]
    for i in range(k):
        off = 512 * (i % 2)
        lines += [f"st.shared.b32 [me+{off}], v;", "bar.sync 0;", f"ld.shared.b32 v, [you+{off}];"]
    return "\n".join(lines + ["mov.b32 $0, v; }"])


def _exchange2(k: int) -> str:
    lines = ["{ .shared .align 16 .b32 s_y[128]; .reg .u32 b, t, me, you; .reg .b32 v;",
             "mov.u32 b, s_y; mov.u32 t, %tid.x; shl.b32 me, t, 2; xor.b32 you, me, 128;",
             "add.u32 me, me, b; add.u32 you, you, b; mov.b32 v, $1;"]
    for _ in range(k):
        lines += ["st.shared.b32 [me], v;", "bar.sync 0;", "ld.shared.b32 v, [you];", "bar.sync 0;"]
    return "\n".join(lines + ["mov.b32 $0, v; }"])


def _hmma(k: int) -> str:
    # A holds the thread's value as fp16 pairs, B is zero: D = A B + C = C, so the accumulator
    # round-trips exactly and every step waits for the last one's result
    return ("{ .reg .f32 d<4>; .reg .b32 a<4>, z; .reg .f16 h;\n"
            "mov.b32 d0, $1; mov.f32 d1, 0f00000000; mov.f32 d2, 0f00000000; mov.f32 d3, 0f00000000;\n"
            "cvt.rn.f16.f32 h, $1; mov.b32 a0, {h, h}; mov.b32 a1, a0; mov.b32 a2, a0; mov.b32 a3, a0;\n"
            "mov.b32 z, 0;\n"
            + "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {d0,d1,d2,d3}, {a0,a1,a2,a3}, {z,z}, {d0,d1,d2,d3};\n" * k
            + "mov.b32 $0, d0; }")


def _hmma2(k: int) -> str:
    # two independent accumulators, interleaved: the rate one warp issues MMAs at when it need not wait
    one = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%s0,%s1,%s2,%s3}, {a0,a1,a2,a3}, {z,z}, {%s0,%s1,%s2,%s3};\n"
    return ("{ .reg .f32 d<4>, e<4>; .reg .b32 a<4>, z; .reg .f16 h;\n"
            "mov.b32 d0, $1; mov.f32 d1, 0f00000000; mov.f32 d2, 0f00000000; mov.f32 d3, 0f00000000;\n"
            "mov.b32 e0, $1; mov.f32 e1, 0f00000000; mov.f32 e2, 0f00000000; mov.f32 e3, 0f00000000;\n"
            "cvt.rn.f16.f32 h, $1; mov.b32 a0, {h, h}; mov.b32 a1, a0; mov.b32 a2, a0; mov.b32 a3, a0;\n"
            "mov.b32 z, 0;\n"
            + (one % (("d",) * 8) + one % (("e",) * 8)) * (k // 2)
            + "add.f32 d0, d0, e0; mul.f32 $0, d0, 0f3F000000; }")


def _shfl(k: int) -> str:
    return "{ .reg .b32 v; mov.b32 v, $1;\n" + "shfl.sync.bfly.b32 v, v, 1, 31, -1;\n" * k + "mov.b32 $0, v; }"


def _shfl_fadd(k: int) -> str:
    # a shuffle whose result feeds an FADD that feeds the next shuffle: K of each
    return ("{ .reg .f32 v, w; mov.b32 v, $1;\n"
            + "shfl.sync.bfly.b32 w, v, 1, 31, -1;\nadd.f32 v, w, 0f3F800000;\n" * k + "mov.b32 $0, v; }")


def _shfl_max(k: int) -> str:
    # a butterfly max as reductions compile it: v = max(v, shfl(v)), K times
    return ("{ .reg .f32 v, w; mov.b32 v, $1;\n"
            + "shfl.sync.bfly.b32 w, v, 1, 31, -1;\nmax.f32 v, v, w;\n" * k + "mov.b32 $0, v; }")


TREE = (16, 8, 4, 2, 1)


def _shfl_tree(k: int) -> str:
    # the butterfly of a row reduction across a warp, lane masks 16, 8, 4, 2, 1, 16, ... (K steps)
    return ("{ .reg .f32 v, w; mov.b32 v, $1;\n"
            + "".join(f"shfl.sync.bfly.b32 w, v, {TREE[i % 5]}, 31, -1;\nmax.f32 v, v, w;\n" for i in range(k))
            + "mov.b32 $0, v; }")


def _fadd(k: int) -> str:
    return "{ .reg .f32 v; add.f32 v, $1, 0f3F800000;\n" + "add.f32 v, v, 0f3F800000;\n" * (k - 1) + "mov.b32 $0, v; }"


CASES = {   # name -> (asm maker, warps, what the chain leaves of x after one iteration)
    "fadd": (_fadd, 1, "plus K"),
    "shfl": (_shfl, 1, "same"),
    "shfl_fadd": (_shfl_fadd, 1, "plus K"),
    "shfl_max": (_shfl_max, 1, "pair max"),
    "shfl_max4": (_shfl_max, 4, "pair max"),
    "shfl_tree": (_shfl_tree, 1, "tree max"),
    "lds": (_lds, 1, "same"),
    "bar": (_bar, 4, "same"),
    "exchange": (_exchange, 4, "same"),
    "exchange2": (_exchange2, 4, "same"),
    "hmma": (_hmma, 1, "same"),
    "hmma4": (_hmma, 4, "same"),
    "hmma2": (_hmma2, 1, "same"),
}


@triton.jit
def _loop(out_ptr, T, ASM: tl.constexpr, N: tl.constexpr):
    x = tl.load(out_ptr + tl.arange(0, N))
    for _ in range(0, T):
        x = tl.inline_asm_elementwise(ASM, "=f,f", [x], dtype=tl.float32, is_pure=False, pack=1)
    tl.store(out_ptr + tl.arange(0, N), x)


def _args(name: str, k: int) -> tuple:
    maker, warps, _ = CASES[name]
    return tl.constexpr(maker(k)), warps, 32 * warps


def _start_values(name: str, n: int):
    import numpy as np
    # lds: the byte offset of the thread's slot (4 * lane); the others: small exact values
    return (4.0 * np.arange(n)).astype(np.float32) if name == "lds" else np.arange(n, dtype=np.float32)


def measure(T: int = 1 << 15) -> dict:
    import numpy as np
    import torch
    from triton.testing import do_bench

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from micro_fidelity import _clock_hz

    clock = _clock_hz()
    rows, latency = {}, {}
    for name, (_, warps, leaves) in CASES.items():
        per = {}
        for k in LENGTHS:
            asm, w, n = _args(name, k)
            x0 = torch.tensor(_start_values(name, n), device="cuda")
            buf = x0.clone()
            _loop[(1,)](buf, T, ASM=asm, N=n, num_warps=w)
            torch.cuda.synchronize()
            want = x0.cpu().numpy() + (k * T if leaves == "plus K" else 0)
            if leaves == "pair max":
                want = np.maximum(want, want[np.arange(n) ^ 1])
            if leaves == "tree max":
                want = np.full_like(want, want.max())
            ok = bool(np.array_equal(buf.cpu().numpy(), want.astype(np.float32)))
            us = 1000.0 * float(do_bench(lambda: _loop[(1,)](buf, T, ASM=asm, N=n, num_warps=w),
                                         warmup=5, rep=40, return_mode="median"))
            per[k] = us * 1e-6 * clock / T
            rows[f"{name}_{k}"] = {"case": name, "K": k, "warps": w, "T": T, "us": us,
                                   "cycles_per_iter": per[k], "ok": ok}
            print(rows[f"{name}_{k}"], flush=True)
        latency[name] = (per[LENGTHS[1]] - per[LENGTHS[0]]) / (LENGTHS[1] - LENGTHS[0])
    derived = {"shared_store_visibility": latency["exchange"] - latency["bar"] - latency["lds"],
               "shfl_to_alu": latency["shfl_fadd"] - latency["fadd"]}
    return {"clock_hz": clock, "lengths": list(LENGTHS), "rows": rows, "step_cycles": latency, "derived": derived}


def sass() -> int:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from gpusim.toolchain import compile as C
    import tempfile
    from collections import Counter

    for name in CASES:
        for k in LENGTHS:
            asm, w, n = _args(name, k)
            kern = triton.compile(ASTSource(_loop, {"out_ptr": "*fp32", "T": "i32", "ASM": "constexpr", "N": "constexpr"},
                                            {"ASM": asm, "N": n}),
                                  target=GPUTarget("cuda", 90, 32), options={"num_warps": w})
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "k.cubin")
                with open(path, "wb") as f:
                    f.write(kern.asm["cubin"])
                text = subprocess.run([C._tool("nvdisasm"), "-c", path], capture_output=True, text=True).stdout
            ops = Counter(ln.split("*/")[1].strip().split()[0].rstrip(";") for ln in text.splitlines()
                          if "*/" in ln and "/*0" in ln and ln.split("*/")[1].strip())
            keep = {o: c for o, c in ops.items() if o.split(".")[0] in ("LDS", "STS", "BAR", "HMMA", "FADD", "FMNMX", "SHFL", "BRA")}
            print(f"{name:10s} K={k:2d}  warps {w}: {dict(sorted(keep.items()))}")
    return 0


def main(argv) -> int:
    if argv[:1] == ["--sass"]:
        return sass()
    res = measure()
    for name, c in res["step_cycles"].items():
        print(f"{name:10s} {c:6.1f} cycles per step")
    print("store visibility (exchange - bar - lds):", round(res["derived"]["shared_store_visibility"], 1))
    print("shuffle to ALU consumer (shfl_fadd - fadd):", round(res["derived"]["shfl_to_alu"], 1))
    with open(argv[0], "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
