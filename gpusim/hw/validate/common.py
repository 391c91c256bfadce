"""Small helpers shared by the validation modules: the progress log line, one-line error text,
atomic file writes, and the median/spread and percent-error arithmetic of measured numbers."""
from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np


def log(msg: str) -> None:
    print(f"[validate {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def error_text(e: BaseException) -> str:
    """``Type: message``, first line only, at most 400 characters (what a record's reason holds)."""
    return f"{type(e).__name__}: {e}".strip().splitlines()[0][:400]


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def median_spread(xs) -> tuple:
    """(median, spread % = (max - min) / median) of the finite values; (None, None) if none."""
    xs = [float(x) for x in (xs or []) if x is not None and math.isfinite(float(x))]
    if not xs:
        return None, None
    med = float(np.median(xs))
    return med, ((max(xs) - min(xs)) / med * 100.0 if med else None)


def pct(pred, meas):
    """(pred - meas) / meas in percent; None when either is missing or meas is 0."""
    if pred is None or meas is None or not meas:
        return None
    return (pred - meas) / meas * 100.0


def gpu_problem() -> str | None:
    """Why nothing can be measured here (no torch or triton, no CUDA device), or None."""
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as e:
        return f"measuring needs torch and triton ({e})"
    if not torch.cuda.is_available():
        return "no CUDA device visible to torch"
    return None
