"""The vendored public Triton kernels (scenarios/triton_public) on the CPU: each scenario's kernel
traced at the scenario's size (and how long tracing took), and at a small size checked against
Triton's interpreter. ``python tests/frontends/public_cases.py`` prints one row per kernel."""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCEN = ROOT / "scenarios" / "triton_public"

# small sizes for the check against the interpreter (the interpreter runs every program in Python)
SMALL = {
    "vector_add": {"n_elements": 3000},
    "softmax": {"n_rows": 7, "n_cols": 781},
    "matmul": {"M": 128, "N": 256, "K": 128, "BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32,
               "GROUP_SIZE_M": 2, "num_warps": 4},
    "layer_norm_fwd": {"X": "fp16[5, N]", "Y": "fp16[5, N]", "Mean": "fp32[5]", "Rstd": "fp32[5]", "N": 1000,
                       "BLOCK_SIZE": 256, "grid": 5},
    "layer_norm_bwd_dx": {"N": 256, "BLOCK_SIZE_N": 256, "grid": 4},
    "layer_norm_bwd_dwdb": {"M": 40, "N": 300, "BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64},
    "fused_attention": {"Z": 1, "H": 2, "N_CTX": 128, "BLOCK_M": 32, "BLOCK_N": 16, "HEAD_DIM": 16},
    "rms_norm": {"Y_ptr": "fp16[6, n_cols]", "X_ptr": "fp16[6, n_cols]", "RSTD_ptr": "fp32[6]", "n_cols": 700,
                 "grid": 6},
    "swiglu": {"a_ptr": "fp16[5, n_cols]", "b_ptr": "fp16[5, n_cols]", "c_ptr": "fp16[5, n_cols]", "n_cols": 900,
               "grid": 5},
    "geglu": {"a": "fp16[5, n_cols]", "b": "fp16[5, n_cols]", "c": "fp16[5, n_cols]", "n_cols": 900, "grid": 5},
    "rope": {"sl": 6, "bs": 2, "n_qh": 4, "n_kh": 2, "hd": 32},
    "cross_entropy": {"n_cols": 500, "BLOCK_SIZE": 256},
    "mv": {"N": 43, "M": 300, "BLOCK_N": 8, "BLOCK_M": 128},
}


def scenario(name: str) -> dict:
    import yaml

    return yaml.safe_load((SCEN / f"{name}.yaml").read_text())


def kernel_of(name: str):
    from gpusim.kernels import resolve_kernel

    return resolve_kernel(scenario(name)["kernel"], SCEN)


def trace_time(name: str) -> float:
    """Seconds to trace the scenario's kernel at its own size (after the file is imported)."""
    from gpusim.frontends.triton_trace import kernel as tk

    k = kernel_of(name)
    tk._BUILT.clear()
    t = time.perf_counter()
    k.build(scenario(name)["params"])
    return time.perf_counter() - t


def check(name: str) -> float:
    """max_rel_err of the traced IR on numpy against the kernel under Triton's interpreter, small size."""
    from gpusim.backends import numpy_exec

    wl = kernel_of(name).build({**scenario(name)["params"], **SMALL[name]})
    return numpy_exec.check(wl, seed=0)


def main(names=None):
    sys.path.insert(0, str(ROOT))
    for name in names or SMALL:
        try:
            secs = trace_time(name)
        except Exception as e:   # noqa: BLE001 -- report every kernel
            print(f"{name:20s} does not trace: {e}")
            continue
        try:
            err = check(name)
            print(f"{name:20s} traces in {secs:5.2f} s; max_rel_err vs Triton's interpreter {err:.1e}")
        except Exception as e:   # noqa: BLE001
            print(f"{name:20s} traces in {secs:5.2f} s; check failed: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main(sys.argv[1:] or None)
