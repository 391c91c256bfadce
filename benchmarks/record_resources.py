"""Compile the built-in kernels' tile spaces for sm_90 with the real toolchain (no GPU needed) and
record registers per thread, spills, shared memory and the SASS mix per launch in
tests/data/compiled_resources_sm90.json. The analytic fallback (``cost.cta_resources``) is tested
against that table without ptxas.

    PYTHONPATH=$PWD python benchmarks/record_resources.py [--jobs 2] [--limit N] [--out PATH]

A deterministic sample of each tile space (seeded), plus the corners that matter (the largest
tiles that still fit, which spill). Configs whose CTA does not fit in an H200's shared memory are
left out (the simulator reports them infeasible), as are tiles whose accumulators alone need more
than ``MAX_WORDS_PER_THREAD`` 32-bit words per thread (ptxas takes minutes on them and they spill
heavily: a simulator user gets the spill flag from the estimate).
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gpusim import kernels  # noqa: E402
from gpusim.backends.sim.cost import cta_resources  # noqa: E402
from gpusim.hardware import load_gpu  # noqa: E402

OUT = os.path.join(ROOT, "tests", "data", "compiled_resources_sm90.json")
ARCH = 90
MAX_WORDS_PER_THREAD = 512      # 2x ptxas's 255-register cap: far enough into spilling to show it
SEED = 0
T = (16, 32, 64, 128, 256)
SASS_KEEP = ("HGMMA", "HMMA", "MUFU", "MUFU.EX2", "FFMA", "FADD", "FMUL", "FMNMX", "LDG", "LDGSTS", "STG", "LDS",
             "STS", "LDSM", "STL", "LDL", "BAR", "SHFL")
# problem shapes: defaults of each kernel, small enough that every tile size has full and edge tiles
SHAPES = {"attention_flash": dict(batch=4, heads=16, seq_len=4096),
          "matmul": dict(M=4096, N=4096, K=4096),
          "elementwise_fused": dict(n=1 << 24),
          "attention_naive": dict(batch=4, heads=16)}


def _space():
    """(kernel, params) candidates: full products, later sampled."""
    flash = [dict(SHAPES["attention_flash"], BLOCK_M=bm, BLOCK_N=bn, num_warps=w, head_dim=d, num_stages=s, causal=c)
             for bm, bn, w, d, s, c in itertools.product(T, T, (1, 2, 4, 8), (32, 64, 128, 256), (1, 2, 3, 4),
                                                         (False, True))]
    mm = [dict(SHAPES["matmul"], BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=w, num_stages=s)
          for bm, bn, bk, w, s in itertools.product(T, T, T, (1, 2, 4, 8), (1, 2, 3, 4))]
    ew = [dict(SHAPES["elementwise_fused"], BLOCK=b, num_warps=w)
          for b, w in itertools.product(tuple(2 ** i for i in range(7, 15)), (1, 2, 4, 8, 16))]
    naive = [dict(SHAPES["attention_naive"], seq_len=n, head_dim=d, num_warps=w)
             for n, d, w in itertools.product((1024, 4096), (32, 64, 128, 256), (2, 4, 8))]
    return {"attention_flash": flash, "matmul": mm, "elementwise_fused": ew, "attention_naive": naive}


def _words_per_thread(kernel: str, p: dict) -> float:
    threads = 32 * p["num_warps"]
    if kernel == "attention_flash":
        return (p["BLOCK_M"] * p["head_dim"] + p["BLOCK_M"] * p["BLOCK_N"]) / threads
    if kernel == "matmul":
        return p["BLOCK_M"] * p["BLOCK_N"] / threads
    return 0.0


def _fits(kernel: str, p: dict, cfg) -> bool:
    for launch in kernels.build(kernel, p).launches:
        if cta_resources(launch.program).sram_bytes > cfg.sram_bytes_per_cta_max:
            return False
    return _words_per_thread(kernel, p) <= MAX_WORDS_PER_THREAD


def choose(counts: dict, cfg) -> list:
    """Deterministic sample: ``counts[kernel]`` feasible configs per kernel (all if fewer)."""
    rng = random.Random(SEED)
    out = []
    for kernel, cands in _space().items():
        ok = [p for p in cands if _fits(kernel, p, cfg)]
        rng.shuffle(ok)
        # always include the largest-accumulator configs (the spilling side of the space)
        big = sorted(ok, key=lambda p: -_words_per_thread(kernel, p))[:max(0, counts[kernel] // 8)]
        pick = big + [p for p in ok if p not in big][:counts[kernel] - len(big)]
        out += [(kernel, p) for p in pick]
    return out


def _compile_one(item):
    from gpusim.backends.triton.compile import CompileError, compile_program

    kernel, p = item
    rows = []
    for launch in kernels.build(kernel, p).launches:
        row = {"kernel": kernel, "params": p, "launch": launch.name}
        t0 = time.time()
        try:
            r = compile_program(launch.program, launch.grid, ARCH)
        except CompileError as e:
            rows.append(dict(row, error=str(e)))
            continue
        sass = dict(r.sass)
        loop = dict(r.sass_loop)
        rows.append(dict(row, num_warps=r.num_warps, num_stages=r.num_stages, registers_per_thread=r.registers_per_thread,
                         stack_bytes=r.stack_bytes, spill_store_bytes=r.spill_store_bytes,
                         spill_load_bytes=r.spill_load_bytes, shared_bytes=r.shared_bytes,
                         global_load_vector_bytes=r.global_load_vector_bytes,
                         sass={k: sass[k] for k in SASS_KEEP if k in sass},
                         sass_loop={k: loop[k] for k in SASS_KEEP if k in loop},
                         compile_s=round(time.time() - t0, 2)))
    return rows


def compare(path: str) -> dict:
    """Analytic estimate vs the compiled counts of a recorded table (ours, or the H200's
    ``n_regs``/``n_spills`` rows): error histogram, worst cases, spill flags. No compiler needed."""
    from gpusim.backends.sim.registers import estimate

    with open(path) as f:
        doc = json.load(f)
    errs, flags, worst = [], {"spills": 0, "flagged": 0, "missed": [], "false": []}, []
    for r in doc.get("launches", doc.get("rows", [])):
        if "error" in r:
            continue
        reg = r.get("registers_per_thread", r.get("n_regs"))
        spills = bool(r.get("spill_store_bytes", r.get("n_spills", 0)))
        launch = next(ln for ln in kernels.build(r["kernel"], r["params"]).launches if ln.name == r["launch"])
        est = estimate(launch.program, ARCH)
        key = {k: v for k, v in r["params"].items() if k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK", "num_warps",
                                                              "head_dim", "num_stages", "causal")}
        if spills:
            flags["spills"] += 1
            flags["flagged"] += est > 255
            if est <= 255:
                flags["missed"].append((r["kernel"], r["launch"], key, reg, est))
        else:
            if est > 255:
                flags["false"].append((r["kernel"], r["launch"], key, reg, est))
            errs.append(est - reg)
            worst.append((abs(est - reg), est - reg, r["kernel"], r["launch"], key, reg, est))
    worst.sort(key=lambda t: -t[0])
    return {"errs": errs, "flags": flags, "worst": worst, "n": len(errs) + flags["spills"]}


def report(path: str) -> None:
    c = compare(path)
    e = sorted(abs(x) for x in c["errs"])
    n = len(e)
    print(f"{path}: {c['n']} launches, {n} without spills")
    if n:
        print(f"  |estimate - compiled| registers: median {e[n // 2]}, p90 {e[int(0.9 * (n - 1))]}, max {e[-1]}; "
              f"within 8: {sum(x <= 8 for x in e)}/{n} ({100 * sum(x <= 8 for x in e) / n:.0f}%)")
        for lo, hi in ((0, 8), (9, 16), (17, 32), (33, 64), (65, 10 ** 9)):
            k = sum(lo <= x <= hi for x in e)
            print(f"    {lo:>3}..{hi if hi < 10 ** 9 else '':<3} {k:4d} {'#' * (60 * k // n)}")
    f = c["flags"]
    print(f"  spilling launches: {f['spills']}, flagged by the estimate (> 255): {f['flagged']}; "
          f"false alarms: {len(f['false'])}")
    for m in f["missed"] + f["false"]:
        print("    spill flag wrong:", m)
    for w in c["worst"][:8]:
        print(f"    worst: {w[1]:+4d} {w[2]} {w[3]} {w[4]} compiled {w[5]} estimated {w[6]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", nargs="*", metavar="TABLE",
                    help="only compare the analytic estimate with recorded tables (default: the one written here)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="compile only the first N chosen configs (a quick look)")
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args(argv)
    if a.compare is not None:
        for path in a.compare or [OUT]:
            report(path)
        return 0
    import triton

    from gpusim.backends.triton.compile import _ptxas_version

    cfg = load_gpu("h200")
    items = choose({"attention_flash": 100, "matmul": 90, "elementwise_fused": 24, "attention_naive": 8}, cfg)
    if a.limit:
        items = items[:a.limit]
    rows = []
    t0 = time.time()
    with ProcessPoolExecutor(a.jobs) as ex:
        for i, r in enumerate(ex.map(_compile_one, items), 1):
            rows += r
            if i % 20 == 0:
                print(f"{i}/{len(items)} configs, {time.time() - t0:.0f} s", flush=True)
    doc = {"arch": ARCH, "triton_version": triton.__version__, "ptxas_version": _ptxas_version(ARCH),
           "generated_by": "PYTHONPATH=$PWD python benchmarks/record_resources.py", "gpu_config": cfg.name,
           "launches": rows}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    print(f"wrote {len(rows)} launches ({len(items)} configs) to {a.out} in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
