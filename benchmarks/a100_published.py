"""Published A100 results against gpusim's ``a100`` predictions for the same shapes.

``PUBLISHED`` holds the numbers as data: which kernel ran (FA2 CUDA, FlashAttention in Triton,
PyTorch standard attention, FlashAttention v1 CUDA, cuBLAS, a STREAM-like copy), its shape and
dtype, the published value and unit, and where it was published (``SOURCES``: title, figure or
table, URL, the A100 it ran on). Each is predicted with the closest gpusim kernel:

- FlashAttention of any implementation: ``attention_flash`` (forward) plus ``attention_flash_bwd``
  (backward), each the fastest of a few tiles (``FLASH_TILES``, ``BWD_TILES``), as the published
  kernels are tuned;
- PyTorch standard attention (S and P written to HBM): ``attention_naive`` (forward only);
- cuBLAS GEMM: ``matmul``, the fastest of ``MATMUL_TILES``;
- a streaming copy: ``elementwise_fused`` (one read and one write stream).

A published TFLOP/s is compared with the FLOPs the source counts (attention: 4 B H N^2 d, halved
when causal, x3.5 for forward + backward; GEMM: 2 M N K). ``ratio`` is predicted speed over
published speed (above 1: gpusim is faster). A prediction is inside the published range of the
same kind of kernel when it lies within [min / 1.1, max x 1.1] of the published values of that kind
(the FlashAttention-2 loop in CUDA or Triton; FlashAttention v1; unfused attention; cuBLAS) at the same shape and pass;
the 10% allows for the single published number of most shapes. Where it is outside, ``MISSING``
names the mechanism gpusim does not model.

usage: python benchmarks/a100_published.py [--gpu a100]
(GPUSIM_RESOURCES=estimated is what docs/history.md shows.)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# ---------------------------------------------------------------------------------------- sources
SOURCES = {
    "fa2-fig4": dict(
        title="Tri Dao, FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning (2023)",
        where="Figure 4, attention forward + backward speed on A100 (bar labels); the same figure is "
              "assets/flash2_a100_fwd_bwd_benchmark.png of github.com/Dao-AILab/flash-attention",
        url="https://arxiv.org/abs/2307.08691",
        gpu="A100 80GB SXM4",
        setting="batch x seqlen = 16k tokens, hidden 2048 (32 heads of d 64, 16 of d 128), fp16; "
                "FLOPs 4 N^2 d H B (/2 causal) x 3.5 for forward + backward"),
    "fa1-table18": dict(
        title="Tri Dao, Daniel Y. Fu, Stefano Ermon, Atri Rudra, Christopher Re, FlashAttention: Fast and "
              "Memory-Efficient Exact Attention with IO-Awareness (NeurIPS 2022)",
        where="Appendix E.6, Table 18: forward pass runtime (ms), no dropout, no masking",
        url="https://arxiv.org/abs/2205.14135",
        gpu="A100 40GB",
        setting="batch 16, 8 heads of d 64, fp16; mean of 100 runs"),
    "gpu-travel-fa2": dict(
        title="liangan1/GPU_travel, Flash-Attention V2 on SM80 (a third party's measurement of the "
              "Dao-AILab/flash-attention CUDA kernel)",
        where="performance/flash-attn/README.md, 'Benchmark Result' tables (head dim 128: TFLOP/s x ms / "
              "FLOPs); the author notes the clock drops from 1410 to about 1200 MHz under the power limit",
        url="https://github.com/liangan1/GPU_travel/blob/07d0469e8af6ebe7d66ed1bcbc88ff86bae025d4/"
            "performance/flash-attn/README.md",
        gpu="A100 (memory size not stated)",
        setting="fp16 forward, 32 heads, seqlen_q = seqlen_kv"),
    "mamf": dict(
        title="Stas Bekman, Machine Learning Engineering Open Book, 'Maximum Achievable Matmul FLOPS "
              "comparison table' (mamf-finder.py: best of a shape sweep, mean of 100 runs after 50 warmup)",
        where="compute/accelerator/README.md, BF16 table: NVIDIA A100 SXM 271.2 TFLOP/s at 1024x10240x5120 "
              "(torch 2.6.0+cu126)",
        url="https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md",
        gpu="A100 SXM",
        setting="torch.matmul bf16 (cuBLAS)"),
    "mamf-cuda121": dict(
        title="Stas Bekman, Machine Learning Engineering Open Book, an earlier version of the same table",
        where="compute/accelerator/README_zh.md (commit 637690f): NVIDIA A100 SXM 267.9 TFLOP/s at "
              "6912x16384x2048 (CUDA 12.1)",
        url="https://github.com/stas00/ml-engineering/blob/637690f4295dc6bc7cb5f253aef10d88fc198d76/"
            "compute/accelerator/README_zh.md",
        gpu="A100 SXM",
        setting="torch.matmul bf16 (cuBLAS)"),
    "xudoong-hsgemm": dict(
        title="xudoong/GEMM, Mixed Precision FP16-FP32 GEMM on A100 Tensor Core",
        where="hsgemm-tensorcore/README.md: cuBLAS 238.8 TFLOP/s at 4096x4096x4096 (fp16 in, fp32 accumulate)",
        url="https://github.com/xudoong/GEMM/blob/master/hsgemm-tensorcore/README.md",
        gpu="A100",
        setting="C = alpha A B + beta C, row-major"),
    "xudoong-hgemm": dict(
        title="xudoong/GEMM, HGEMM on A100 Tensor Core",
        where="hgemm-tensorcore/README.md: cuBLAS 210.7 TFLOP/s (67.5%) at 4096x4096x4096 (fp16 in and out)",
        url="https://github.com/xudoong/GEMM/blob/master/hgemm-tensorcore/README.md",
        gpu="A100",
        setting="C = alpha A B + beta C, A and C row-major, B column-major"),
    "gpu-benches-stream": dict(
        title="RRZE-HPC/gpu-benches (J. Ernst et al.), gpu-stream",
        where="gpu-stream/a100_40.txt (commit 1038c5d): scale kernel A[i] = B[i] * c (fp64), 100% occupancy, "
              "read + write bytes; also the source of configs/a100.yaml's hbm_copy_bandwidth_bytes_per_s",
        url="https://github.com/RRZE-HPC/gpu-benches/blob/1038c5d/gpu-stream/a100_40.txt",
        gpu="A100 40GB",
        setting="one load and one store stream"),
}

# a missing mechanism, by the reason a prediction falls outside its kind's range
MISSING = {
    "fast": "gpusim is faster than every published kernel of the kind: the A100's clock under its 400 W limit "
            "(no power model for a100: it stays at 1.41 GHz; about 1.2 GHz is reported under FA2) and the "
            "H200's tile efficiencies, which are wgmma measurements, not mma.sync ones",
    "slow": "gpusim is slower than every published kernel of the kind: its Triton-compiled kernel and the H200's "
            "tile-efficiency table do not reach a hand-written CUDA kernel's mma.sync rate on Ampere "
            "(no Ampere tile-efficiency measurement)",
    "short": "short sequences (N <= 1024): the fixed per-launch and per-CTA cost of short work and the first "
             "tiles' latency, under-charged on the H200 as well (docs/validation.md, short sequences), with the "
             "H200's launch and dispatch costs (not measured on Ampere)",
    "naive": "not the same kernel: gpusim's attention_naive scales S in a launch of its own, one more N^2 read "
             "and write than a PyTorch attention that folds the scale into the first matmul (flash-attention's "
             "benchmark does, with torch.baddbmm); at N 512 its four launches' fixed costs are the H200's",
    "flash-v1": "not the same algorithm: gpusim's attention_flash is the FlashAttention-2 loop (query rows split "
                "across warps, one rescale at the end); FlashAttention v1 splits K and V across warps and reduces "
                "through shared memory, which gpusim does not model (the FlashAttention-2 paper measures v1 1.7-3.0x "
                "slower)",
}

FLASH_TILES = ((128, 64, 4, 2), (128, 64, 8, 2), (64, 64, 4, 2), (128, 128, 8, 2))     # BLOCK_M, BLOCK_N, warps, stages
BWD_TILES = ((64, 64, 4, 2), (128, 64, 8, 2), (64, 128, 8, 2))
MATMUL_TILES = ((128, 128, 32, 4, 4), (128, 128, 64, 4, 3), (128, 256, 64, 8, 3), (256, 128, 64, 8, 3),
                (128, 128, 64, 8, 3), (64, 128, 64, 4, 4))      # BLOCK_M, BLOCK_N, BLOCK_K, warps, stages

KINDS = {"FA2 CUDA": "flash", "FlashAttention Triton": "flash", "FA1 CUDA": "flash-v1",
         "PyTorch standard": "naive", "cuBLAS": "gemm", "STREAM copy": "stream"}


@dataclass(frozen=True)
class Published:
    """One published A100 number."""

    kernel: str            # which kernel ran (a key of KINDS)
    shape: dict            # gpusim parameters of the closest kernel (attention: batch, heads, seq_len, head_dim, causal)
    dtype: str
    value: float
    unit: str              # "TFLOP/s", "ms" or "GB/s"
    source: str            # a key of SOURCES
    pass_: str = "fwd"     # "fwd" or "fwd+bwd" (attention)
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return KINDS[self.kernel]

    @property
    def group(self) -> tuple:
        """Rows of one shape and pass (the range of a kind is taken within a group)."""
        return (self.kind, self.pass_, tuple(sorted(self.shape.items())), self.dtype)


def _fa2_fig4() -> list:
    """FlashAttention-2 Figure 4 (A100 80GB SXM4, forward + backward, TFLOP/s), read off the bar labels.
    Three FA2 labels lie under the legend: 153 (1k, d 64) and 173 (1k, d 128) are legible through it;
    the one at 512, d 128 is not and is left out."""
    seqs = (512, 1024, 2048, 4096, 8192, 16384)
    panels = {  # (causal, head_dim): {kernel: values by seqs; None = not readable or OOM}
        (False, 64): {"PyTorch standard": (36, 40, 43, 45, 46, None),
                      "FlashAttention Triton": (90, 102, 98, 98, 100, 100),
                      "FA2 CUDA": (132, 153, 162, 171, 175, 176)},
        (False, 128): {"PyTorch standard": (53, 67, 76, 79, 86, None),
                       "FlashAttention Triton": (78, 85, 90, 93, 95, 95),
                       "FA2 CUDA": (None, 173, 187, 196, 201, 203)},
        (True, 64): {"PyTorch standard": (15, 16, 17, 18, 18, None),
                     "FlashAttention Triton": (59, 75, 79, 76, 79, 80),
                     "FA2 CUDA": (88, 119, 140, 156, 165, 171)},
        (True, 128): {"PyTorch standard": (23, 28, 32, 32, 34, None),
                      "FlashAttention Triton": (50, 61, 68, 74, 78, 80),
                      "FA2 CUDA": (99, 133, 155, 173, 182, 189)},
    }
    out = []
    for (causal, d), kernels in panels.items():
        for kname, vals in kernels.items():
            for n, v in zip(seqs, vals):
                if v is None:
                    continue
                shape = dict(batch=16384 // n, heads=2048 // d, seq_len=n, head_dim=d, causal=causal)
                out.append(Published(kname, shape, "fp16", float(v), "TFLOP/s", "fa2-fig4", "fwd+bwd"))
    return out


def _fa1_table18() -> list:
    """FlashAttention Table 18 (A100 40GB, forward, ms): batch 16, 8 heads, d 64."""
    seqs = (512, 1024, 2048, 4096, 8192, 16384)
    rows = {"PyTorch standard": (0.43, 1.27, 4.32, 16.47, 67.77, None),
            "FA1 CUDA": (0.18, 0.68, 2.40, 8.42, 35.54, 134.03)}
    return [Published(k, dict(batch=16, heads=8, seq_len=n, head_dim=64, causal=False), "fp16", v, "ms",
                      "fa1-table18") for k, vals in rows.items() for n, v in zip(seqs, vals) if v is not None]


PUBLISHED: list = (
    _fa2_fig4() + _fa1_table18()
    + [Published("FA2 CUDA", dict(batch=b, heads=32, seq_len=n, head_dim=128, causal=c), "fp16", v, "TFLOP/s",
                 "gpu-travel-fa2") for b, n, c, v in ((16, 1024, False, 179.11), (1, 4096, False, 184.04),
                                                       (16, 1024, True, 143.70), (1, 4096, True, 156.27))]
    + [Published("cuBLAS", dict(M=1024, N=10240, K=5120), "bf16", 271.2, "TFLOP/s", "mamf"),
       Published("cuBLAS", dict(M=6912, N=16384, K=2048), "bf16", 267.9, "TFLOP/s", "mamf-cuda121"),
       Published("cuBLAS", dict(M=4096, N=4096, K=4096), "fp16", 238.8, "TFLOP/s", "xudoong-hsgemm",
                 note="fp32 accumulate"),
       Published("cuBLAS", dict(M=4096, N=4096, K=4096), "fp16", 210.7, "TFLOP/s", "xudoong-hgemm",
                 note="fp16 output"),
       Published("STREAM copy", dict(n=1 << 28), "fp32", 1382.0, "GB/s", "gpu-benches-stream",
                 note="calibration input of hbm_copy_bandwidth_bytes_per_s, not an independent check")]
)


def load() -> list:
    """The published numbers, each checked to have a known kernel and a complete source."""
    for p in PUBLISHED:
        if p.kernel not in KINDS:
            raise ValueError(f"unknown kernel {p.kernel!r}")
        src = SOURCES.get(p.source)
        if not src or not all(src.get(k) for k in ("title", "where", "url", "gpu")):
            raise ValueError(f"{p.kernel} {p.shape}: source {p.source!r} is missing or incomplete")
        if p.unit not in ("TFLOP/s", "ms", "GB/s") or not p.value > 0:
            raise ValueError(f"{p.kernel} {p.shape}: bad value {p.value} {p.unit}")
    return list(PUBLISHED)


# ------------------------------------------------------------------------------------- prediction
def flops(p: Published) -> float:
    """The FLOPs the source counts for its number."""
    s = p.shape
    if "M" in s:
        return 2.0 * s["M"] * s["N"] * s["K"]
    f = 4.0 * s["batch"] * s["heads"] * s["seq_len"] ** 2 * s["head_dim"] / (2 if s.get("causal") else 1)
    return f * (3.5 if p.pass_ == "fwd+bwd" else 1.0)


_CACHE: dict = {}


def _best(kernel: str, gpu: str, shape: dict, dtype: str, tiles, names) -> tuple:
    """(time in us, tile) of the fastest feasible tile of ``kernel`` at ``shape``."""
    import gpusim

    key = (kernel, gpu, tuple(sorted(shape.items())), dtype)
    if key not in _CACHE:
        best = (float("inf"), None)
        for t in tiles:
            r = gpusim.simulate(kernel, gpu=gpu, check=False, dtype=dtype, **shape, **dict(zip(names, t)))
            if r.status == "ok" and r.time_us < best[0]:
                best = (r.time_us, t)
        _CACHE[key] = best
    return _CACHE[key]


def predict(p: Published, gpu: str = "a100") -> tuple:
    """(predicted time in us, how: the gpusim kernel and tiles) for a published number."""
    import gpusim

    s = dict(p.shape)
    if p.kind.startswith("flash"):
        t, tile = _best("attention_flash", gpu, s, p.dtype, FLASH_TILES,
                        ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages"))
        how = f"attention_flash {tile[0]}x{tile[1]} w{tile[2]}"
        if p.pass_ == "fwd+bwd":
            tb, tb_tile = _best("attention_flash_bwd", gpu, s, p.dtype, BWD_TILES,
                                ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages"))
            t += tb
            how += f" + _bwd {tb_tile[0]}x{tb_tile[1]} w{tb_tile[2]}"
        return t, how
    if p.kind == "naive":
        if p.pass_ != "fwd":
            return None, "none: gpusim has no backward of the unfused attention"
        key = ("attention_naive", gpu, tuple(sorted(s.items())), p.dtype)
        if key not in _CACHE:
            r = gpusim.simulate("attention_naive", gpu=gpu, check=False, dtype=p.dtype,
                                **{k: v for k, v in s.items() if k != "causal"})
            _CACHE[key] = (r.time_us if r.status == "ok" else None, r.status)
        return _CACHE[key][0], "attention_naive" + ("" if _CACHE[key][0] else f" ({_CACHE[key][1]})")
    if p.kind == "gemm":
        t, tile = _best("matmul", gpu, s, p.dtype, MATMUL_TILES,
                        ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"))
        return t, "matmul {}x{}x{} w{} s{}".format(*tile)
    key = ("elementwise_fused", gpu, tuple(sorted(s.items())), p.dtype)
    if key not in _CACHE:
        _CACHE[key] = (gpusim.simulate("elementwise_fused", gpu=gpu, check=False, dtype=p.dtype, **s).time_us, None)
    return _CACHE[key][0], "elementwise_fused"


def speed(p: Published, time_us: float) -> float:
    """A time in the published number's unit (TFLOP/s, ms or GB/s)."""
    if p.unit == "ms":
        return time_us / 1e3
    if p.unit == "GB/s":
        return 2.0 * p.shape["n"] * {"fp32": 4, "fp16": 2, "bf16": 2}[p.dtype] / (time_us * 1e3)
    return flops(p) / (time_us * 1e6)


def ratio(p: Published, predicted: float) -> float:
    """Predicted speed over published speed."""
    return p.value / predicted if p.unit == "ms" else predicted / p.value


def verdict(p: Published, predicted: float, rows: list) -> tuple:
    """(inside, the published range of the kind at this shape, the missing mechanism or '')."""
    same = [q for q in rows if q.group == p.group]
    speeds = [q.value if q.unit != "ms" else 1.0 / q.value for q in same]
    mine = predicted if p.unit != "ms" else 1.0 / predicted
    lo, hi = min(speeds), max(speeds)
    inside = lo / 1.1 <= mine <= hi * 1.1
    rng = [q.value for q in same]
    text = f"{min(rng):g}-{max(rng):g}" if len(set(rng)) > 1 else f"{rng[0]:g}"
    if inside:
        return True, text, ""
    if p.kind in ("naive", "flash-v1"):
        why = p.kind
    elif p.kind == "flash" and p.shape.get("seq_len", 1 << 20) <= 1024:
        why = "short"
    else:
        why = "fast" if mine > hi else "slow"
    return False, text, why


def _num(x: float) -> str:
    return f"{x:.0f}" if x >= 1000 else f"{x:.3g}"


def _shape_text(p: Published) -> str:
    s = p.shape
    if "M" in s:
        return f"{s['M']}x{s['N']}x{s['K']} {p.dtype}"
    if "n" in s:
        return f"n = 2^{s['n'].bit_length() - 1} {p.dtype}"
    return (f"B{s['batch']} H{s['heads']} N{s['seq_len']} d{s['head_dim']}"
            + (" causal" if s.get("causal") else "") + f" {p.pass_}")


def table(gpu: str = "a100") -> tuple:
    """(markdown lines, rows as dicts) of every published number against its prediction."""
    rows = load()
    lines = ["| source | A100 | kernel (published) | shape | published | gpusim kernel | predicted | ratio | "
             "inside the kind's range (range) |",
             "| --- | --- | --- | --- | ---: | --- | ---: | ---: | --- |"]
    out, reasons = [], {}
    for p in rows:
        t, how = predict(p, gpu)
        if not t:
            lines.append(f"| {p.source} | {SOURCES[p.source]['gpu']} | {p.kernel} | {_shape_text(p)} | "
                         f"{p.value:g} {p.unit} | {how} | - | - | not simulated |")
            continue
        pred = speed(p, t)
        ok, rng, why = verdict(p, pred, rows)
        r = ratio(p, pred)
        if why:
            reasons.setdefault(why, len(reasons) + 1)
        mark = "yes" if ok else f"no [{reasons[why]}]"
        lines.append(f"| {p.source} | {SOURCES[p.source]['gpu']} | {p.kernel} | {_shape_text(p)} | "
                     f"{p.value:g} {p.unit} | {how} | {_num(pred)} {p.unit} | {r:.2f} | {mark} ({rng}) |")
        out.append(dict(source=p.source, kernel=p.kernel, shape=_shape_text(p), published=p.value, unit=p.unit,
                        predicted=pred, ratio=r, inside=ok, missing=why))
    lines.append("")
    for why, i in sorted(reasons.items(), key=lambda x: x[1]):
        lines.append(f"[{i}] {MISSING[why]}.")
    return lines, out


def summary(out: list) -> list:
    """One line per kind of kernel: how many rows are inside their range and the ratio's spread."""
    import statistics

    lines = []
    for kernel in KINDS:
        rs = [o for o in out if o["kernel"] == kernel]
        if not rs:
            continue
        q = [o["ratio"] for o in rs]
        lines.append(f"- {kernel}: {sum(o['inside'] for o in rs)}/{len(rs)} inside; ratio median "
                     f"{statistics.median(q):.2f}, range {min(q):.2f}-{max(q):.2f}")
    return lines


def _key_of(text: str) -> tuple:
    import ast

    return ast.literal_eval(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="a100")
    ap.add_argument("--cache", help="a JSON file of simulated times to reuse and extend (for repeated runs)")
    a = ap.parse_args(argv)
    os.environ.setdefault("GPUSIM_RESOURCES", "estimated")
    if a.cache and Path(a.cache).exists():
        _CACHE.update({_key_of(k): tuple(v) for k, v in json.loads(Path(a.cache).read_text()).items()})
    lines, out = table(a.gpu)
    if a.cache:
        Path(a.cache).write_text(json.dumps({repr(k): v for k, v in _CACHE.items()}))
    print("\n".join(lines))
    print()
    print("\n".join(summary(out)))
    print()
    print("Sources:")
    for key, s in SOURCES.items():
        print(f"- {key}: {s['title']}. {s['where']}. {s['url']} ({s['gpu']}; {s['setting']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
