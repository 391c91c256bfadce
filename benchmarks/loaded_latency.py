"""How a streamed tile's round trip grows with the DRAM's load, from the recorded stream_ctas and
stream_occ microbenchmarks (benchmarks/kernels/stream_cols.py on the H200: 1 to 396 CTAs, each
streaming its own HBM-resident panel, 2 or 3 stages).

Per (BLOCK_K, stages): the cycles per tile at 1 CTA and at N CTAs; with k = stages - 1 tiles in
flight a CTA's round trip is about k x the cycles per tile, so its growth is dRT = k x (T_N - T_1).
The DRAM's utilisation u is the measured bytes read over the time over the peak read rate. A queue
whose response time scales as 1 / (1 - u) gives dRT = c x (u / (1 - u) - u1 / (1 - u1)); c is
printed per pair and their median beside the idle HBM latency of the config (hbm_latency_cycles),
the scale that backends/sim/loaded_latency.py LoadedLatency uses. Nothing here is fitted into a config.

usage: python benchmarks/loaded_latency.py [--gpu configs/h200.yaml]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim.hardware import load_gpu  # noqa: E402
from gpusim.hw.validate.rows import load_validation  # noqa: E402

MICRO = ROOT / "data" / "h200" / "micro"


def points(name: str) -> list:
    data = load_validation(MICRO / name)
    out = []
    for r in data["points"]:
        m = r.get("measured") or {}
        if r.get("status") != "ok" or not m.get("total_us"):
            continue
        p = r["params"]
        us = statistics.median(m["total_us"])
        dram = p["ctas"] * p["BLOCK_N"] * p["cols"] * 2        # each CTA reads its own fp16 panel once
        out.append({"BLOCK_K": p["BLOCK_K"], "stages": p["num_stages"], "ctas": p["ctas"], "us": us,
                    "tiles": p["cols"] // p["BLOCK_K"], "dram_bytes": dram})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default=str(ROOT / "configs" / "h200.yaml"))
    args = ap.parse_args(argv)
    cfg = load_gpu(args.gpu)
    clk, peak = cfg.clock_hz, cfg.hbm_read_bandwidth_bytes_per_s
    rows = points("val_stream_ctas") + points("val_stream_occ")
    base = {(r["BLOCK_K"], r["stages"]): r for r in rows if r["ctas"] == 1}
    cs = []
    print(f"{'BLOCK_K':>7s} {'stages':>6s} {'CTAs':>5s} {'cyc/tile':>8s} {'u':>5s} {'dRT':>6s} {'c':>6s}")
    for r in sorted(rows, key=lambda r: (r["BLOCK_K"], r["stages"], r["ctas"])):
        b = base.get((r["BLOCK_K"], r["stages"]))
        if b is None or r is b or r["stages"] > 3:
            continue
        k = r["stages"] - 1
        t = r["us"] * 1e-6 * clk / r["tiles"]
        t1 = b["us"] * 1e-6 * clk / b["tiles"]
        u = r["dram_bytes"] / (r["us"] * 1e-6) / peak
        u1 = b["dram_bytes"] / (b["us"] * 1e-6) / peak
        drt = k * (t - t1)
        x = u / (1 - u) - u1 / (1 - u1)
        c = drt / x if x > 0.05 else None
        if c is not None:
            cs.append(c)
        print(f"{r['BLOCK_K']:7d} {r['stages']:6d} {r['ctas']:5d} {t:8.0f} {u:5.2f} {drt:6.0f} "
              f"{'' if c is None else f'{c:6.0f}'}")
    print(f"median c over {len(cs)} pairs with u/(1-u) > 0.05: {statistics.median(cs):.0f} cycles "
          f"(quartiles {statistics.quantiles(cs, n=4)[0]:.0f} .. {statistics.quantiles(cs, n=4)[2]:.0f}); "
          f"{cfg.name} hbm_latency_cycles {cfg.hbm_latency_cycles:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
