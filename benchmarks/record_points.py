"""Record many points on a GPU in one call: compile ahead on the CPU cores, time back to back.

Worker processes compile every point's Triton kernels for this GPU (``JITFunction.warmup`` with the
arguments' dtypes: no launch, so nothing runs on the GPU beside the timing) into Triton's on-disk
cache, in the order the main process will time them. The main process, alone on the GPU, takes
each point in turn: random normal inputs (``numpy_exec.random_inputs``), one run checked against
the float64 reference (``measure.check_outputs``: the whole output, or sampled rows of large
ones), then ``triton.testing.do_bench`` of the whole workload (warmup 25 ms, rep 100 ms, median;
it clears the L2 before every repetition). One JSON line per point is appended to
``OUT/measured.jsonl`` as soon as it is timed, so a killed run keeps what it measured.

Order: the sealed held-out scenarios first, then the training scenarios round-robin (a run cut by
its budget still covers every family). ``--skip FILE`` leaves out the points already in FILE.

usage: python benchmarks/record_points.py --out DIR --budget-s SECONDS [--compile-jobs 6]
                                          [--skip measured.jsonl] SCENARIO.yaml ...
"""
from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim.sweep.scenario import load_scenario  # noqa: E402


def point_list(paths: list) -> list:
    """[(scenario, set, index, kernel, params)] held-out first, then training round-robin."""
    held, train = [], []
    for p in paths:
        rel = str(Path(p).resolve().relative_to(ROOT))
        sc = load_scenario(p)
        kind = "heldout" if "/heldout/" in rel else "train"
        pts = [(rel, kind, i, pt.kernel, dict(pt.params)) for i, pt in enumerate(sc.points)]
        (held if kind == "heldout" else train).append(pts)
    rr = [x for grp in itertools.zip_longest(*train) for x in grp if x is not None]
    return [x for grp in held for x in grp] + rr


def _compile(item) -> tuple:
    """Compile one point's kernels (no launch); (key, seconds, error or '')."""
    rel, _, i, kernel, params = item
    t0 = time.time()
    try:
        import torch
        from gpusim import kernels
        from gpusim.toolchain.lower import kernel_name, launch_stages, lower
        from gpusim.backends.triton.run import _torch_dtype, load_kernel

        wl = kernels.build(kernel, params)
        for launch in wl.launches:
            prog = launch.program
            kern = load_kernel(lower(prog, launch.grid), kernel_name(prog))
            args = [_torch_dtype(wl.tensors[launch.bindings[t.name]].dtype) for t in prog.params]
            kern.warmup(*args, grid=tuple(launch.grid), num_warps=prog.num_warps, num_stages=launch_stages(prog))
        del torch
        return (rel, i), time.time() - t0, ""
    except Exception as e:       # recorded; the timing process reports its own error for the point
        return (rel, i), time.time() - t0, f"{type(e).__name__}: {str(e)[:200]}"


def _bench_whole(wl, inputs) -> float:
    from triton.testing import do_bench
    from gpusim.backends.triton import run as tb

    mem = tb.allocate(wl, inputs, "cuda")
    fns = tb.launchers(wl, mem)

    def whole():
        for _, g in fns:
            g()

    whole()
    us = 1000.0 * float(do_bench(whole, warmup=25, rep=100, return_mode="median"))
    del mem
    return us


FORCE_SAMPLE = ("attention_flash", "attention_naive", "attention_flash_bwd", "attention_decode", "matmul")


def bwd_inputs(wl) -> dict:
    """attention_flash_bwd's inputs drawn on the GPU: normal Q, K, V, dO and the O and L = logsumexp
    that the forward pass computes from them (fp32 on the GPU, head by head), as numpy arrays. The
    check uses these O and L, so it stays exact; the kernel's own generator computes them in float64
    on the host, which takes seconds a point."""
    import numpy as np
    import torch

    from gpusim.backends.numpy_exec import to_dtype

    g = torch.Generator(device="cuda").manual_seed(1)
    t = wl.tensors
    x = {n: torch.randn(t[n].shape, generator=g, device="cuda", dtype=torch.float32) for n in ("q", "k", "v", "do")}
    x = {n: torch.from_numpy(to_dtype(v.cpu().numpy(), t[n].dtype).astype(np.float32)).cuda() for n, v in x.items()}
    q, k, v = x["q"], x["k"], x["v"]
    bh, n, d = q.shape
    o, lse = torch.empty_like(q), torch.empty(bh, n, device="cuda")
    mask = torch.ones(n, n, device="cuda", dtype=torch.bool).tril() if wl.params["causal"] else None
    for h in range(bh):
        s = q[h] @ k[h].T / d ** 0.5
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        lse[h] = torch.logsumexp(s, dim=-1)
        o[h] = torch.softmax(s, dim=-1) @ v[h]
    out = {nm: x[nm].cpu().numpy() for nm in ("q", "k", "v", "do")}
    out["o"] = to_dtype(o.cpu().numpy(), t["o"].dtype)
    out["lse"] = lse.cpu().numpy().astype(np.float32)
    return out


def check(wl, outs: dict, inputs: dict) -> tuple:
    """(worst max_rel_err, "full" | "sampled"): sampled rows for attention, decode and GEMMs."""
    import numpy as np

    from gpusim.backends import numpy_exec
    from gpusim.hw.validate.measure import sampled_reference

    refs, how = sampled_reference(wl, inputs, force_sample=wl.name in FORCE_SAMPLE)
    err = 0.0
    for name, (idx, ref) in refs.items():
        err = max(err, numpy_exec.max_rel_err(np.asarray(outs[name])[idx], ref))
    return err, how


def measure(item, env: dict) -> dict:
    from gpusim import kernels
    from gpusim.hw.validate.measure import TritonCudaBackend, free_gpu_memory, point_inputs, tolerance

    rel, kind, i, kernel, params = item
    rec = {"scenario": rel, "set": kind, "point": i, "kernel": kernel, "params": params, **env,
           "timing_method": "triton.testing.do_bench median (warmup 25 ms, rep 100 ms), one input set",
           "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "status": "ok", "reason": "",
           "tolerance": tolerance(params)}
    t0 = time.time()
    try:
        wl = kernels.build(kernel, params)
        inputs = bwd_inputs(wl) if kernel == "attention_flash_bwd" else point_inputs(wl, 1)
        outs = TritonCudaBackend().run(wl, inputs)
        err, how = check(wl, outs, inputs)
        del outs
        rec.update(max_rel_err=err, check=how)
        if not err <= rec["tolerance"]:
            rec.update(status="wrong-result", reason=f"max_rel_err {err:.3g} > {rec['tolerance']:g} ({how} check)")
        else:
            rec["measured_us"] = _bench_whole(wl, inputs)
    except Exception as e:
        rec.update(status="gpu-error", reason=f"{type(e).__name__}: {str(e)[:300]}")
    free_gpu_memory()
    rec["wall_s"] = round(time.time() - t0, 3)
    return rec


def environment() -> dict:
    import torch
    import triton

    return {"device": torch.cuda.get_device_name(0), "triton": triton.__version__, "torch": torch.__version__,
            "cuda": str(torch.version.cuda)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, required=True, help="stop starting points after this many seconds")
    ap.add_argument("--compile-jobs", type=int, default=6)
    ap.add_argument("--skip", default=None, help="a measured.jsonl whose points are left out")
    a = ap.parse_args(argv)
    t_start = time.time()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    items = point_list(a.scenarios)
    if a.skip and Path(a.skip).exists():
        done = {(r["scenario"], r["point"]) for r in map(json.loads, Path(a.skip).read_text().splitlines())}
        items = [x for x in items if (x[0], x[2]) not in done]
    print(f"record_points: {len(items)} points, budget {a.budget_s:.0f} s, {a.compile_jobs} compile workers",
          flush=True)
    env = environment()
    pool = mp.get_context("spawn").Pool(a.compile_jobs)
    compiled = pool.imap(_compile, items, chunksize=1)
    n_ok = n = 0
    with open(out / "measured.jsonl", "a") as f, open(out / "compile.jsonl", "a") as fc:
        for item in items:
            if time.time() - t_start > a.budget_s:
                print(f"record_points: budget reached after {n} points", flush=True)
                break
            key, secs, err = next(compiled)       # this point is compiled (or failed) before it is timed
            fc.write(json.dumps({"key": list(key), "compile_s": round(secs, 2), "error": err}) + "\n")
            rec = measure(item, env)
            f.write(json.dumps(rec) + "\n")
            f.flush()
            n += 1
            n_ok += rec["status"] == "ok"
            if n == 20 and n_ok == 0:
                print("record_points: the first 20 points all failed; stopping (see measured.jsonl)", flush=True)
                break
            if n % 50 == 0:
                print(f"  {n} points ({n_ok} ok) in {time.time() - t_start:.0f} s", flush=True)
    pool.terminate()
    print(f"record_points: {n} points measured ({n_ok} ok) in {time.time() - t_start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
