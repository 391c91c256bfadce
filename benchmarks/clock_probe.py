"""The SM clock a kernel runs at, on a machine with an NVIDIA GPU: each case is launched back to back
for a couple of seconds (as a timing loop keeps the GPU busy) while ``nvidia-smi`` samples the SM
clock and the board power every 50 ms; the median over the loaded window is the kernel's clock.

The timing model counts SM work in cycles and converts at ``clock_hz``; a GPU whose power limit
pulls the clock below its maximum under load runs every cycle-bound part slower by that ratio.
Cases: the calibration's own microbenchmarks (tensor-core tile, FMA and exp2 chains, HBM read, L2
sweep) and the built-in kernels of POINTS.yaml (as benchmarks/ncu_probe.py takes them), each also
timed with do_bench (L2 flushed, as ``gpusim validate`` times).

usage: python benchmarks/clock_probe.py OUT.json [POINTS.yaml]
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from triton.testing import do_bench

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LOAD_S = 2.0


class Sampler:
    """nvidia-smi's SM clock (MHz) and board power (W), every 50 ms, with host arrival times."""

    def __init__(self):
        self.rows: list = []
        self.p = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                                   "-lms", "50"], stdout=subprocess.PIPE, text=True)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for ln in self.p.stdout:
            try:
                mhz, watts = (float(x) for x in ln.strip().split(","))
            except ValueError:
                continue
            self.rows.append((time.time(), mhz, watts))

    def window(self, t0, t1):
        return [(m, w) for t, m, w in self.rows if t0 <= t <= t1]

    def stop(self):
        self.p.terminate()


def loaded(fn, sampler) -> dict:
    """Launch ``fn`` back to back for LOAD_S seconds; the clock and power over the last 3/4 of it."""
    fn()
    torch.cuda.synchronize()
    t0 = time.time()
    n = 0
    while time.time() - t0 < LOAD_S:
        for _ in range(8):
            fn()
        torch.cuda.synchronize()
        n += 8
    t1 = time.time()
    s = sampler.window(t0 + 0.25 * (t1 - t0), t1)
    us_loop = (t1 - t0) / n * 1e6
    us = 1000.0 * float(do_bench(fn, warmup=25, rep=100, return_mode="median"))
    time.sleep(0.3)
    t2 = time.time()                 # a long do_bench: the clock with its L2 flush between repetitions
    us_long = 1000.0 * float(do_bench(fn, warmup=25, rep=int(1000 * LOAD_S), return_mode="median"))
    t3 = time.time()
    s2 = sampler.window(t2 + 0.25 * (t3 - t2), t3)
    return {"clock_mhz": float(np.median([m for m, _ in s])) if s else None,
            "clock_mhz_min": min((m for m, _ in s), default=None), "power_w": float(np.median([w for _, w in s])) if s else None,
            "samples": len(s), "us_do_bench": us, "us_back_to_back": us_loop, "launches": n,
            "do_bench_clock_mhz": float(np.median([m for m, _ in s2])) if s2 else None,
            "do_bench_power_w": float(np.median([w for _, w in s2])) if s2 else None, "us_do_bench_long": us_long}


def micro_cases():
    from gpusim.hw.calibrate import bench

    dev = "cuda"
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    a = (torch.randn(128, 16, device=dev) * 0.05).half()
    b = (torch.randn(16, 128, device=dev) * 0.05).half()
    c = torch.empty(sm * 128 * 128, dtype=torch.float32, device=dev)
    out = torch.empty(sm * 8 * 2048, dtype=torch.float32, device=dev)
    x = torch.ones((2 << 30) // 4, dtype=torch.float32, device=dev)
    rd = torch.empty(x.numel() // bench.READ_BLOCK, dtype=torch.float32, device=dev)
    sw = torch.empty(sm * 4, dtype=torch.float32, device=dev)
    w = 16 << 20
    # the tile loop on part of the SMs: below the limit it runs at the maximum clock, so the energy
    # per FLOP there and the clock with every SM busy give how power follows the clock
    part = [(f"mma 128x128x16 fp16, {n} CTAs", lambda n=n: bench.launch_mma(a, b, c, 8192, 128, 128, 16, n, 4))
            for n in (sm // 4, sm // 2, 3 * sm // 4)]
    return part + [
        ("mma 128x128x16 fp16, 1 CTA/SM", lambda: bench.launch_mma(a, b, c, 8192, 128, 128, 16, sm, 4)),
        ("fma chains, 8 CTAs/SM", lambda: bench.launch_fma(out, 2048, sm * 8)),
        ("exp2 chains, 8 CTAs/SM", lambda: bench.launch_exp2(out, 512, sm * 8)),
        ("HBM read 2 GiB", lambda: bench.launch_read(x, rd)),
        ("L2 sweep 16 MiB", lambda: bench.launch_sweep(x, sw, w // 4, (w // (bench.SWEEP_BLOCK * 4)) * 64, sm * 4)),
        ("L2 stream into shared memory, 2 CTAs/SM", lambda: _stage(x, sm)),
    ]


_STAGE: list = []      # the staging case's tensors, made once


def _stage(x, sm):
    """Tiles staged into shared memory from the L2 (benchmarks/micro_fidelity.py share: 16 KiB tiles
    of one 256 KiB region per 2 CTAs, into a 16-row dot): the energy of the copy path."""
    from benchmarks.micro_fidelity import _stream_dot

    if not _STAGE:
        _STAGE.extend((torch.randn(16, 128, device="cuda", dtype=torch.float16) * 0.05,
                       torch.randn(2 * sm * 16 * 64 * 128, device="cuda", dtype=torch.float16) * 0.05,
                       torch.empty(2 * sm * 16 * 64, device="cuda", dtype=torch.float32)))
    q, k, out = _STAGE
    _stream_dot[(2 * sm,)](k, q, out, 2048, 2, 0, 15, BLOCK_N=64, D=128, num_warps=4, num_stages=4)


def point_cases(path):
    from gpusim.backends import numpy_exec
    from gpusim.backends.triton.run import allocate, launchers
    from gpusim.kernels import build

    for pt in yaml.safe_load(Path(path).read_text()):
        w = build(pt["kernel"], pt["params"])
        mem = allocate(w, numpy_exec.random_inputs(w, 0), "cuda")
        fns = [g for _, g in launchers(w, mem)]

        def go(fns=fns):
            for g in fns:
                g()
        yield pt.get("label", pt["kernel"]), go


def main(argv) -> int:
    out_path = argv[0]
    sampler = Sampler()
    time.sleep(0.5)
    idle = sampler.window(time.time() - 0.4, time.time())
    res = {"device": torch.cuda.get_device_name(0), "idle": idle, "cases": []}
    cases = list(micro_cases())
    if len(argv) > 1:
        cases += list(point_cases(argv[1]))
    for label, fn in cases:
        try:
            r = {"label": label, **loaded(fn, sampler)}
        except Exception as e:  # noqa: BLE001 - recorded, the others still run
            r = {"label": label, "error": repr(e)[:300]}
        res["cases"].append(r)
        print("clock", r, flush=True)
        Path(out_path).write_text(json.dumps(res, indent=1))
        time.sleep(0.3)
    sampler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
