"""The power model judged on kernels whose SM clock was measured but never fitted: each point of
benchmarks/ncu_probe_round6.yaml is predicted on configs/h200.yaml and its predicted clock and
power are printed beside the clock nvidia-smi read inside a long do_bench on the H200
(data/h200/micro/clock_probe.json, written by benchmarks/clock_probe.py).

usage: GPUSIM_RESOURCES=compiled python benchmarks/clock_check.py   (triton 3.6 installed, as measured)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim.api import simulate  # noqa: E402
from gpusim.hardware import load_gpu  # noqa: E402


def main() -> int:
    cfg = load_gpu(ROOT / "configs" / "h200.yaml")
    meas = {c["label"]: c for c in json.loads((ROOT / "data/h200/micro/clock_probe.json").read_text())["cases"]}
    print(f"{'kernel':48s} {'pred MHz':>8s} {'pred W':>7s} {'meas MHz':>8s} {'meas W':>7s} {'clock err':>9s} "
          f"{'at 1980':>8s} {'time err':>8s}")
    errs, flat = [], []
    for pt in yaml.safe_load((ROOT / "benchmarks" / "ncu_probe_round6.yaml").read_text()):
        r = simulate(pt["kernel"], cfg, check=False, **pt["params"])
        k, m = r.kernels[0], meas[pt["label"]]
        f_meas = m["do_bench_clock_mhz"]
        e = 100 * (k.clock_hz / 1e6 / f_meas - 1)
        e0 = 100 * (cfg.clock_hz / 1e6 / f_meas - 1)
        errs.append(abs(e))
        flat.append(abs(e0))
        t = 100 * (r.time_us / m["us_do_bench_long"] - 1)
        print(f"{pt['label'][:48]:48s} {k.clock_hz / 1e6:8.0f} {k.power_w:7.0f} {f_meas:8.0f} {m['do_bench_power_w']:7.0f} "
              f"{e:+8.1f}% {e0:+7.1f}% {t:+7.1f}%")
    print(f"median |clock error| {np.median(errs):.1f}% (max {max(errs):.1f}%); "
          f"a clock fixed at 1980 MHz: {np.median(flat):.1f}% (max {max(flat):.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
