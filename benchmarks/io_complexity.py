"""FlashAttention's IO complexity (Dao et al. 2022, Theorem 2) against the SRAM size M, from gpusim.

    python benchmarks/io_complexity.py            # from the repository root; prints markdown tables,
                                                  # writes docs/figures/io_complexity.png
    python benchmarks/io_complexity.py --jobs 1   # one simulation at a time (default: 2 processes)

For each SRAM size M the GPU config's ``sram_bytes_per_sm`` and ``sram_bytes_per_cta_max`` are set
to M and ``attention_flash`` runs with Algorithm 1's tile sizes for that M (``algorithm1_tiles``).
The page docs/io-complexity.md quotes this script's output; nothing there is typed in by hand.
"""
from __future__ import annotations

import argparse
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gpusim                                   # noqa: E402
from gpusim.hardware import load_gpu            # noqa: E402

FIG_DIR = ROOT / "docs" / "figures"
GPU = "h200"
SHAPE = dict(batch=2, heads=16, seq_len=4096, dtype="fp16", causal=False)
HEAD_DIMS = (64, 128)
KIB = 1024
SRAM_SIZES = tuple(KIB * 2 ** i for i in range(3, 9))        # 8 KiB .. 256 KiB (the H200 has 228 KiB)
SMALL_L2 = 2 * 1024 * KIB           # a what-if L2 of 2 MiB: smaller than one head's K and V at d = 128
DTYPE_BYTES = 2
TILE_RANGE = (16, 256)              # the tile sizes attention_flash accepts (powers of two)


def floor_pow2(x: float) -> int:
    return 1 << int(math.floor(math.log2(x))) if x >= 1 else 0


def algorithm1_tiles(sram_bytes: int, d: int, dtype_bytes: int = DTYPE_BYTES):
    """(BLOCK_M, BLOCK_N, num_stages) for SRAM size M from Algorithm 1, or None if M is too small.

    Algorithm 1 takes column blocks of Bc = ceil(M / 4d) and row blocks of Br = min(Bc, d) (M in
    elements): the K_j, V_j block stays on chip while Q_i, O_i stream past it, so the streamed
    tensors are read N / Bc times. attention_flash loops the other way round (FlashAttention-2's
    order): its Q block of BLOCK_M rows stays on chip and K, V stream past it in BLOCK_N steps, so
    Bc maps to BLOCK_M and Br to BLOCK_N. Both round down to the powers of two a Triton tile
    needs; num_stages is 2 where a second K/V buffer still fits in M, else 1."""
    bc = floor_pow2(sram_bytes / (4 * d * dtype_bytes))
    if bc < TILE_RANGE[0]:
        return None
    bm = min(bc, TILE_RANGE[1])
    bn = max(TILE_RANGE[0], min(bm, floor_pow2(d)))
    q_bytes, kv_stage = bm * d * dtype_bytes, 2 * bn * d * dtype_bytes
    stages = 2 if q_bytes + 2 * kv_stage <= sram_bytes else 1
    return bm, bn, stages


def closed_form_bytes(batch_heads: int, n: int, d: int, block_m: int, dtype_bytes: int = DTYPE_BYTES) -> float:
    """L2 -> SRAM bytes of attention_flash: Q once, K and V once per query block (ceil(N / BLOCK_M) passes)."""
    return batch_heads * n * d * dtype_bytes * (1 + 2 * math.ceil(n / block_m))


def asymptotic_bytes(batch_heads: int, n: int, d: int, sram_bytes: int, dtype_bytes: int = DTYPE_BYTES) -> float:
    """Theorem 2's Theta(N^2 d^2 / M) with Algorithm 1's constant: 2 N d passes of N / Bc, Bc = M / 4d."""
    return batch_heads * 8.0 * n * n * d * d * dtype_bytes ** 2 / sram_bytes


def gpu_with(sram_bytes: int, l2_bytes: int | None = None):
    """The H200 config with its SRAM (per SM and per CTA) set to M, and optionally its L2 resized."""
    cfg = load_gpu(GPU)
    upd = {"sram_bytes_per_sm": sram_bytes, "sram_bytes_per_cta_max": sram_bytes}
    if l2_bytes:
        upd["l2_bytes"] = l2_bytes
    return cfg.model_validate({**cfg.model_dump(), **upd})


def params_for(sram_bytes: int, d: int, shape: dict = SHAPE):
    tiles = algorithm1_tiles(sram_bytes, d)
    if tiles is None:
        return None
    bm, bn, stages = tiles
    return dict(shape, head_dim=d, BLOCK_M=bm, BLOCK_N=bn, num_stages=stages, num_warps=4 if bm <= 64 else 8)


def _run(job):
    key, p, sram, l2 = job
    return key, gpusim.simulate("attention_flash", gpu_with(sram, l2), check=False, **p)


def jobs_list():
    out = []
    for d in HEAD_DIMS:
        for m in SRAM_SIZES:
            p = params_for(m, d)
            if p is not None:
                for l2 in (None, SMALL_L2):
                    out.append(((d, m, l2), p, m, l2))
    return out


def run_all(n_jobs: int) -> dict:
    jobs = jobs_list()
    if n_jobs <= 1:
        return dict(_run(j) for j in jobs)
    with ProcessPoolExecutor(n_jobs) as ex:
        return dict(ex.map(_run, jobs))


def table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(headers))) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    print("\n".join(out) + "\n")


def report(res: dict) -> None:
    bh, n = SHAPE["batch"] * SHAPE["heads"], SHAPE["seq_len"]
    print(f"*Output of `python benchmarks/io_complexity.py`: attention_flash, B{SHAPE['batch']} H{SHAPE['heads']} "
          f"N{n} fp16 on {GPU} with sram_bytes_per_sm = sram_bytes_per_cta_max = M; tiles from Algorithm 1*\n")
    for d in HEAD_DIMS:
        rows = []
        for m in SRAM_SIZES:
            if (d, m, None) not in res:
                rows.append([f"{m // KIB}", "-", "-", "-", "M < 64 d bytes: Bc < 16", "", "", "", "", ""])
                continue
            r, rs = res[(d, m, None)], res[(d, m, SMALL_L2)]
            p = r.params
            if r.status != "ok":
                rows.append([f"{m // KIB}", p["BLOCK_M"], p["BLOCK_N"], p["num_stages"], r.status, "", "", "", "", ""])
                continue
            cf = closed_form_bytes(bh, n, d, p["BLOCK_M"])
            k = r.kernels[0]
            rows.append([f"{m // KIB}", p["BLOCK_M"], p["BLOCK_N"], p["num_stages"],
                         f"{r.sram_read_bytes / 1e9:.3f}", f"{cf / 1e9:.3f}",
                         f"{asymptotic_bytes(bh, n, d, m) / 1e9:.3f}",
                         f"{(r.dram_read_bytes + r.dram_write_bytes) / 1e9:.3f}",
                         f"{(rs.dram_read_bytes + rs.dram_write_bytes) / 1e9:.3f}",
                         f"{r.time_us:.0f} / {rs.time_us:.0f}, {k.ctas_per_sm} ({k.occupancy_limiter})"])
        print(f"**head_dim {d}**\n")
        table(["M (KiB)", "BLOCK_M = Bc", "BLOCK_N = Br", "stages", "L2->SRAM (GB)", "Q + (N/Bc)(K+V) (GB)",
               "8BHN^2d^2/M (GB)", "DRAM r+w, 60 MiB L2 (GB)", f"DRAM r+w, {SMALL_L2 // (1024 * KIB)} MiB L2 (GB)",
               "time us (60 MiB / small L2), CTAs/SM"], rows)


def figure(res: dict) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    bh, n = SHAPE["batch"] * SHAPE["heads"], SHAPE["seq_len"]
    fig = Figure(figsize=(10, 5.2), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax, ax2 = fig.subplots(1, 2)
    colors = {64: "tab:blue", 128: "tab:orange"}
    for d in HEAD_DIMS:
        pts = [(m, res[(d, m, None)], res[(d, m, SMALL_L2)]) for m in SRAM_SIZES
               if (d, m, None) in res and res[(d, m, None)].status == "ok"]
        ms = [m / KIB for m, _, _ in pts]
        c = colors[d]
        ax.plot(ms, [r.sram_read_bytes / 1e9 for _, r, _ in pts], "o-", color=c, label=f"d={d}: L2->SRAM (simulated)")
        ax.plot(ms, [asymptotic_bytes(bh, n, d, m) / 1e9 for m, _, _ in pts], ":", color=c,
                label=f"d={d}: 8BHN²d²/M (Theorem 2)")
        ax.plot(ms, [(r.dram_read_bytes + r.dram_write_bytes) / 1e9 for _, r, _ in pts], "s--", color=c, alpha=0.6,
                label=f"d={d}: DRAM, 60 MiB L2")
        ax.plot(ms, [(s.dram_read_bytes + s.dram_write_bytes) / 1e9 for _, _, s in pts], "^-.", color=c, alpha=0.6,
                label=f"d={d}: DRAM, 2 MiB L2")
        ax2.plot(ms, [r.time_us / 1e3 for _, r, _ in pts], "o-", color=c, label=f"d={d}, 60 MiB L2")
        ax2.plot(ms, [s.time_us / 1e3 for _, _, s in pts], "^-.", color=c, alpha=0.6, label=f"d={d}, 2 MiB L2")
        floor_ms = 4.0 * bh * n * n * d / load_gpu(GPU).tensor_flops_per_s["fp16"] * 1e3
        ax2.axhline(floor_ms, color=c, ls=":", lw=1, label=f"d={d}: 4BHN²d FLOPs at the fp16 tensor peak")
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        a.set_xlabel("SRAM per SM, M (KiB)")
        a.axvline(228, color="grey", lw=0.8, ls="--")
        a.grid(True, which="both", alpha=0.3)
    ax.set_yscale("log")
    ax.set_ylabel("bytes moved (GB)")
    ax.set_title("traffic: Theta(N²d²/M) lands on the L2, not on HBM")
    ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    ax2.set_ylabel("simulated time (ms)")
    ax2.set_title(f"time, B{SHAPE['batch']} H{SHAPE['heads']} N{n} on {GPU} (dashed: its 228 KiB)")
    ax2.set_ylim(bottom=0)
    ax2.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    FIG_DIR.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIG_DIR / "io_complexity.png")
    print(f"figure: `docs/figures/io_complexity.png`\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    res = run_all(args.jobs)
    report(res)
    figure(res)


if __name__ == "__main__":
    main()
