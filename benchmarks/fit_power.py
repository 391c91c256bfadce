"""The power model's fields from the clock microbenchmarks (data/h200/micro/clock_probe.json,
written by benchmarks/clock_probe.py on a machine with an H200): each energy comes from the one
microbenchmark that does mostly that activity, after taking off the idle power and what its other
activity costs (backends/sim/power.py says how the model uses them).

  vector_cycle  FMA chains at 1980 MHz: the vector pipe busy every SM-cycle
  sfu_cycle     exp2 chains at 1980 MHz: the SFU busy every SM-cycle, the vector pipe a share
  l2_byte       the 16 MiB L2 sweep at 1980 MHz, less its fp32 adds
  dram_byte     the 2 GiB HBM read at 1980 MHz, less its pass through the L2 and its adds
  sram_byte     16 KiB tiles staged from the L2 into shared memory (cp.async) at 1980 MHz, less the L2 byte
  tensor_flop   the calibration's best tile loop (128x128x16 fp16) on half the SMs, below the limit
  dvfs_energy_exponent  the same loop on every SM, power-limited: P - idle = e x FLOP/s x (f/f0)^k
The half-GPU loop's per-clock FLOP rate also gives tensor_flops_per_s at the maximum clock (the
calibration measured it on every SM, while the clock was power-limited); bf16 and tf32 scale with it.

usage: python benchmarks/fit_power.py [--config configs/h200.yaml] [--write]
  --write  put the fields and their sources into the config (tensor_flops_per_s too)
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim.backends.sim.cost import SIMT_CLASS, simt_rate  # noqa: E402,F401
from gpusim.hardware import load_gpu  # noqa: E402

PROBE = ROOT / "data" / "h200" / "micro" / "clock_probe_micro.json"
MEASURED = ROOT / "data" / "h200" / "h200-measured.json"     # the calibration's raw numbers
MIB = 1 << 20


def _own(c: dict) -> dict:
    """A case as launched back to back (no L2 flush between launches): the kernel's own power and
    clock, with the time per launch of that loop."""
    return {**c, "us": c["us_back_to_back"]}


def fit(cfg, probe: dict) -> dict:
    cases = {c["label"]: _own(c) for c in probe["cases"]}
    idle = sum(w for _, w in probe["idle"]) / len(probe["idle"])
    f0, sms = cfg.clock_hz, cfg.sm_count
    sm_cycles = sms * f0                                     # SM-cycles per second at the maximum clock
    vec_rate = cfg.vector_ops_per_clk_per_sm                 # fp32 lane-ops per clock per SM
    out, why = {}, {}
    fma = cases["fma chains, 8 CTAs/SM"]
    out["vector_cycle"] = (fma["power_w"] - idle) / sm_cycles
    why["vector_cycle"] = f"FMA chains at {fma['clock_mhz']:.0f} MHz, {fma['power_w']:.1f} W"
    ex = cases["exp2 chains, 8 CTAs/SM"]
    u_vec = (1.0 / vec_rate + 1.0 / simt_rate(cfg, "mul")) * cfg.sfu_ops_per_clk_per_sm   # issue + the multiply
    out["sfu_cycle"] = (ex["power_w"] - idle - u_vec * out["vector_cycle"] * sm_cycles) / sm_cycles
    why["sfu_cycle"] = f"exp2 chains at {ex['clock_mhz']:.0f} MHz, {ex['power_w']:.1f} W, vector pipe {u_vec:.2f} busy"
    sw = cases["L2 sweep 16 MiB"]
    l2_bps = (16 * MIB) * 64 / (sw["us"] * 1e-6)
    adds = l2_bps / 4 / (simt_rate(cfg, "add") * sm_cycles)  # one fp32 add per element
    out["l2_byte"] = (sw["power_w"] - idle - adds * out["vector_cycle"] * sm_cycles) / l2_bps
    why["l2_byte"] = f"L2 sweep {l2_bps / 1e12:.2f} TB/s at {sw['clock_mhz']:.0f} MHz, {sw['power_w']:.1f} W"
    rd = cases["HBM read 2 GiB"]
    hbm_bps = (2 << 30) / (rd["us"] * 1e-6)
    adds = hbm_bps / 4 / (simt_rate(cfg, "add") * sm_cycles)
    out["dram_byte"] = (rd["power_w"] - idle - adds * out["vector_cycle"] * sm_cycles) / hbm_bps - out["l2_byte"]
    why["dram_byte"] = f"HBM read {hbm_bps / 1e12:.2f} TB/s at {rd['clock_mhz']:.0f} MHz, {rd['power_w']:.1f} W"
    st = cases["L2 stream into shared memory, 2 CTAs/SM"]
    st_bps = 2 * sms * 2048 * 64 * 128 * 2 / (st["us"] * 1e-6)
    out["sram_byte"] = (st["power_w"] - idle) / st_bps - out["l2_byte"]
    why["sram_byte"] = (f"16 KiB tiles staged from the L2 into shared memory {st_bps / 1e12:.2f} TB/s at {st['clock_mhz']:.0f} "
                        f"MHz, {st['power_w']:.1f} W, less the L2 byte")
    half, full = cases[f"mma 128x128x16 fp16, {sms // 2} CTAs"], cases["mma 128x128x16 fp16, 1 CTA/SM"]
    tile_flops = 2.0 * 128 * 128 * 16 * 8192                  # one CTA's work in the tile loop
    flops_half = tile_flops * (sms // 2) / (half["us"] * 1e-6)
    out["tensor_flop"] = (half["power_w"] - idle) / flops_half
    why["tensor_flop"] = (f"the 128x128x16 tile loop on half the SMs, {flops_half / 1e12:.0f} TFLOP/s at "
                          f"{half['clock_mhz']:.0f} MHz (below the limit), {half['power_w']:.1f} W")
    # on every SM it meets the limit: P - idle = e x FLOP/s x (f / f0) ** k at the clock it runs at
    f_full = full["clock_mhz"] * 1e6
    flops_full = tile_flops * sms / (full["us"] * 1e-6)
    k = math.log((full["power_w"] - idle) / (out["tensor_flop"] * flops_full)) / math.log(f_full / f0)
    why["dvfs_energy_exponent"] = (f"the same loop on all {sms} SMs: {flops_full / 1e12:.0f} TFLOP/s at a power-limited "
                                   f"{full['clock_mhz']:.0f} MHz, {full['power_w']:.1f} W = idle + e x FLOP/s x (f/f0)^k")
    tensor_fp16 = flops_half / (half["clock_mhz"] * 1e6 * (sms // 2)) * sms * f0   # per clock, at every SM and f0
    return {"idle_power_w": idle, "activity_energy_j": out, "dvfs_energy_exponent": k, "why": why,
            "tensor_fp16_at_fmax": tensor_fp16}


def _source(r: dict) -> dict:
    why = r["why"]
    probe = PROBE.relative_to(ROOT)
    energies = "; ".join(f"{k} from {why[k]}" for k in ("vector_cycle", "sfu_cycle", "l2_byte", "dram_byte", "sram_byte",
                                                         "tensor_flop"))
    return {
        "idle_power_w": f"measured: benchmarks/clock_probe.py, nvidia-smi board power of the idle GPU ({probe})",
        "activity_energy_j": (f"measured: benchmarks/clock_probe.py ({probe}: nvidia-smi SM clock and board power every 50 ms "
                              f"while each microbenchmark runs back to back for 2 s), fitted by benchmarks/fit_power.py, "
                              f"each less the idle {r['idle_power_w']:.1f} W: {energies}"),
        "dvfs_energy_exponent": f"measured: benchmarks/fit_power.py from {why['dvfs_energy_exponent']} (P = C V^2 f with V "
                                f"following f gives 2)",
        "power_limit_w": "measured: nvidia-smi -q (Current / Default / Max Power Limit 700 W) on our H200",
    }


def write(path: Path, r: dict, cal: dict) -> None:
    """Replace the power fields, tensor_flops_per_s and their sources in the config file's text."""
    import re

    s = path.read_text()
    ratio = r["tensor_fp16_at_fmax"] / cal["fp16"]
    block = "tensor_flops_per_s:\n" + "".join(f"  {k}: {cal[k] * ratio:.6g}\n" for k in ("fp16", "bf16", "fp32"))
    s = re.sub(r"tensor_flops_per_s:\n(  .*\n)+", block, s, count=1)
    e = r["activity_energy_j"]
    power = (f"power_limit_w: 700.0\nidle_power_w: {r['idle_power_w']:.2f}\nactivity_energy_j:\n"
             + "".join(f"  {k}: {e[k]:.4g}\n" for k in e) + f"dvfs_energy_exponent: {r['dvfs_energy_exponent']:.3f}\n")
    s = re.sub(r"power_limit_w: .*\n(idle_power_w: .*\n)?(activity_energy_j:\n(  .*\n)+)?(dvfs_energy_exponent: .*\n)?",
               power, s, count=1) if "power_limit_w:" in s else s.replace("launch_overhead_us:", power + "launch_overhead_us:", 1)
    src = _source(r)
    src["tensor_flops_per_s"] = (f"per clock from benchmarks/clock_probe.py: the calibration's best tile (128x128x16 fp16) on half "
                                 f"the SMs at the maximum clock ({r['why']['tensor_flop'].split(', ')[1]}), scaled to every SM "
                                 f"= {r['tensor_fp16_at_fmax'] / 1e12:.0f} TFLOP/s; x{ratio:.3f} the calibration's values "
                                 f"(fp16 {cal['fp16'] / 1e12:.1f}, bf16 {cal['bf16'] / 1e12:.1f}, tf32 {cal['fp32'] / 1e12:.1f} "
                                 "TFLOP/s, measured on every SM while the clock was power-limited)")
    for k, text in src.items():
        entry = "  " + k + ": '" + text.replace("'", "''") + "'\n"
        m = re.search(r"^  " + k + r": '(?:[^']|'')*'\n", s, flags=re.M)
        s = s[:m.start()] + entry + s[m.end():] if m else s.replace("sources:\n", "sources:\n" + entry, 1)
    path.write_text(s)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "configs" / "h200.yaml"))
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    cfg = load_gpu(args.config)
    r = fit(cfg, json.loads(PROBE.read_text()))
    print(f"idle_power_w: {r['idle_power_w']:.2f}")
    for k, v in r["activity_energy_j"].items():
        print(f"  {k}: {v:.4g}   # {r['why'][k]}")
    print(f"dvfs_energy_exponent: {r['dvfs_energy_exponent']:.3f}   # {r['why']['dvfs_energy_exponent']}")
    print(f"tensor fp16 at the maximum clock: {r['tensor_fp16_at_fmax'] / 1e12:.1f} TFLOP/s")
    if args.write:
        raw = json.loads(MEASURED.read_text())["fields"]
        cal = {dt: raw[f"tensor_flops_per_s.{dt}"]["value"] for dt in ("fp16", "bf16", "fp32")}
        write(Path(args.config), r, cal)
        print(f"wrote {args.config}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
