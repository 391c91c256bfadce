"""How fast measured split-K GEMVs that spill reload their registers: the cycles each spill reload
(LDL) in a CTA's loop takes on the GPU, if the loop's reloads ran one after another per warp.

For every recorded H100 point of ``gemv_splitk`` whose simulation spills: its kernel is compiled
(Triton's compiler, no GPU) for the LDL and STL count of one loop iteration per thread, and
measured time x clock / (waves x trips x LDL per iteration) is printed beside measured /
simulated. Where the simulation is far too fast, that figure clusters near a third of the L2
round trip (``l2_latency_cycles``): a warp keeps only a few reloads in flight. The scoreboard
(``backends/sim/warp.py``) now limits them (``spill_reloads_in_flight_per_warp``); the figures
read the stored breakdowns, so run against the simulations made before that limit.

usage: python benchmarks/spill_reload_chain.py [--jobs 2]      # about 2 min on 2 cores, needs triton
"""
from __future__ import annotations

import argparse
import math
import sys
from multiprocessing import Pool
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))


def one(row) -> dict:
    from gpusim import kernels
    from gpusim.compiler.view import compiled
    from gpusim.hardware import load_gpu

    cfg = load_gpu("h100")
    _, _, kernel, p, measured, b = row
    launch = kernels.build(kernel, p).launches[0]
    loop = dict(compiled(launch.program, cfg, grid=launch.grid).sass_loop)
    k = b["kernels"][0]
    trips = math.ceil(p["K"] / p["SPLIT_K"] / p["BLOCK_K"])
    waves = math.ceil(k["total_ctas"] / (cfg.sm_count * k["ctas_per_sm"]))
    chain = waves * trips * loop.get("LDL", 0)
    return {"ratio": measured / b["time_us"], "per_ldl": measured * 1e-6 * b["clock_hz"] / chain if chain else None,
            "ldl": loop.get("LDL", 0), "stl": loop.get("STL", 0), "trips": trips, "waves": waves,
            "ctas_per_sm": k["ctas_per_sm"], "warps": p["num_warps"], "measured_us": measured,
            "tile": f"{p['BLOCK_M']}x{p['BLOCK_N']}x{p['BLOCK_K']}"}


def main(argv=None) -> int:
    import fit_calibration as FC
    from gpusim.hardware import load_gpu

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    rows = [r for r in FC.load_rows("h100") if r[2] == "gemv_splitk" and any(k.get("spills") for k in r[5]["kernels"])]
    with Pool(a.jobs) as pool:
        out = [d for d in pool.map(one, rows) if d["per_ldl"]]
    out.sort(key=lambda d: -d["ratio"])
    print(f"{len(rows)} spilling split-K GEMV points on the H100, {len(out)} with reloads in the loop; "
          f"l2_latency_cycles {load_gpu('h100').l2_latency_cycles:.0f}")
    print("measured/simulated  cycles per LDL  LDL  STL  trips  waves  CTAs/SM  warps  measured us  tile")
    for d in out[:25]:
        print(f"{d['ratio']:18.2f}  {d['per_ldl']:14.1f}  {d['ldl']:3d}  {d['stl']:3d}  {d['trips']:5d}  {d['waves']:5d}  "
              f"{d['ctas_per_sm']:7d}  {d['warps']:5d}  {d['measured_us']:11.1f}  {d['tile']}")
    r = np.array([d["ratio"] for d in out])
    c = np.array([d["per_ldl"] for d in out])
    for name, sel in (("measured/simulated > 2", r > 2), ("> 2 and 2 warps", (r > 2) & (np.array([d["warps"] for d in out]) == 2)),
                      ("< 1.2", r < 1.2)):
        if sel.any():
            print(f"{name}: {sel.sum()} points, cycles per LDL median {np.median(c[sel]):.0f} "
                  f"(10-90%: {np.quantile(c[sel], 0.1):.0f}-{np.quantile(c[sel], 0.9):.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
