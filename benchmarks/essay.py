"""Every number of the essay "Attention Is Memory-Bound" (docs/attention-is-memory-bound.md), from gpusim.

    python benchmarks/essay.py             # from the repository root; prints markdown tables,
                                           # writes docs/figures/essay_*.png
    python benchmarks/essay.py --jobs 1    # simulations one at a time (the default uses up to 4 processes)

All simulations are deterministic: the printed numbers do not depend on --jobs. Section numbers
match the page. Nothing here is typed in by hand except the essay's own figures (quoted for
comparison, marked "essay") and the literature figures of section 6 (marked with their source).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gpusim                                   # noqa: E402
from gpusim.hardware import load_gpu            # noqa: E402

FIG_DIR = ROOT / "docs" / "figures"

# --------------------------------------------------------------------------- the essay's settings
ESSAY_GPU = "a100-80gb-ideal"           # "roughly 2 terabytes per second": the A100 SXM4 80GB datasheet, 2039 GB/s
ESSAY_SHAPE = dict(batch=8, heads=32, seq_len=8192, head_dim=64, dtype="fp16")
SCORE_NS = (2048, 4096, 8192, 16384)     # the essay's score-matrix sizes
ROOFLINE_NS = (1024, 2048, 4096, 8192, 16384)
EW_NS = tuple(2 ** i for i in range(10, 29))         # 1K .. 256M elements
EW_GPUS = ("a100-80gb-ideal", "h100-ideal")
GPT2 = dict(batch=64, heads=16, seq_len=1024, head_dim=64, dtype="fp16")   # FlashAttention paper, GPT-2 medium
BLOCKS = (16, 32, 64, 128, 256)
PEAK_GPUS = ("a100", "a100-80gb", "h100", "h200", "a100-ideal", "h100-ideal")
PEAK_DIMS = (64, 128)
ESSAY = dict(crossings_gb=137, essay_time_ms=70, essay_bw=2.0e12)   # the essay's figures, for comparison


def jobs_list():
    """(key, kernel, gpu, params) for every simulation the page uses."""
    j = []
    for n in ROOFLINE_NS:   # includes the essay's N=8192 case used by section 2
        for k in ("attention_naive", "attention_flash"):
            j.append(((k, ESSAY_GPU, n), k, ESSAY_GPU, dict(ESSAY_SHAPE, seq_len=n)))
    for g in EW_GPUS:
        for n in EW_NS:
            for k in ("elementwise_chain", "elementwise_fused"):
                j.append(((k, g, n), k, g, dict(n=n, dtype="fp16")))
    for bm in BLOCKS:
        for bn in sorted({64, bm}):
            j.append((("block", bm, bn), "attention_flash", ESSAY_GPU, dict(GPT2, BLOCK_M=bm, BLOCK_N=bn)))
    j.append((("gpt2", "attention_naive"), "attention_naive", ESSAY_GPU, dict(GPT2)))
    for g in PEAK_GPUS:
        for d in PEAK_DIMS:
            if (g, d) != (ESSAY_GPU, 64):
                j.append((("peak", g, d), "attention_flash", g, dict(ESSAY_SHAPE, head_dim=d)))
    return j


WHATIF_HBM_BYTES = 512e9   # naive attention's n x n buffers at B8 H32 N 8192 and 16384 (103, 414 GB) exceed the A100's 80 GB


def _run(job):
    """Simulate one job. Naive attention at the essay's size does not fit in the A100's HBM (its
    S, S2 and P buffers alone are 103 GB at N 8192): gpusim reports it infeasible, and the page
    simulates it as a what-if with ``hbm_bytes`` raised to WHATIF_HBM_BYTES (marked where shown)."""
    key, kernel, gpu, params = job
    t = time.perf_counter()
    r = gpusim.simulate(kernel, gpu, check=False, **params)
    if r.status == "infeasible" and "HBM" in (r.reason or ""):
        cfg = load_gpu(gpu).model_copy(update={"hbm_bytes": WHATIF_HBM_BYTES})
        r = gpusim.simulate(kernel, cfg, check=False, **params)
    return key, r, time.perf_counter() - t


def run_all(n_jobs: int) -> dict:
    jobs = jobs_list()
    # biggest first so the pool's tail is short
    jobs.sort(key=lambda j: -(j[3].get("seq_len", 0) ** 2 * j[3].get("batch", 0) * (j[1] == "attention_naive")))
    if n_jobs <= 1:
        out = [_run(j) for j in jobs]
    else:
        with ProcessPoolExecutor(n_jobs) as ex:
            out = list(ex.map(_run, jobs))
    res = {k: r for k, r, _ in out}
    res["_wall"] = {k: dt for k, _, dt in out}
    res[("peak", ESSAY_GPU, 64)] = res[("attention_flash", ESSAY_GPU, ESSAY_SHAPE["seq_len"])]
    bad = [k for k, r in res.items() if k != "_wall" and r.status != "ok"]
    for k in bad:
        print(f"note: {k}: {res[k].status}: {res[k].reason}", file=sys.stderr)
    return res


# --------------------------------------------------------------------------- output helpers
def table(headers, rows):
    """A markdown table (numbers already formatted)."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(headers))) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    print("\n".join(out) + "\n")


def heading(s):
    print(f"\n### {s}\n")


def new_figure(w, h):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig, name):
    FIG_DIR.mkdir(parents=True, exist_ok=True)
    p = FIG_DIR / name
    fig.savefig(p)
    print(f"figure: `{p.relative_to(ROOT)}`\n")


def fmt_n(n):
    return f"2^{int(math.log2(n))}" if n & (n - 1) == 0 else str(n)


# --------------------------------------------------------------------------- 1. score-matrix size
def section1():
    heading("1. Score-matrix size per head, 16-bit (from `gpusim.build('attention_naive', ...)`)")
    rows = []
    for n in SCORE_NS:
        w = gpusim.build("attention_naive", dict(batch=1, heads=1, seq_len=n, head_dim=64, dtype="fp16"))
        s, q = w.tensors["s"], w.tensors["q"]
        rows.append([n, f"{s.shape}", f"{s.nbytes / 1e6:.1f}", f"{q.nbytes / 1e6:.2f}", f"{s.nbytes / q.nbytes:.0f}"])
    table(["N", "S shape", "S per head (MB)", "Q per head, d=64 (MB)", "S / Q = N / d"], rows)


# --------------------------------------------------------------------------- 2. the four crossings
def section2(res):
    cfg = load_gpu(ESSAY_GPU)
    bw = cfg.hbm_read_bandwidth_bytes_per_s
    shape = ESSAY_SHAPE
    w = gpusim.build("attention_naive", shape)
    s_bytes = w.tensors["s"].nbytes
    nn = [t for t in w.tensors.values() if t.shape[-1] == t.shape[-2] == shape["seq_len"]]
    heading(f"2a. Batch {shape['batch']} x {shape['heads']} heads at N={shape['seq_len']}: the score matrices "
            f"(from the built workload)")
    table(["quantity", "value"], [
        ["one n x n tensor (S), all heads and batch", f"{s_bytes / 1e9:.1f} GB"],
        ["four crossings of it (essay: 2 writes + 2 reads)", f"{4 * s_bytes / 1e9:.1f} GB"],
        ["... at 2 TB/s (essay's round figure)", f"{4 * s_bytes / ESSAY['essay_bw'] * 1e3:.1f} ms"],
        [f"... at {bw / 1e9:.0f} GB/s ({ESSAY_GPU} HBM)", f"{4 * s_bytes / bw * 1e3:.1f} ms"],
        [f"n x n buffers gpusim's naive workload allocates ({', '.join(t.name for t in nn)})",
         f"{sum(t.nbytes for t in nn) / 1e9:.1f} GB"],
        [f"{ESSAY_GPU} HBM capacity (config hbm_bytes)", f"{cfg.hbm_bytes / 1e9:.1f} GB"],
    ])

    r = res[("attention_naive", ESSAY_GPU, shape["seq_len"])]
    f = res[("attention_flash", ESSAY_GPU, shape["seq_len"])]
    heading(f"2b. `gpusim.simulate('attention_naive', '{ESSAY_GPU}', batch=8, heads=32, seq_len=8192, head_dim=64)`: "
            f"per launch (what-if: `gpu.hbm_bytes={WHATIF_HBM_BYTES:.3g}`, {WHATIF_HBM_BYTES / 1e9:.0f} GB; on the real {cfg.hbm_bytes / 1e9:.0f} GB part "
            f"gpusim reports it infeasible)")
    rows = []
    for k in r.kernels:
        rows.append([k.launch, "x".join(map(str, k.grid)), f"{k.time_us / 1e3:.2f}", f"{k.dram_read_bytes / 1e9:.2f}",
                     f"{k.dram_write_bytes / 1e9:.2f}", f"{(k.dram_read_bytes + k.dram_write_bytes) / bw * 1e3:.2f}",
                     f"{k.l2_hit_rate:.1%}", f"{k.tensor_busy:.0%}"])
    rows.append(["**total**", "", f"**{r.time_us / 1e3:.2f}**", f"{r.dram_read_bytes / 1e9:.2f}",
                 f"{r.dram_write_bytes / 1e9:.2f}", f"{r.dram_bytes / bw * 1e3:.2f}", f"{r.l2_hit_rate:.1%}", ""])
    table(["launch", "grid", "simulated time (ms)", "DRAM read (GB)", "DRAM write (GB)",
           f"(read+write) / {bw / 1e12:.3f} TB/s (ms)", "L2 hit rate", "tensor pipe busy"], rows)

    qk, sc, sm, pv = (r.launch(x) for x in ("qk", "scale", "softmax", "pv"))
    v_bytes = w.tensors["v"].nbytes
    four = [("S written by qk", qk.dram_write_bytes), ("S read by softmax (as s2, after scale)", sm.dram_read_bytes),
            ("P written by softmax", sm.dram_write_bytes), ("P read by pv (counter includes V)", pv.dram_read_bytes)]
    four_b = sum(b for _, b in four)
    four_t = qk.time_us + sm.time_us + pv.time_us
    six_b = four_b + sc.dram_read_bytes + sc.dram_write_bytes
    heading("2c. The crossings, from the simulated per-launch DRAM counters")
    table(["crossing", "counter", "GB"], [[n, c, f"{b / 1e9:.2f}"] for (n, b), c in zip(four, (
        "qk.dram_write_bytes", "softmax.dram_read_bytes", "softmax.dram_write_bytes", "pv.dram_read_bytes"))]
        + [["V's own bytes inside pv's read (tensor size)", "workload.tensors['v'].nbytes", f"{v_bytes / 1e9:.2f}"],
           ["scale reads S (extra crossing 5)", "scale.dram_read_bytes", f"{sc.dram_read_bytes / 1e9:.2f}"],
           ["scale writes S/sqrt(d) (extra crossing 6)", "scale.dram_write_bytes", f"{sc.dram_write_bytes / 1e9:.2f}"]])
    table(["", "bytes (GB)", "simulated time (ms)", f"bytes / {bw / 1e12:.3f} TB/s (ms)", "essay: bytes / 2 TB/s (ms)"], [
        ["essay's four crossings (qk + softmax + pv)", f"{four_b / 1e9:.1f}", f"{four_t / 1e3:.1f}",
         f"{four_b / bw * 1e3:.1f}", f"{ESSAY['crossings_gb'] * 1e9 / ESSAY['essay_bw'] * 1e3:.1f} (137 GB)"],
        ["gpusim's six crossings (all four launches)", f"{six_b / 1e9:.1f}", f"{r.time_us / 1e3:.1f}",
         f"{six_b / bw * 1e3:.1f}", ""],
        ["all DRAM traffic of the naive workload", f"{r.dram_bytes / 1e9:.1f}", f"{r.time_us / 1e3:.1f}",
         f"{r.dram_bytes / bw * 1e3:.1f}", ""],
    ])
    flops = 4 * shape["batch"] * shape["heads"] * shape["seq_len"] ** 2 * shape["head_dim"]
    peak = cfg.tensor_flops_per_s["fp16"]
    heading("2d. The arithmetic of the same layer, and the fused kernel at the same size")
    table(["quantity", "value"], [
        ["matmul FLOPs, 4 B H N^2 d", f"{flops / 1e12:.2f} TFLOP"],
        ["naive: tensor FLOPs counted by the simulator", f"{r.tensor_flops / 1e12:.2f} TFLOP"],
        [f"... at the {peak / 1e12:.0f} TFLOP/s fp16 tensor peak", f"{flops / peak * 1e3:.1f} ms"],
        ["naive: simulated time", f"{r.time_us / 1e3:.1f} ms ({flops / r.time_us / 1e6:.0f} TFLOP/s of matmul, "
                                  f"{flops / r.time_us / 1e6 / (peak / 1e12):.0%} of peak)"],
        ["attention_flash (BLOCK_M 128, BLOCK_N 64): simulated time",
         f"{f.time_us / 1e3:.1f} ms ({flops / f.time_us / 1e6:.0f} TFLOP/s of matmul, "
         f"{flops / f.time_us / 1e6 / (peak / 1e12):.0%} of peak)"],
        ["attention_flash: DRAM read + write", f"{f.dram_bytes / 1e9:.2f} GB (Q, K, V read, O written: "
                                               f"{4 * w.tensors['q'].nbytes / 1e9:.2f} GB)"],
        ["speedup flash / naive", f"{r.time_us / f.time_us:.1f}x"],
    ])

    fig = new_figure(10, 4.2)
    a1, a2 = fig.subplots(1, 2)
    names = [k.launch for k in r.kernels] + ["flash"]
    rd = [k.dram_read_bytes / 1e9 for k in r.kernels] + [f.dram_read_bytes / 1e9]
    wr = [k.dram_write_bytes / 1e9 for k in r.kernels] + [f.dram_write_bytes / 1e9]
    x = range(len(names))
    a1.bar(x, rd, color="tab:blue", label="DRAM read")
    a1.bar(x, wr, bottom=rd, color="tab:orange", label="DRAM write")
    a1.axhline(s_bytes / 1e9, color="gray", ls=":", lw=1)
    a1.text(4, s_bytes / 1e9 + 1.5, f"one n x n matrix\n= {s_bytes / 1e9:.1f} GB", fontsize=8, color="gray",
            ha="center", va="bottom")
    a1.set_xticks(list(x), names)
    a1.set_ylabel("HBM traffic (GB)")
    a1.set_title("HBM bytes per launch")
    a1.legend(loc="upper right")
    t = [k.time_us / 1e3 for k in r.kernels] + [f.time_us / 1e3]
    cols = ["tab:red", "tab:gray", "tab:red", "tab:red", "tab:green"]
    a2.bar(x, t, color=cols)
    for i, v in enumerate(t):
        a2.text(i, v + 0.5, f"{v:.1f}", ha="center", fontsize=8)
    a2.set_xticks(list(x), names)
    a2.set_ylabel("simulated time (ms)")
    from matplotlib.patches import Patch

    a2.legend(handles=[Patch(color="tab:red", label=f"the essay's four crossings ({four_t / 1e3:.1f} ms)"),
                       Patch(color="tab:gray", label="gpusim's extra scale pass"),
                       Patch(color="tab:green", label="fused (FlashAttention)")], fontsize=8, loc="upper right")
    a2.set_ylim(0, max(t) * 1.3)
    a2.set_title("simulated time per launch")
    fig.suptitle(f"Naive attention (4 launches) vs flash, B8 H32 N8192 d64 fp16 on {ESSAY_GPU} (gpusim)")
    save(fig, "essay_naive_launches.png")


# --------------------------------------------------------------------------- 3. elementwise fusion
def section3(res):
    heading("3. Elementwise chain (x*1.5, +0.25, relu) as three launches vs one fused launch, fp16")
    rows, ratios, bratios = [], {}, {}
    for n in EW_NS:
        row = [fmt_n(n), f"{n * 2 / 2 ** 20:.3g}"]
        for g in EW_GPUS:
            c, fu = res[("elementwise_chain", g, n)], res[("elementwise_fused", g, n)]
            ratios.setdefault(g, []).append(c.time_us / fu.time_us)
            bratios.setdefault(g, []).append(c.dram_bytes / fu.dram_bytes)
            row += [f"{c.time_us:.1f}", f"{fu.time_us:.1f}", f"**{c.time_us / fu.time_us:.2f}**",
                    f"{c.dram_bytes / fu.dram_bytes:.2f}"]
        rows.append(row)
    hdr = ["n", "tensor (MiB)"]
    for g in EW_GPUS:
        hdr += [f"{g} chain (us)", f"{g} fused (us)", f"{g} time ratio", f"{g} DRAM-bytes ratio"]
    table(hdr, rows)
    cfgs = {g: load_gpu(g) for g in EW_GPUS}
    big = EW_NS[-1]
    g0 = EW_GPUS[0]
    c, fu = res[("elementwise_chain", g0, big)], res[("elementwise_fused", g0, big)]
    cfg = cfgs[g0]
    table([f"at n = {fmt_n(big)} on {g0}", "chain", "fused", "ratio"], [
        ["DRAM read + write (GB)", f"{c.dram_bytes / 1e9:.2f}", f"{fu.dram_bytes / 1e9:.2f}",
         f"{c.dram_bytes / fu.dram_bytes:.2f}"],
        ["simulated time (us)", f"{c.time_us:.1f}", f"{fu.time_us:.1f}", f"{c.time_us / fu.time_us:.2f}"],
        ["launches", len(c.kernels), len(fu.kernels), ""],
        [f"launch overhead ({cfg.launch_overhead_us:g} us each) + one sync ({cfg.sync_overhead_us:g} us), us",
         f"{len(c.kernels) * cfg.launch_overhead_us + cfg.sync_overhead_us:g}",
         f"{cfg.launch_overhead_us + cfg.sync_overhead_us:g}",
         f"{(len(c.kernels) * cfg.launch_overhead_us + cfg.sync_overhead_us) / (cfg.launch_overhead_us + cfg.sync_overhead_us):.2f}"],
    ])
    print("L2 sizes: " + ", ".join(f"{g} {cfgs[g].l2_bytes / 2 ** 20:.0f} MiB (one fp16 tensor of n = "
                                   f"{cfgs[g].l2_bytes / 2:.3g} elements)" for g in EW_GPUS) + "\n")

    fig = new_figure(8, 4.8)
    ax = fig.subplots()
    cols = {EW_GPUS[0]: "tab:blue", EW_GPUS[1]: "tab:orange"}
    for g, m in zip(EW_GPUS, ("o", "s")):
        ax.plot(EW_NS, ratios[g], marker=m, color=cols[g], label=f"{g}: time ratio")
        ax.plot(EW_NS, bratios[g], ls=":", color=cols[g], lw=1.2, label=f"{g}: DRAM-bytes ratio")
        ax.axvline(cfgs[g].l2_bytes / 2, color=cols[g], ls="--", lw=0.8)
        ax.text(cfgs[g].l2_bytes / 2 * (0.93 if g == EW_GPUS[0] else 1.07), 2.55 if g == EW_GPUS[0] else 2.45,
                f"tensor = {g} L2\n({cfgs[g].l2_bytes / 2 ** 20:.0f} MiB)", fontsize=7, color=cols[g],
                ha="right" if g == EW_GPUS[0] else "left")
    ax.axhline(3, color="gray", ls="--", lw=0.8)
    ax.axhline(2, color="gray", ls="--", lw=0.8)
    ax.text(EW_NS[0], 3.03, "3x: 3 reads + 3 writes vs 1 + 1", fontsize=8, color="gray")
    ax.text(EW_NS[0], 2.08, "2x at small n: (3 launches + sync) / (1 launch + sync)\n"
            "2x up to the L2 size: intermediates are re-read from L2", fontsize=8, color="gray")
    ax.set_xscale("log", base=2)
    ax.set_ylim(1.8, 3.25)
    ax.set_xlabel("elements n (fp16; one tensor = 2n bytes)")
    ax.set_ylabel("chain (3 launches) / fused (1 launch)")
    ax.set_title("Fusing scale + bias + relu: speedup vs tensor size (gpusim)")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(0.0, 0.62))
    ax.grid(alpha=0.3)
    save(fig, "essay_fusion_ratio.png")


# --------------------------------------------------------------------------- 4. roofline
def section4(res):
    cfg = load_gpu(ESSAY_GPU)
    cfg40 = load_gpu("a100-ideal")
    r80, r40 = cfg.ridge_flop_per_byte("fp16"), cfg40.ridge_flop_per_byte("fp16")
    heading(f"4. Roofline: B8 H32 d64 fp16 on {ESSAY_GPU} (ridge {r80:.0f} FLOP/B; a100 40GB ridge {r40:.0f} FLOP/B)")
    rows, pts = [], {}
    for n in ROOFLINE_NS:
        for k in ("attention_naive", "attention_flash"):
            r = res[(k, ESSAY_GPU, n)]
            pts.setdefault(k, []).append((n, r.arithmetic_intensity, r.tensor_flops / r.time_us / 1e6))
            rows.append([k, n, f"{r.flops / 1e12:.2f}", f"{r.dram_bytes / 1e9:.2f}", f"{r.arithmetic_intensity:.1f}",
                         f"{r.ridge_flop_per_byte:.0f}", f"**{r.bound}**",
                         "compute" if r.arithmetic_intensity >= r40 else "memory", f"{r.time_us / 1e3:.2f}",
                         f"{r.tensor_flops / r.time_us / 1e6:.1f}"])
    table(["kernel", "N", "FLOPs (T)", "DRAM r+w (GB)", "Result.arithmetic_intensity (FLOP/B)",
           f"ridge {ESSAY_GPU}", "Result.bound", f"bound vs a100 40GB ridge {r40:.0f}", "time (ms)",
           "tensor TFLOP/s"], rows)

    fig = new_figure(7.5, 5)
    ax = fig.subplots()
    import numpy as np

    xs = np.logspace(0, 4, 200)
    for c, ls, lab in ((cfg, "-", f"{ESSAY_GPU}: {cfg.tensor_flops_per_s['fp16'] / 1e12:.0f} TFLOP/s, "
                                     f"{cfg.hbm_read_bandwidth_bytes_per_s / 1e12:.2f} TB/s"),
                       (cfg40, "--", f"a100 (40GB): {cfg40.tensor_flops_per_s['fp16'] / 1e12:.0f} TFLOP/s, "
                                     f"{cfg40.hbm_read_bandwidth_bytes_per_s / 1e12:.2f} TB/s")):
        roof = np.minimum(c.tensor_flops_per_s["fp16"], xs * c.hbm_read_bandwidth_bytes_per_s) / 1e12
        ax.plot(xs, roof, color="black", ls=ls, lw=1.2, label="roof " + lab)
        rp = c.ridge_flop_per_byte("fp16")
        ax.axvline(rp, color="gray", ls=ls, lw=0.7)
        ax.text(rp * 1.05, 6 if c is cfg else 8, f"ridge {rp:.0f}", fontsize=8, color="gray")
    for k, m, col in (("attention_naive", "o", "tab:red"), ("attention_flash", "s", "tab:green")):
        p = pts[k]
        ax.plot([a for _, a, _ in p], [t for _, _, t in p], m, color=col, ms=7, label=k.replace("attention_", "") +
                " attention (simulated)")
        if k.endswith("naive"):
            ax.annotate(f"naive, N={p[0][0]}..{p[-1][0]}:\nintensity {min(a for _, a, _ in p):.0f}-"
                        f"{max(a for _, a, _ in p):.0f} FLOP/B\nwhatever N (points overlap)", (p[0][1], p[0][2]),
                        textcoords="offset points", xytext=(12, -40), fontsize=8, arrowprops=dict(arrowstyle="->"))
        else:
            for n, a, t in p:
                ax.annotate(f"N={n}", (a, t), textcoords="offset points", xytext=(-14, -14), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(3, 2e4)
    ax.set_ylim(5, 600)
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
    ax.set_ylabel("attained matmul TFLOP/s (tensor FLOPs / time)")
    ax.set_title("Roofline: naive vs flash attention, B8 H32 d64 fp16 (gpusim)")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3, which="both")
    save(fig, "essay_roofline.png")


# --------------------------------------------------------------------------- 5. block size
def section5(res):
    g = GPT2
    bh = g["batch"] * g["heads"]
    w = gpusim.build("attention_flash", g)
    q, kv = w.tensors["q"].nbytes, w.tensors["k"].nbytes + w.tensors["v"].nbytes
    heading(f"5. Tile size vs traffic: attention_flash, B{g['batch']} H{g['heads']} N{g['seq_len']} d{g['head_dim']} "
            f"fp16 on {ESSAY_GPU} (num_stages 2)")
    rows, ser = [], {}
    for bm in BLOCKS:
        for bn in sorted({64, bm}):
            r = res[("block", bm, bn)]
            if r.status != "ok":
                rows.append([bm, bn, "", "", "", "", "", f"{r.status}: {r.reason}"])
                continue
            k = r.kernels[0]
            model = q + g["seq_len"] // bm * kv
            ser.setdefault(bn == 64, []).append((bm, r))
            rows.append([bm, bn, f"{g['seq_len'] // bm}", f"{r.l2_read_bytes / 1e9:.2f}", f"{model / 1e9:.2f}",
                         f"{r.dram_bytes / 1e9:.3f}", f"{r.time_us:.0f}",
                         f"{k.ctas_per_sm} ({k.occupancy_limiter}), tensor busy {k.tensor_busy:.0%}"])
    table(["BLOCK_M", "BLOCK_N", "K/V passes N/BLOCK_M", "L2->SRAM read (GB)", "Q + (N/BLOCK_M)(K+V) (GB)",
           "DRAM r+w (GB)", "time (us)", "CTAs/SM (limiter), tensor busy"], rows)
    floor = 4 * bh * g["seq_len"] ** 2 * g["head_dim"] / load_gpu(ESSAY_GPU).tensor_flops_per_s["fp16"] * 1e6
    naive = res[("gpt2", "attention_naive")]
    best = min((r for _, r in ser[True]), key=lambda r: r.time_us)
    table(["forward pass, same shape", "time (us)", "DRAM r+w (GB)"], [
        ["attention_naive", f"{naive.time_us:.0f}", f"{naive.dram_bytes / 1e9:.2f}"],
        [f"attention_flash (fastest above, BLOCK_M {best.params['BLOCK_M']})", f"{best.time_us:.0f}",
         f"{best.dram_bytes / 1e9:.3f}"],
        ["ratio", f"{naive.time_us / best.time_us:.1f}x", f"{naive.dram_bytes / best.dram_bytes:.1f}x"],
        [f"matmul FLOPs 4BHN^2d at the {ESSAY_GPU} fp16 tensor peak", f"{floor:.0f}", ""],
    ])

    fig = new_figure(7.5, 6.5)
    a1, a2 = fig.subplots(2, 1, sharex=True)
    main = ser[True]
    bms = [bm for bm, _ in main]
    a1.plot(bms, [r.l2_read_bytes / 1e9 for _, r in main], "o-", color="tab:blue",
            label="L2 -> SRAM reads (the paper's 'HBM accesses': no L2 in its model)")
    a1.plot(bms, [(q + g["seq_len"] // bm * kv) / 1e9 for bm in bms], "k:", lw=1, label="Q + (N / BLOCK_M)(K + V)")
    a1.plot(bms, [r.dram_bytes / 1e9 for _, r in main], "s-", color="tab:orange",
            label="DRAM read + write (K/V re-reads hit L2)")
    a1.set_yscale("log")
    a1.set_ylabel("bytes moved (GB)")
    a1.legend(fontsize=8)
    a1.grid(alpha=0.3, which="both")
    a1.set_title(f"FlashAttention tile size, N{g['seq_len']} d{g['head_dim']} B{g['batch']} H{g['heads']} on "
                 f"{ESSAY_GPU} (gpusim)")
    a2.plot(bms, [r.time_us for _, r in main], "o-", color="tab:green", label="BLOCK_N = 64")
    eq = ser.get(False, []) + [(bm, r) for bm, r in main if bm == 64]
    eq.sort(key=lambda t: t[0])
    a2.plot([bm for bm, _ in eq], [r.time_us for _, r in eq], "^--", color="tab:purple", label="BLOCK_N = BLOCK_M")
    a2.axhline(floor, color="gray", ls=":", lw=1)
    a2.text(bms[0], floor * 0.88, f"matmul FLOPs at the fp16 tensor peak: {floor:.0f} us", fontsize=8, color="gray")
    a2.set_ylabel("simulated time (us)")
    a2.set_xlabel("BLOCK_M (query rows per CTA = Q tile; K/V streamed N / BLOCK_M times)")
    a2.set_xscale("log", base=2)
    a2.set_xticks(bms, [str(b) for b in bms])
    a2.set_ylim(0, None)
    a2.legend(fontsize=8)
    a2.grid(alpha=0.3)
    save(fig, "essay_block_size.png")


# --------------------------------------------------------------------------- 6. % of peak
LITERATURE = [
    ("FlashAttention-2, A100", "up to 230 TFLOP/s, 73% of peak", "FA2 paper (Dao 2023), via the essay and hardware.md"),
    ("FlashAttention-2, H100", "about 35% utilisation", "FA3 paper (Shah et al. 2024), via the essay and hardware.md"),
    ("FlashAttention-3, H100, BF16", "up to 840 TFLOP/s, about 75-85%", "FA3 paper, via the essay and hardware.md"),
    ("FlashAttention-3, H100, FP8", "1.3 PFLOP/s", "FA3 paper, via the essay"),
    ("FlashAttention, GPT-2 medium fwd+bwd, A100", "standard 40.3 GB HBM, 41.7 ms; flash 4.4 GB, 7.3 ms",
     "Dao et al. 2022, Fig. 2, via hardware.md"),
    ("what good looks like", "70-85% of peak", "the essay"),
]


def section6(res):
    heading("6a. Literature figures (context, not gpusim output)")
    table(["kernel / GPU", "reported", "source"], [list(x) for x in LITERATURE])
    s = ESSAY_SHAPE
    heading(f"6b. gpusim's attention_flash forward (BLOCK_M 128, BLOCK_N 64) at B{s['batch']} H{s['heads']} "
            f"N{s['seq_len']} fp16, as % of the config's fp16 tensor peak")
    rows = []
    for g in PEAK_GPUS:
        cfg = load_gpu(g)
        peak = cfg.tensor_flops_per_s["fp16"]
        for d in PEAK_DIMS:
            r = res[("peak", g, d)]
            fl = 4 * s["batch"] * s["heads"] * s["seq_len"] ** 2 * d
            k = r.kernels[0]
            rows.append([g, d, f"{r.time_us / 1e3:.2f}", f"{fl / r.time_us / 1e6:.0f}", f"{peak / 1e12:.0f}",
                         f"**{fl / r.time_us / 1e6 / (peak / 1e12):.0%}**", f"{k.tensor_busy:.0%}",
                         f"{k.ctas_per_sm} ({k.occupancy_limiter})"])
    table(["GPU config", "d", "time (ms)", "TFLOP/s (4BHN^2d / time)", "peak TFLOP/s", "% of peak",
           "tensor pipe busy", "CTAs/SM (limiter)"], rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="simulation processes")
    args = ap.parse_args()
    t0 = time.perf_counter()
    gpusim.simulate("elementwise_fused", "h100", n=4096)   # load numba's cached L2 kernel once
    res = run_all(args.jobs)
    print(f"# gpusim reproduction of 'Attention Is Memory-Bound' (gpusim {gpusim.__version__}, "
          f"`python benchmarks/essay.py`)\n")
    section1()
    section2(res)
    section3(res)
    section4(res)
    section5(res)
    section6(res)
    walls = res["_wall"]
    big = ("attention_naive", ESSAY_GPU, ESSAY_SHAPE["seq_len"])
    rb = res[big]
    print(f"simulations: {len(walls)}; the naive B8 H32 N8192 case ({sum(k.total_ctas for k in rb.kernels)} CTAs, "
          f"{sum(k.simulated_ctas for k in rb.kernels)} of them simulated) took {walls[big]:.1f} s of wall time; "
          f"whole script {time.perf_counter() - t0:.0f} s with --jobs {args.jobs}")


if __name__ == "__main__":
    main()
