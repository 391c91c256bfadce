"""Compile the built-in kernels' tile spaces for sm_90 with the real toolchain (no GPU needed) and
record registers per thread, spills, shared memory and the SASS mix per launch in
tests/data/compiled_resources_sm90.json. The analytic fallback (``cost.cta_resources``) is tested
against that table without ptxas.

    PYTHONPATH=$PWD python benchmarks/record_resources.py [--jobs 2] [--limit N] [--out PATH]
        [--spaces attention_flash_bwd,attention_decode,... --append]
    PYTHONPATH=$PWD python benchmarks/record_resources.py --compare [TABLE ...]

``--spaces`` samples only the named tile spaces (``COUNTS`` lists them; ``attention_flash_gqa`` is
attention_flash with grouped KV heads or a sliding window); ``--append`` keeps the other spaces'
rows of the table. ``--compare`` prints the analytic estimate's errors per space and launch.

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
import zlib
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
          "attention_naive": dict(batch=4, heads=16),
          "attention_flash_bwd": dict(batch=4, heads=16, seq_len=4096),
          "attention_decode": dict(batch=8, heads=32, kv_len=8192),
          "rows": dict(rows=4096)}
# Sample sizes per tile space (configs; a config of a multi-launch kernel gives one row per launch,
# launches whose generated source repeats an earlier one's are recorded once). The spaces after the
# first four were added later (``--append``); the seeded sample of the first four is unchanged.
COUNTS = {"attention_flash": 100, "matmul": 90, "elementwise_fused": 24, "attention_naive": 8,
          "attention_flash_bwd": 32, "attention_decode": 32, "attention_flash_gqa": 32,
          "softmax": 24, "layernorm": 24, "rmsnorm": 24}
# the kernel each space samples (a space named after its kernel unless listed)
SPACE_KERNEL = {"attention_flash_gqa": "attention_flash"}
LEGACY = ("attention_flash", "matmul", "elementwise_fused", "attention_naive")   # the first table's spaces


def _space():
    """{space: candidate params}: full products, later sampled."""
    flash = [dict(SHAPES["attention_flash"], BLOCK_M=bm, BLOCK_N=bn, num_warps=w, head_dim=d, num_stages=s, causal=c)
             for bm, bn, w, d, s, c in itertools.product(T, T, (1, 2, 4, 8), (32, 64, 128, 256), (1, 2, 3, 4),
                                                         (False, True))]
    mm = [dict(SHAPES["matmul"], BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=w, num_stages=s)
          for bm, bn, bk, w, s in itertools.product(T, T, T, (1, 2, 4, 8), (1, 2, 3, 4))]
    ew = [dict(SHAPES["elementwise_fused"], BLOCK=b, num_warps=w)
          for b, w in itertools.product(tuple(2 ** i for i in range(7, 15)), (1, 2, 4, 8, 16))]
    naive = [dict(SHAPES["attention_naive"], seq_len=n, head_dim=d, num_warps=w)
             for n, d, w in itertools.product((1024, 4096), (32, 64, 128, 256), (2, 4, 8))]
    out = {"attention_flash": flash, "matmul": mm, "elementwise_fused": ew, "attention_naive": naive}
    out.update(_new_spaces())
    return out


def _new_spaces():
    """The tile spaces of the built-ins added after the first table: the flash backward, decode,
    flash with grouped KV heads or a sliding window, and the row kernels."""
    bwd = [dict(SHAPES["attention_flash_bwd"], BLOCK_M=bm, BLOCK_N=bn, num_warps=w, head_dim=d, num_stages=s, causal=c)
           for bm, bn, w, d, s, c in itertools.product(T, T, (1, 2, 4, 8), (32, 64, 128, 256), (1, 2, 3, 4),
                                                       (False, True))]
    dec = [dict(SHAPES["attention_decode"], kv_heads=kvh, q_len=q, head_dim=d, num_splits=sp, BLOCK_N=bn, num_warps=w,
                num_stages=s, causal=c)
           for kvh, q, d, sp, bn, w, s, c in itertools.product((0, 8, 4, 1), (1, 2, 4, 16), (64, 128, 256), (4, 16, 64),
                                                               T, (1, 2, 4, 8), (1, 2, 3), (False, True))]
    gqa = [dict(SHAPES["attention_flash"], BLOCK_M=bm, BLOCK_N=bn, num_warps=w, head_dim=d, num_stages=s, causal=c,
                kv_heads=kvh, window=win)
           for bm, bn, w, d, s, c, kvh, win in itertools.product(T, T, (1, 2, 4, 8), (32, 64, 128, 256), (1, 2, 3),
                                                                 (False, True), (0, 1, 4), (0, 256, 1024))
           if kvh or win]
    rows = [dict(SHAPES["rows"], cols=n, BLOCK=b, num_warps=w, num_stages=s)
            for n, b, w, s in itertools.product((512, 1000, 4096, 5120, 16384, 65536),
                                                (0,) + tuple(2 ** i for i in range(8, 15)), (1, 2, 4, 8, 16), (1, 2, 3))
            if b <= 2 * _pow2(n)]
    return {"attention_flash_bwd": bwd, "attention_decode": dec, "attention_flash_gqa": gqa,
            "softmax": rows, "layernorm": rows, "rmsnorm": rows}


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _words_per_thread(kernel: str, p: dict) -> float:
    """32-bit words per thread of the tiles a config keeps live at once (its largest launch)."""
    threads = 32 * p["num_warps"]
    if kernel == "attention_flash":
        return (p["BLOCK_M"] * p["head_dim"] + p["BLOCK_M"] * p["BLOCK_N"]) / threads
    if kernel == "matmul":
        return p["BLOCK_M"] * p["BLOCK_N"] / threads
    if kernel == "attention_flash_bwd":    # dK, dV and two score tiles (dK/dV); dQ and two (dQ)
        bm, bn, d = p["BLOCK_M"], p["BLOCK_N"], p["head_dim"]
        return max(2 * bn * d + 2 * bm * bn, bm * d + 2 * bm * bn) / threads
    if kernel == "attention_decode":
        bm = min(128, max(16, _pow2(p["heads"] // (p["kv_heads"] or p["heads"]) * p["q_len"])))
        return (bm * p["head_dim"] + bm * p["BLOCK_N"]) / threads
    if kernel in ("softmax", "layernorm", "rmsnorm"):
        from gpusim.kernels.norms import row_block

        return row_block(dict(p, BLOCK=p["BLOCK"])) / threads
    return 0.0


def _fits(kernel: str, p: dict, cfg) -> bool:
    try:
        launches = kernels.build(kernel, p).launches
    except ValueError:      # not a valid config of the kernel
        return False
    for launch in launches:
        if cta_resources(launch.program).sram_bytes > cfg.sram_bytes_per_cta_max:
            return False
    return _words_per_thread(kernel, p) <= MAX_WORDS_PER_THREAD


def choose(counts: dict, cfg, spaces=None) -> list:
    """Deterministic sample: ``counts[space]`` feasible configs per tile space (all if fewer), as
    (space, kernel, params); ``spaces``: only these. The first table's four spaces share one seeded
    generator (in order, as they were recorded); each later space has its own, so its sample does
    not depend on which other spaces are chosen."""
    shared = random.Random(SEED)
    out = []
    for space, cands in _space().items():
        if spaces is not None and space not in spaces and space not in LEGACY:
            continue
        kernel = SPACE_KERNEL.get(space, space)
        if space in LEGACY:
            pick = _pick_filtered(kernel, cands, counts[space], shared, cfg)
        else:
            pick = _pick_lazy(kernel, cands, counts[space], random.Random(f"{SEED}/{space}"), cfg)
        if spaces is None or space in spaces:
            out += [(space, kernel, p) for p in pick]
    return out


def _pick_filtered(kernel, cands, n, rng, cfg) -> list:
    """n of the feasible candidates: the n/8 largest (the spilling side of the space), then a
    seeded shuffle of the rest (how the first table was sampled)."""
    ok = [p for p in cands if _fits(kernel, p, cfg)]
    rng.shuffle(ok)
    big = sorted(ok, key=lambda p: -_words_per_thread(kernel, p))[:max(0, n // 8)]
    return big + [p for p in ok if p not in big][:n - len(big)]


def _pick_lazy(kernel, cands, n, rng, cfg) -> list:
    """The same choice, testing feasibility only of the candidates it takes (large spaces)."""
    order = list(cands)
    rng.shuffle(order)
    big = []
    for p in sorted(order, key=lambda p: -_words_per_thread(kernel, p)):
        if len(big) >= n // 8:
            break
        if _fits(kernel, p, cfg):
            big.append(p)
    rest = []
    for p in order:
        if len(big) + len(rest) >= n:
            break
        if p not in big and _fits(kernel, p, cfg):
            rest.append(p)
    return big + rest


def _compile_one(item):
    """Rows of one config, one per launch; each with ``_source`` (a digest of what was compiled)."""
    from gpusim.toolchain.cache import digest
    from gpusim.toolchain.compile import CompileError, compile_program
    from gpusim.toolchain.lower import lower

    space, kernel, p = item
    rows = []
    for launch in kernels.build(kernel, p).launches:
        src = digest(f"{lower(launch.program, launch.grid)}/{launch.program.num_warps}")
        row = {"kernel": kernel, "params": p, "launch": launch.name, "_source": src}
        if space not in LEGACY:
            row["space"] = space
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


KEY_PARAMS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK", "cols", "num_warps", "head_dim", "num_stages", "causal",
              "kv_heads", "window", "q_len", "num_splits")


def compare(path: str) -> dict:
    """Analytic estimate vs the compiled counts of a recorded table (ours, or the H200's
    ``n_regs``/``n_spills`` rows): per row (group, compiled, spills, estimate, key params), the
    group being the tile space and launch. No compiler needed."""
    from gpusim.compiler.registers import estimate

    with open(path) as f:
        doc = json.load(f)
    rows = []
    for r in doc.get("launches", doc.get("rows", [])):
        if "error" in r:
            continue
        reg = r.get("registers_per_thread", r.get("n_regs"))
        spills = bool(r.get("spill_store_bytes", r.get("n_spills", 0)))
        launch = next(ln for ln in kernels.build(r["kernel"], r["params"]).launches if ln.name == r["launch"])
        key = {k: v for k, v in r["params"].items() if k in KEY_PARAMS and (v or k == "causal")}
        rows.append((f"{row_space(r)}/{r['launch']}", reg, spills, estimate(launch.program, ARCH), key,
                     development_half(r)))
    return rows


def development_half(row: dict) -> bool:
    """Whether a recorded row is in the half the estimate's bases are fitted on (``COEF`` in
    compiler/registers.py): crc32 of its params (sorted JSON) even; the other half checks."""
    return zlib.crc32(json.dumps(row["params"], sort_keys=True).encode()) % 2 == 0


def stats(rows) -> dict:
    """Within-8 fraction, median / p90 / max error of the non-spilling rows; spill flags."""
    e = sorted(abs(r[3] - r[1]) for r in rows if not r[2])
    n = len(e)
    return {"launches": len(rows), "n": n, "errs": e, "within8": sum(x <= 8 for x in e),
            "median": e[n // 2] if n else 0, "p90": e[int(0.9 * (n - 1))] if n else 0, "max": e[-1] if n else 0,
            "spills": sum(r[2] for r in rows),
            "missed": [r for r in rows if r[2] and r[3] <= 255], "false": [r for r in rows if not r[2] and r[3] > 255]}


def report(path: str) -> None:
    rows = compare(path)
    s = stats(rows)
    e, n = s["errs"], s["n"]
    print(f"{path}: {s['launches']} launches, {n} without spills")
    if n:
        print(f"  |estimate - compiled| registers: median {s['median']}, p90 {s['p90']}, max {s['max']}; "
              f"within 8: {s['within8']}/{n} ({100 * s['within8'] / n:.0f}%)")
        for lo, hi in ((0, 8), (9, 16), (17, 32), (33, 64), (65, 10 ** 9)):
            k = sum(lo <= x <= hi for x in e)
            print(f"    {lo:>3}..{hi if hi < 10 ** 9 else '':<3} {k:4d} {'#' * (60 * k // n)}")
    for name, half in (("development", True), ("check", False)):
        t = stats([r for r in rows if r[5] == half])
        print(f"  {name} half: within 8 {t['within8']}/{t['n']}, median {t['median']}, max {t['max']}; "
              f"spills flagged {t['spills'] - len(t['missed'])}/{t['spills']}, false alarms {len(t['false'])}")
    print(f"  spilling launches: {s['spills']}, flagged by the estimate (> 255): {s['spills'] - len(s['missed'])}; "
          f"false alarms: {len(s['false'])}")
    print("  | space/launch | launches | within 8 (non-spilling) | median | max | spills flagged | false alarms |")
    print("  | --- | --- | --- | --- | --- | --- | --- |")
    for g in dict.fromkeys(r[0] for r in rows):
        t = stats([r for r in rows if r[0] == g])
        within = f"{t['within8']}/{t['n']} ({100 * t['within8'] / t['n']:.0f}%)" if t["n"] else "-"
        print(f"  | {g} | {t['launches']} | {within} | {t['median']} | {t['max']} | "
              f"{t['spills'] - len(t['missed'])}/{t['spills']} | {len(t['false'])} |")
    for m in s["missed"] + s["false"]:
        print(f"    spill flag wrong: {m[0]} {m[4]} compiled {m[1]}{' (spills)' if m[2] else ''} estimated {m[3]}")
    worst = sorted((r for r in rows if not r[2]), key=lambda r: -abs(r[3] - r[1]))
    for w in worst[:10]:
        print(f"    worst: {w[3] - w[1]:+4d} {w[0]} {w[4]} compiled {w[1]} estimated {w[3]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", nargs="*", metavar="TABLE",
                    help="only compare the analytic estimate with recorded tables (default: the one written here)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="compile only the first N chosen configs (a quick look)")
    ap.add_argument("--spaces", default="", help=f"comma-separated tile spaces to sample (default all: {','.join(COUNTS)})")
    ap.add_argument("--append", action="store_true",
                    help="keep the rows of the other spaces already in --out (replace only the chosen spaces' rows)")
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args(argv)
    if a.compare is not None:
        for path in a.compare or [OUT]:
            report(path)
        return 0
    spaces = set(a.spaces.split(",")) if a.spaces else None
    if spaces and spaces - set(COUNTS):
        ap.error(f"unknown spaces {sorted(spaces - set(COUNTS))}; known: {', '.join(COUNTS)}")
    return record(a, spaces)


def record(a, spaces) -> int:
    import triton

    from gpusim.toolchain.compile import _ptxas_version

    cfg = load_gpu("h200")
    items = choose(COUNTS, cfg, spaces)
    if a.limit:
        items = items[:a.limit]
    rows, seen = [], set()
    t0 = time.time()
    with ProcessPoolExecutor(a.jobs) as ex:
        for i, r in enumerate(ex.map(_compile_one, items), 1):
            for row in r:      # a later space's launch whose source was already compiled is recorded once
                if "space" not in row or row["_source"] not in seen:
                    seen.add(row["_source"])
                    rows.append(row)
                del row["_source"]
            if i % 20 == 0:
                print(f"{i}/{len(items)} configs, {time.time() - t0:.0f} s", flush=True)
    if a.append and os.path.exists(a.out):
        with open(a.out) as f:
            kept = [r for r in json.load(f)["launches"] if row_space(r) not in {s for s, _, _ in items}]
        rows = kept + rows
    doc = {"arch": ARCH, "triton_version": triton.__version__, "ptxas_version": _ptxas_version(ARCH),
           "generated_by": "PYTHONPATH=$PWD python benchmarks/record_resources.py", "gpu_config": cfg.name,
           "launches": rows}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    print(f"wrote {len(rows)} launches ({len(items)} configs compiled) to {a.out} in {time.time() - t0:.0f} s")
    return 0


def row_space(row: dict) -> str:
    """The tile space a recorded row was sampled from (the first table's rows name only their kernel)."""
    return row.get("space", row["kernel"])


if __name__ == "__main__":
    raise SystemExit(main())
