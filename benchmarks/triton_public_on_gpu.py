"""Measure the vendored public Triton kernels natively on a CUDA GPU, for comparison with gpusim's
prediction of the same source (scenarios/triton_public/*.yaml).

For each scenario: resolve its launch (tensors, scalars, grid, num_warps, num_stages) exactly as
gpusim does, allocate the tensors on the GPU (random normal inputs; the RoPE cos/sin and the
cross-entropy targets are drawn in their valid ranges), run the unmodified kernel with
triton.testing.do_bench (warmup 25 ms, rep 100 ms, median), check the output against a torch
reference where the kernel has one, and write one CSV row: kernel, params, measured_us,
max_rel_err.

    python benchmarks/triton_public_on_gpu.py --out triton_public_h100.csv     # on a machine with a GPU
    python benchmarks/triton_public_on_gpu.py --dry-run                        # list the points, no GPU
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCEN = ROOT / "scenarios" / "triton_public"
sys.path.insert(0, str(ROOT))


def points(names=None):
    """(scenario name, kernel function, LaunchSpec) of every scenario (or of ``names``)."""
    import yaml

    from gpusim.frontends import triton_kernel
    from gpusim.frontends.triton_trace.kernel import launch_spec
    from gpusim.kernels.spec import load_kernel_file

    for f in sorted(SCEN.glob("*.yaml")):
        if names and f.stem not in names:
            continue
        sc = yaml.safe_load(f.read_text())
        path, _, attr = sc["kernel"].rpartition(":")
        fn = getattr(load_kernel_file(path, SCEN), attr)
        yield f.stem, fn, launch_spec(fn, triton_kernel(fn).resolve(sc["params"]))


def _tensors(name, spec, torch):
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "int32": torch.int32}
    g = torch.Generator(device="cuda").manual_seed(0)
    mem = {}
    for n, (d, shape) in spec.tensors.items():
        if d == "int32":
            hi = spec.scalars.get("n_cols", 2)
            mem[n] = torch.randint(0, hi, shape, device="cuda", dtype=torch.int32, generator=g)
        else:
            mem[n] = torch.randn(shape, device="cuda", dtype=torch.float32, generator=g).to(dt[d])
    if name == "rope":          # cos/sin of real angles
        ang = torch.randn(mem["cos"].shape, device="cuda", generator=g)
        mem["cos"], mem["sin"] = ang.cos().to(mem["cos"].dtype), ang.sin().to(mem["sin"].dtype)
    if name == "layer_norm_bwd_dx":
        mem["Lock"].zero_()
        mem["Rstd"] = mem["Rstd"].abs() + 0.5
    return mem


def _rel(out, ref):
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / (ref.norm() or 1.0))


def reference(name, spec, inp, out, torch):
    """max_rel_err of the kernel's output against torch, or None where there is no reference here."""
    F, s = torch.nn.functional, spec.scalars
    if name == "vector_add":
        return _rel(out["output_ptr"], inp["x_ptr"].double() + inp["y_ptr"].double())
    if name == "softmax":
        return _rel(out["output_ptr"], torch.softmax(inp["input_ptr"].double(), -1))
    if name == "matmul":
        return _rel(out["c_ptr"], inp["a_ptr"].double() @ inp["b_ptr"].double())
    if name == "layer_norm_fwd":
        x = inp["X"].double()
        return _rel(out["Y"], F.layer_norm(x, x.shape[-1:], inp["W"].double(), inp["B"].double(), s["eps"]))
    if name == "layer_norm_bwd_dwdb":
        return _rel(out["FINAL_DW"], inp["DW"].double().sum(0))
    if name == "rms_norm":
        x = inp["X_ptr"].double()
        return _rel(out["Y_ptr"], x * torch.rsqrt((x * x).mean(-1, keepdim=True) + s["eps"]) * inp["W_ptr"].double())
    if name == "swiglu":
        a = inp["a_ptr"].double()
        return _rel(out["c_ptr"], F.silu(a) * inp["b_ptr"].double())
    if name == "geglu":
        return _rel(out["c"], F.gelu(inp["a"].double(), approximate="tanh") * inp["b"].double())
    if name == "rope":
        q, cos, sin = inp["q_ptr"].double(), inp["cos"].double()[0], inp["sin"].double()[0]
        h = q.shape[-1] // 2
        pos = torch.arange(q.shape[0], device=q.device) % s["sl"]
        c, sn = cos[pos, None, :h], sin[pos, None, :h]
        want = torch.cat([q[..., :h] * c - q[..., h:] * sn, q[..., h:] * c + q[..., :h] * sn], -1)
        return _rel(out["q_ptr"], want)
    if name == "mv":
        return _rel(out["C"], inp["A"].double() @ inp["B"].double())
    if name == "fused_attention":
        q, k, v = (inp[n].double() for n in "QKV")
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=s["STAGE"] == 3, scale=s["sm_scale"])
        return _rel(out["Out"], ref)
    return None


def measure(name, fn, spec):
    """(median us, max_rel_err or None): the unmodified kernel launched as gpusim traced it
    (``gpusim.frontends.triton_trace.native``, the launch and timer ``gpusim validate`` uses)."""
    import torch

    from gpusim.frontends.triton_trace import native

    mem = _tensors(name, spec, torch)
    inp = {n: t.clone() for n, t in mem.items()}
    launch = native.launcher(native.from_spec(fn, spec), mem)
    launch()
    torch.cuda.synchronize()
    err = reference(name, spec, inp, mem, torch)
    return native.bench_us(launch), err


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="triton_public_measured.csv", help="CSV to write")
    ap.add_argument("--dry-run", action="store_true", help="list the points and exit (no GPU needed)")
    ap.add_argument("names", nargs="*", help="scenario names (default: all)")
    a = ap.parse_args(argv)
    pts = list(points(a.names))
    if a.dry_run:
        for name, fn, s in pts:
            tensors = ", ".join(f"{n}={d}{list(sh)}" for n, (d, sh) in s.tensors.items())
            print(f"{name}: grid {s.grid}, num_warps {s.num_warps}, num_stages {s.num_stages}; {tensors}")
        return 0
    with open(a.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kernel", "params", "measured_us", "max_rel_err"])
        for name, fn, s in pts:
            us, err = measure(name, fn, s)
            params = {**{n: f"{d}{list(sh)}" for n, (d, sh) in s.tensors.items()}, **s.scalars,
                      "grid": list(s.grid), "num_warps": s.num_warps, "num_stages": s.num_stages}
            w.writerow([name, json.dumps(params, sort_keys=True), f"{us:.3f}", "" if err is None else f"{err:.2e}"])
            print(f"{name:22s} {us:10.2f} us  max_rel_err {'n/a' if err is None else f'{err:.1e}'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
