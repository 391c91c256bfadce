"""On a machine with a GPU (from the repository root): measure gpusim's lowered fp8 matmul / flash against fp16
(our Triton source), check them against numpy, and time torch._scaled_mm as the hardware's FP8 GEMM reference."""
import json, os, subprocess, sys, time
import numpy as np
import torch
sys.path.insert(0, os.getcwd())
from gpusim.kernels import KERNELS
from gpusim.backends import numpy_exec as ne
from gpusim.backends.triton.run import run_workload, time_workload

def clocks():
    return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip()

out = []
CASES = [("matmul", dict(M=4096, N=4096, K=4096, dtype=d)) for d in ("fp16", "fp8e4m3", "fp8e5m2")]
CASES += [("matmul", dict(M=8192, N=8192, K=8192, dtype=d)) for d in ("fp16", "fp8e4m3")]
CASES += [("attention_flash", dict(batch=4, heads=16, seq_len=4096, head_dim=hd, dtype=d, causal=c))
          for hd in (64, 128) for c in (False, True) for d in ("fp16", "fp8e4m3")]
for name, p in CASES:
    wl = KERNELS[name].build(**p)
    t0 = time.time()
    x = ne.random_inputs(wl, 0)
    res = {"kernel": name, **p}
    try:
        if name == "matmul" and p["M"] <= 4096 or name == "attention_flash" and p["head_dim"] == 64 and not p["causal"]:
            got = run_workload(wl, x, device="cuda")
            ref = ne.reference(wl, x)
            res["err_vs_ref"] = max(ne.max_rel_err(got[n], ref[n]) for n in wl.outputs)
        tm = time_workload(wl, x)
        res["us"] = tm["total_us"]
        res["clock_power_after"] = clocks()
    except Exception as e:
        res["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    res["wall_s"] = round(time.time() - t0, 1)
    print(json.dumps(res), flush=True)
    out.append(res)

# the hardware's FP8 GEMM (cuBLASLt through torch._scaled_mm, B column-major) vs fp16 torch.mm
import triton.testing as tt
for n in (4096, 8192):
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device="cuda")
    try:
        ms = tt.do_bench(lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.float16), warmup=25, rep=200, return_mode="median")
        r8 = {"torch_scaled_mm_fp8": n, "us": 1000 * ms, "tflops": 2 * n ** 3 / ms / 1e9, "clock_power_after": clocks()}
    except Exception as e:
        r8 = {"torch_scaled_mm_fp8": n, "error": str(e)[:300]}
    ah, bh = torch.randn(n, n, device="cuda", dtype=torch.float16), torch.randn(n, n, device="cuda", dtype=torch.float16)
    ms = tt.do_bench(lambda: ah @ bh, warmup=25, rep=200, return_mode="median")
    r16 = {"torch_mm_fp16": n, "us": 1000 * ms, "tflops": 2 * n ** 3 / ms / 1e9, "clock_power_after": clocks()}
    print(json.dumps(r8)); print(json.dumps(r16)); out += [r8, r16]
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "fp8_probe.json"), "w"), indent=1)
