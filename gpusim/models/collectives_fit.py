"""Fit a GPU config's NCCL fields to the published all-reduce figures (``nccl_published.FIT``) and
check the model on the others (``CHECK``).

usage: python -m gpusim.models.collectives_fit [--gpu h100]   (prints the fitted fields and every row)
"""
from __future__ import annotations

import argparse
import math

from .collectives import collective_time
from .nccl_published import CHECK, FIT, ROWS

FITTED = ("nccl_ring_efficiency", "nccl_nvls_efficiency", "nccl_ll_fraction", "nccl_call_overhead_us",
          "nccl_nvls_latency_us", "nccl_ramp_bytes", "nccl_ramp_fraction")
_START = (0.8, 0.6, 0.5, 30.0, 40.0, 16e6, 0.5)
_LO = (0.3, 0.2, 0.05, 0.0, 0.0, 1e5, 0.05)
_HI = (1.0, 1.5, 1.0, 200.0, 200.0, 1e9, 1.0)


def published_time_us(row) -> float:
    """The time a row's bus bandwidth stands for: bytes / (busbw x n / 2(n-1))."""
    n, nbytes, busbw = row[0], row[1], row[2]
    return nbytes / (busbw * 1e9 * n / (2 * (n - 1))) * 1e6


def predicted_us(cfg, row) -> float:
    return collective_time(cfg, "all_reduce", row[0], row[1], algorithm=row[3] or None).time_us


def errors(cfg, rows) -> list:
    """(row, predicted us, published us, relative error) for each row."""
    out = []
    for r in rows:
        p, m = predicted_us(cfg, r), published_time_us(r)
        out.append((r, p, m, p / m - 1))
    return out


def fit(cfg):
    """``cfg`` with the NCCL fields fitted (least squares of log time) to ``FIT``."""
    import numpy as np
    from scipy.optimize import least_squares

    def with_x(x):
        return cfg.model_copy(update=dict(zip(FITTED, (float(v) for v in x))))

    def resid(x):
        c = with_x(x)
        return [math.log(predicted_us(c, r) / published_time_us(r)) for r in FIT]

    sol = least_squares(resid, np.array(_START), bounds=(np.array(_LO), np.array(_HI)), x_scale="jac")
    return with_x(sol.x)


def worst_check_error(cfg, lo: float = 1 << 20, hi: float = 1 << 30) -> float:
    """Largest |relative error| on the check rows with buffers of ``lo`` .. ``hi`` bytes."""
    errs = [abs(e) for r, _, _, e in errors(cfg, CHECK) if lo <= r[1] <= hi]
    return max(errs) if errs else float("nan")


def main(argv=None) -> int:
    from ..hardware import load_gpu

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="h100")
    a = ap.parse_args(argv)
    cfg = fit(load_gpu(a.gpu))
    for f in FITTED:
        print(f"{f}: {getattr(cfg, f):.4g}")
    print(f"\n{'GPUs':>4} {'bytes':>12} {'alg':>5} {'published us':>12} {'model us':>10} {'error':>7}  set")
    for r, p, m, e in errors(cfg, ROWS):
        print(f"{r[0]:4d} {r[1]:12d} {r[3] or 'nccl':>5} {m:12.1f} {p:10.1f} {e:+7.1%}  {'fit' if r in FIT else 'check'}")
    print(f"\nworst check error, 1 MiB - 1 GiB: {worst_check_error(cfg):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
