"""Write the calibration points of one round as scenario files: training scenarios under
``scenarios/calibration/`` and sealed held-out ones under ``scenarios/validation/heldout/``.

Each family's space is drawn at random from real model shapes (Llama-3 8B/70B, Mistral 7B, Qwen2
7B/72B, GPT-3, GPT-2, Llama-2 13B) and log-uniform sizes (odd ones included), with the tiles, warps
and stages Triton users pick. A scenario is one "cluster": a few shapes, each with several tile
configs, so grouped cross-validation by scenario holds whole shapes out. Points a GPU cannot run
(SRAM per CTA, Triton's tile rules, HBM) are dropped here with the project's own checks; register
spills are kept.

usage: python benchmarks/calib_sample.py --round 23 [--seed 23] [--train-per-family 240] [--heldout-per-family 30]
                                         [--heldout-only | --train-only] [--weights matmul=3,gemv=2] [--sweep-share 0.5]

``--weights`` multiplies a family's training points (where the model misses most); ``--sweep-share``
makes that share of training scenarios one-shape tile sweeps (what tile picks are judged on).
``--train-only`` leaves the sealed held-out files of the round alone (use another ``--seed``).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim import kernels  # noqa: E402
from gpusim.backends.sim.cost import InfeasibleError, occupancy  # noqa: E402
from gpusim.hardware import load_gpu  # noqa: E402
from gpusim.precheck import infeasible_reason  # noqa: E402

# (hidden, intermediate, heads, kv_heads, head_dim) of models users run
MODELS = {"llama3-8b": (4096, 14336, 32, 8, 128), "llama3-70b": (8192, 28672, 64, 8, 128),
          "mistral-7b": (4096, 14336, 32, 8, 128), "qwen2-7b": (3584, 18944, 28, 4, 128),
          "qwen2-72b": (8192, 29568, 64, 8, 128), "gpt3-175b": (12288, 49152, 96, 96, 128),
          "gpt2": (768, 3072, 12, 12, 64), "llama2-13b": (5120, 13824, 40, 40, 128)}
DTYPES = ("fp16", "bf16")
MAX_INPUT_ELEMS = 1 << 27      # inputs a point may hold (they are drawn and checked on the host)


def pick(rng, xs, p=None):
    return xs[int(rng.choice(len(xs), p=None if p is None else np.asarray(p) / np.sum(p)))]


def loguni(rng, lo, hi, odd_p=0.2, mult=16):
    """A size log-uniform in [lo, hi]: a multiple of ``mult`` mostly, any integer with ``odd_p``."""
    x = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    return max(lo, int(round(x))) if rng.random() < odd_p else max(mult, int(round(x / mult)) * mult)


def gemm_shape(rng):
    if rng.random() < 0.6:
        h, inter, nh, kvh, hd = MODELS[pick(rng, list(MODELS))]
        n_k = pick(rng, [((nh + 2 * kvh) * hd, h), (h, nh * hd), (2 * inter, h), (inter, h), (h, inter)])
        m = pick(rng, [128, 256, 512, 1024, 2048, 4096, 8192, 3000, 777, 16384])
        return dict(M=m, N=n_k[0], K=n_k[1])
    return dict(M=loguni(rng, 64, 8192), N=loguni(rng, 64, 8192), K=loguni(rng, 32, 8192))


def gemm_tiles(rng):
    return dict(BLOCK_M=pick(rng, [32, 64, 128, 256], [1, 3, 4, 2]), BLOCK_N=pick(rng, [32, 64, 128, 256], [1, 3, 4, 2]),
                BLOCK_K=pick(rng, [32, 64, 128], [3, 4, 2]), num_warps=pick(rng, [4, 8], [3, 2]),
                num_stages=pick(rng, [2, 3, 4, 5], [2, 4, 3, 1]))


def attn_shape(rng, bwd=False):
    h, _, nh, kvh, hd = MODELS[pick(rng, list(MODELS))]
    n = pick(rng, [256, 512, 1024, 2048, 4096, 8192, 16384] if not bwd else [256, 512, 1024, 2048, 4096, 8192],
             [1, 2, 3, 3, 3, 2, 1] if not bwd else [1, 2, 3, 3, 2, 1])
    if rng.random() < 0.15:
        n = loguni(rng, 200, 6000, odd_p=0.5)
    heads = pick(rng, [nh, 8, 12, 16, 32])
    batch = max(1, min(16, int(2 ** rng.integers(0, 5)) * 4096 // max(n, 512)))
    d = pick(rng, [64, 128], [1, 2]) if hd == 128 else 64
    p = dict(batch=batch, heads=heads, seq_len=n, head_dim=d, causal=bool(rng.random() < 0.5))
    if not bwd:
        p["kv_heads"] = kvh if rng.random() < 0.3 and heads == nh and kvh < nh else 0
        p["window"] = pick(rng, [256, 1024, 4096]) if rng.random() < 0.08 else 0
    return p


def flash_tiles(rng):
    return dict(BLOCK_M=pick(rng, [64, 128], [2, 3]), BLOCK_N=pick(rng, [32, 64, 128], [2, 4, 2]),
                num_warps=pick(rng, [4, 8], [1, 1]), num_stages=pick(rng, [1, 2, 3, 4], [1, 3, 3, 1]))


def bwd_tiles(rng):
    return dict(BLOCK_M=pick(rng, [32, 64, 128], [2, 3, 1]), BLOCK_N=pick(rng, [32, 64, 128], [2, 3, 1]),
                num_warps=pick(rng, [4, 8]), num_stages=pick(rng, [1, 2, 3], [1, 3, 2]))


def decode_shape(rng):
    h, _, nh, kvh, hd = MODELS[pick(rng, list(MODELS))]
    return dict(batch=pick(rng, [1, 2, 4, 8, 16, 32, 64]), heads=nh, kv_heads=kvh, head_dim=hd,
                kv_len=pick(rng, [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 5000, 30000]),
                q_len=pick(rng, [1, 1, 1, 2, 4]), causal=True)


def decode_tiles(rng):
    return dict(num_splits=pick(rng, [1, 2, 4, 8, 16, 32, 64]), BLOCK_N=pick(rng, [32, 64, 128], [2, 4, 2]),
                num_warps=pick(rng, [4, 8], [3, 1]), num_stages=pick(rng, [1, 2, 3, 4], [1, 3, 2, 1]))


def gemv_shape(rng):
    h, inter, nh, kvh, hd = MODELS[pick(rng, list(MODELS))]
    n_k = pick(rng, [((nh + 2 * kvh) * hd, h), (h, nh * hd), (2 * inter, h), (h, inter)])
    if rng.random() < 0.25:
        n_k = (loguni(rng, 256, 16384), loguni(rng, 256, 16384))
    return dict(M=pick(rng, [1, 1, 2, 4, 8, 16, 3, 5]), N=n_k[0], K=n_k[1])


def gemv_tiles(rng):
    return dict(BLOCK_M=16, BLOCK_N=pick(rng, [16, 32, 64, 128, 256]), BLOCK_K=pick(rng, [64, 128, 256, 512]),
                SPLIT_K=pick(rng, [1, 2, 4, 8, 16]), num_warps=pick(rng, [2, 4, 8]), num_stages=pick(rng, [1, 2, 3, 4]))


def ew_shape(rng):
    return dict(n=loguni(rng, 1 << 14, 1 << 27, odd_p=0.4, mult=1024))


def ew_tiles(rng):
    return dict(BLOCK=pick(rng, [256, 512, 1024, 2048, 4096, 8192, 16384]), num_warps=pick(rng, [1, 2, 4, 8, 16]))


def rows_shape(rng):
    h, inter, nh, *_ = MODELS[pick(rng, list(MODELS))]
    cols = pick(rng, [h, inter, h, loguni(rng, 100, 65536, odd_p=0.4), 32000, 50257, 128256])
    rows = pick(rng, [1, 8, 64, 512, 2048, 4096, 8192, 16384, 1000])
    rows = max(1, min(rows, MAX_INPUT_ELEMS // 2 // cols))
    return dict(rows=rows, cols=cols)


def rows_tiles(rng):
    return dict(BLOCK=pick(rng, [0, 0, 256, 512, 1024, 2048, 4096, 8192]), num_warps=pick(rng, [1, 2, 4, 8, 16]),
                num_stages=pick(rng, [1, 2, 3]))


def naive_shape(rng):
    return dict(batch=pick(rng, [1, 2, 4, 8]), heads=pick(rng, [8, 12, 16, 32]), seq_len=pick(rng, [256, 512, 1024, 2048]),
                head_dim=pick(rng, [64, 128]), causal=False)


FAMILIES = {   # name -> [(kernel, shape, tiles)]: the kernels one family's points are drawn from
    "matmul": [("matmul", gemm_shape, gemm_tiles)],
    "flash": [("attention_flash", attn_shape, flash_tiles)],
    "flash_bwd": [("attention_flash_bwd", lambda r: attn_shape(r, bwd=True), bwd_tiles)],
    "decode": [("attention_decode", decode_shape, decode_tiles)],
    "gemv": [("gemv_splitk", gemv_shape, gemv_tiles)],
    "elementwise": [("elementwise_fused", ew_shape, ew_tiles), ("elementwise_chain", ew_shape, ew_tiles)],
    "norms": [("rmsnorm", rows_shape, rows_tiles), ("layernorm", rows_shape, rows_tiles), ("softmax", rows_shape, rows_tiles)],
    "naive": [("attention_naive", naive_shape, lambda r: dict(num_warps=pick(r, [4, 8])))],
}
FAMILY_SHARE = {"naive": 0.3}      # a smaller share for the family nobody tunes


def feasible(kernel: str, params: dict, cfgs) -> bool:
    """True when the project's own checks let every GPU run it (SRAM, tile rules, HBM, input size)."""
    try:
        wl = kernels.build(kernel, params)
    except Exception:
        return False
    if sum(math.prod(wl.tensors[n].shape) for n in wl.inputs) > MAX_INPUT_ELEMS:
        return False
    for cfg in cfgs:
        if infeasible_reason(wl, cfg):
            return False
        try:
            for launch in wl.launches:
                occupancy(launch.program, cfg, launch.grid, resources="estimated")
        except InfeasibleError:
            return False
    return True


def scenario_points(path: Path) -> list:
    """(kernel, sorted params) of every point of one scenario file written by ``scenario_yaml``."""
    doc = yaml.safe_load(path.read_text())
    zipped = (doc.get("sweep") or {}).get("zip") or {}
    n = len(next(iter(zipped.values()))) if zipped else 1
    return [(doc["kernel"], tuple(sorted({**doc.get("params", {}), **{k: v[i] for k, v in zipped.items()}}.items())))
            for i in range(n)]


def cluster(rng, family: str, n_points: int, cfgs, sweep_one: bool = False, exclude: frozenset = frozenset()) -> tuple:
    """(kernel, [params]) of one scenario: a few shapes, several tile configs each, none in ``exclude``
    ((kernel, sorted params) pairs: the round's sealed points)."""
    kernel, shape_fn, tile_fn = FAMILIES[family][int(rng.integers(len(FAMILIES[family])))]
    pts, tries = [], 0
    seen = {key for k, key in exclude if k == kernel}
    shapes_wanted = 1 if sweep_one else max(2, n_points // 8)
    while len(pts) < n_points and tries < 400:
        tries += 1
        shape = shape_fn(rng)
        shape["dtype"] = pick(rng, list(DTYPES), [3, 2])
        got = 0
        for _ in range(60):
            if got >= -(-n_points // shapes_wanted) or len(pts) >= n_points:
                break
            p = dict(shape, **tile_fn(rng))
            key = tuple(sorted(p.items()))
            if key in seen or not feasible(kernel, p, cfgs):
                continue
            seen.add(key)
            pts.append(p)
            got += 1
        if sweep_one and pts:
            break
    return kernel, pts


def scenario_yaml(name: str, kernel: str, pts: list, header: str) -> str:
    keys = list(dict.fromkeys(k for p in pts for k in p))
    fixed = {k: pts[0][k] for k in keys if all(k in p and p[k] == pts[0][k] for p in pts)}
    zipped = {k: [p[k] for p in pts] for k in keys if k not in fixed}
    missing = [k for k in zipped if any(k not in p for p in pts)]
    if missing:
        raise ValueError(f"{name}: params {missing} not set on every point")
    doc = {"name": name, "gpu": "h100", "kernel": kernel, "params": fixed, "check": True}
    if zipped:
        doc["sweep"] = {"zip": zipped}
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=110)
    return "".join(f"# {line}\n" for line in header.splitlines()) + body


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--round", type=int, required=True)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--train-per-family", type=int, default=240)
    ap.add_argument("--heldout-per-family", type=int, default=30)
    ap.add_argument("--per-scenario", type=int, default=24)
    ap.add_argument("--heldout-only", action="store_true", help="write only the sealed held-out scenarios")
    ap.add_argument("--train-only", action="store_true", help="write only training scenarios")
    ap.add_argument("--weights", default="", help="family=factor,... on the training points per family")
    ap.add_argument("--sweep-share", type=float, default=0.0, help="share of training scenarios that sweep one shape's tiles")
    a = ap.parse_args(argv)
    weights = {k: float(v) for k, v in (kv.split("=") for kv in a.weights.split(",") if kv)}
    unknown = set(weights) - set(FAMILIES)
    if unknown:
        ap.error(f"--weights: unknown families {sorted(unknown)}; allowed: {', '.join(FAMILIES)}")
    rng = np.random.default_rng(a.seed if a.seed is not None else a.round)
    cfgs = [load_gpu(g) for g in ("h100", "h200")]
    train_dir, held_dir = ROOT / "scenarios" / "calibration", ROOT / "scenarios" / "validation" / "heldout"
    train_dir.mkdir(parents=True, exist_ok=True)
    sealed = frozenset(pt for f in held_dir.glob(f"*_round{a.round}.yaml") for pt in scenario_points(f)) \
        if a.train_only else frozenset()
    counts = {}
    for family in FAMILIES:
        share = FAMILY_SHARE.get(family, 1.0)
        share *= weights.get(family, 1.0)
        n_train, n_held = int(a.train_per_family * share), max(8, int(a.heldout_per_family * share))
        n_train = 0 if a.heldout_only else n_train
        made = 0
        i = 0
        while made < n_train:
            kernel, pts = cluster(rng, family, min(a.per_scenario, n_train - made), cfgs,
                                  sweep_one=bool(rng.random() < a.sweep_share), exclude=sealed)
            if not pts:
                continue
            name = f"{family}_r{a.round}_{i:02d}"
            (train_dir / f"{name}.yaml").write_text(scenario_yaml(
                f"calib-{name}", kernel, pts, f"Calibration training points, round {a.round} ({family}): drawn by "
                f"benchmarks/calib_sample.py --round {a.round}"))
            made += len(pts)
            i += 1
        # held out: one random cluster and one tile sweep of a single shape per family
        held = 0
        for j, sweep in enumerate(() if a.train_only else (False, True)):
            kernel, pts = cluster(rng, family, n_held // 2 + (n_held % 2 if j else 0), cfgs, sweep_one=sweep)
            name = f"{family}_{'tiles' if sweep else 'shapes'}_round{a.round}"
            (held_dir / f"{name}.yaml").write_text(scenario_yaml(
                f"val-heldout-{name}", kernel, pts,
                f"Held out (round {a.round}, sealed: written and committed before the calibration layer was fitted or\n"
                f"any of these points measured; judged once): {family}, "
                + ("one shape, a sweep of tile configs." if sweep else "random shapes and tiles.")))
            held += len(pts)
        counts[family] = (made, held)
        print(f"{family:12s} train {made:4d} points in {i} scenarios, held out {held}")
    print(f"total: train {sum(c[0] for c in counts.values())}, held out {sum(c[1] for c in counts.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
