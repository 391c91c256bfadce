"""Progress lines and one-line error text of the calibration (shared by its stage modules)."""
from __future__ import annotations

import time


def log(msg: str) -> None:
    print(f"[calibrate {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def error_text(e: BaseException) -> str:
    """``Type: message``, first line only, at most 300 characters (what raw["errors"] holds)."""
    return f"{type(e).__name__}: {e}".splitlines()[0][:300]
