"""Simulator speed: the issue's reference case and the cost of sampling.

    python benchmarks/bench_speed.py            # fast (sampled) simulation of the big case
    python benchmarks/bench_speed.py --compare  # also fast vs full on a mid-size case

Run it pinned to one core (taskset -c 0) to reproduce the one-core figure.
"""
import argparse
import time

import gpusim


def timed(**kw):
    t = time.perf_counter()
    r = gpusim.simulate(**kw)
    return r, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compare", action="store_true")
    args = ap.parse_args()
    gpusim.simulate("elementwise_fused", "h100", n=4096)   # load numba's cached L2 kernel first
    big = dict(kernel="attention_flash", gpu="h100", batch=8, heads=32, seq_len=16384, head_dim=128, check=False)
    r, dt = timed(**big)
    k = r.kernels[0]
    print(f"attention_flash b8 h32 n16384 d128 on h100: simulated {r.time_us:.1f} us in {dt:.2f} s wall "
          f"({k.simulated_ctas} of {k.total_ctas} CTAs simulated, loop group {k.loop_group})")
    if args.compare:
        mid = dict(kernel="attention_flash", gpu="h100", batch=8, heads=32, seq_len=2048, head_dim=128, check=False)
        fast, t_fast = timed(**mid)
        full, t_full = timed(fidelity="full", **mid)
        print(f"b8 h32 n2048 d128: fast {fast.time_us:.1f} us ({t_fast:.1f} s), full {full.time_us:.1f} us "
              f"({t_full:.1f} s): time differs {100 * (fast.time_us / full.time_us - 1):+.2f}%, DRAM bytes "
              f"{100 * (fast.dram_bytes / full.dram_bytes - 1):+.2f}%")


if __name__ == "__main__":
    main()
