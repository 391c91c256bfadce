"""One transformer layer as the lowered Triton kernels gpusim composes, timed on a GPU end to end
and kernel by kernel, checked against numpy, next to gpusim's predictions.

For each phase (prefill at BATCHxSEQ, decode at BATCHxCONTEXT) the script takes the layer's ops
from ``gpusim.models`` (the same kernels, tile configs and shapes ``simulate_model`` picks for the
prediction config, the fastest candidate where an op has several), lowers each to Triton and

* times each op alone (``triton.testing.do_bench``, median; an op of two launches, e.g. a split
  and its combine, is timed as both);
* times the whole layer: one function that launches every op in order (``do_bench``, and
  ``do_bench_cudagraph`` where it runs, which removes the host's launch gaps). Each op has its own
  buffers, filled with random normals: the timing does not depend on the values, so the ops are not
  chained through one activation;
* checks each op's output against its float64 numpy reference, at the layer's shape where numpy
  does that in seconds, else at a smaller shape of the same kernel and config (``check_params``
  says which);
* writes ``layer_on_gpu.csv`` and ``layer_on_gpu.json`` to ``--out``: per op the measured time,
  gpusim's prediction for the op alone (one launch sequence and a host sync, as ``do_bench`` of
  one op sees it) and in the layer (without the sync), and the check; per phase the measured
  layer time, the sum of the per-op measurements, and gpusim's layer total (the ops plus one sync).

Predictions use ``--predict-gpu`` (default h200) with the compiled resource view
(``GPUSIM_RESOURCES=compiled`` unless already set).

    python benchmarks/layer_on_gpu.py --out results/layer_on_gpu          # on a machine with a GPU
    python benchmarks/layer_on_gpu.py --tiny --device cpu --out /tmp/lg   # a tiny model, Triton interpreter

Without a CUDA GPU (and without ``--device cpu``) it exits with one line saying so.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY = dict(name="tiny", hidden=256, heads=4, kv_heads=2, head_dim=64, ffn=512, activation="swiglu",
            norm="rmsnorm", layers=2, vocab=1024, dtype="bf16")
# shapes above which the numpy check runs at a smaller size (float64 numpy: a few seconds at most)
CHECK_CAPS = {"matmul": dict(M=256, N=512, K=1024), "gemv_splitk": dict(N=1024, K=2048),
              "attention_flash": dict(seq_len=512, batch=1), "attention_naive": dict(seq_len=512, batch=1),
              "attention_decode": dict(kv_len=2048, batch=2),
              "elementwise_fused": dict(n=1 << 20), "rmsnorm": dict(rows=64), "layernorm": dict(rows=64)}


def fail(msg: str) -> None:
    print(f"layer_on_gpu.py: {msg}", file=sys.stderr)
    sys.exit(2)


def parse_bxs(text: str, what: str) -> tuple:
    try:
        b, s = (int(x) for x in text.lower().split("x"))
        assert b > 0 and s > 0
        return b, s
    except (ValueError, AssertionError):
        fail(f"--{what} {text!r}: expected BATCHxLENGTH, e.g. 1x8192")


def check_params(kernel: str, params: dict) -> dict:
    """``params`` with the layer's big dimensions capped for the numpy check (tiles unchanged)."""
    caps = CHECK_CAPS.get(kernel, {})
    out = dict(params)
    for k, cap in caps.items():
        if k in out and out[k] > cap:
            out[k] = cap
    if kernel == "attention_decode" and out["kv_len"] != params["kv_len"]:
        out["num_splits"] = min(out.get("num_splits", 16), max(1, out["kv_len"] // 64))
    if kernel.startswith("attention_") and "kv_len" in out and "q_len" in out:
        out["q_len"] = min(out["q_len"], out["kv_len"])
    return out


def layer_ops(model, phase, batch, seq, attention, cfg):
    """[(op name, kernel, chosen params, predicted alone us, predicted in layer us)] of one layer,
    and gpusim's prediction of the layer (its ops plus one host sync)."""
    from gpusim.models import simulate as ms
    from gpusim.models.compose import Target, model_ops

    m = ms.load_model(model)
    ops = [o for o in model_ops(m, phase, batch, seq, attention, Target.of(cfg)) if o.count == m.layers]
    out = []
    for op in ops:
        r, params = ms._best(cfg, op)
        if r.status != "ok":
            fail(f"{op.name} ({op.kernel}) is {r.status} on {cfg.name}: {r.reason}")
        out.append((op.name, op.kernel, dict(params), r.time_us, r.time_us - cfg.sync_overhead_us))
    return out, sum(o[4] for o in out) + cfg.sync_overhead_us


def torch_inputs(w, device, seed):
    """Random-normal inputs made on the device (numpy would take minutes at prefill sizes)."""
    import torch

    from gpusim.backends.triton.run import _torch_dtype

    g = torch.Generator(device=device).manual_seed(seed)
    mem = {}
    for name, t in w.tensors.items():
        dt = _torch_dtype(t.dtype)
        if name in w.inputs:
            mem[name] = torch.randn(t.shape, generator=g, device=device, dtype=torch.float32).to(dt)
        else:
            mem[name] = torch.empty(t.shape, device=device, dtype=dt)
    return mem


def bench_fn(device):
    if device == "cpu":           # the interpreter: wall time, only to exercise the path
        def bench(fn, reps=3):
            ts = []
            for _ in range(reps):
                t = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t)
            return 1e6 * sorted(ts)[len(ts) // 2]
        return bench, None
    import triton.testing

    def bench(fn):
        return 1000.0 * float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))

    def bench_graph(fn):
        import torch

        with torch.cuda.stream(torch.cuda.Stream()):
            return 1000.0 * float(triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median"))
    return bench, bench_graph


def check(kernel, params, device, seed=0):
    """(max_rel_err, tolerance, params checked at) of the op against float64 numpy."""
    from gpusim.backends import numpy_exec as ne
    from gpusim.backends.triton.run import run_workload
    from gpusim.kernels import build
    from gpusim.result import check_tolerance

    p = check_params(kernel, params)
    w = build(kernel, p)
    x = ne.random_inputs(w, seed)
    got = run_workload(w, x, device=device)
    ref = ne.reference(w, x)
    err = max(ne.max_rel_err(got[n], ref[n]) for n in w.outputs)
    return err, check_tolerance(p), p


def run_phase(args, phase, batch, seq, cfg, device, bench, bench_graph):
    from gpusim.backends.triton.run import launchers
    from gpusim.kernels import build

    model = TINY if args.tiny else args.model
    ops, predicted_layer = layer_ops(model, phase, batch, seq, args.attention if phase == "prefill" else None, cfg)
    rows, fns = [], []
    for i, (name, kernel, params, pred_alone, pred_layer) in enumerate(ops):
        w = build(kernel, params)
        mem = torch_inputs(w, "cpu" if device == "cpu" else "cuda", seed=i)
        go = [g for _, g in launchers(w, mem)]

        def op_fn(go=go):
            for g in go:
                g()
        op_fn()                                   # compile (first call) outside the timing
        fns.append(op_fn)
        measured = bench(op_fn)
        err, tol, cp = check(kernel, params, device, seed=i)
        rows.append(dict(phase=phase, batch=batch, seq=seq, op=name, kernel=kernel, launches=len(go),
                         params=json.dumps(params, sort_keys=True), measured_us=round(measured, 3),
                         predicted_alone_us=round(pred_alone, 3), predicted_in_layer_us=round(pred_layer, 3),
                         ratio_predicted_over_measured=round(pred_alone / measured, 3) if measured else "",
                         max_rel_err=float(f"{err:.3g}"), tolerance=tol, check="ok" if err <= tol else "MISMATCH",
                         check_params="as timed" if cp == params else json.dumps(cp, sort_keys=True)))
        print(f"  {phase} {name:13s} {kernel:18s} measured {measured:10.1f} us  predicted {pred_alone:10.1f} us  "
              f"check {rows[-1]['check']} ({err:.2g}{'' if cp == params else ', smaller shape'})", flush=True)

    def layer():
        for f in fns:
            f()
    layer_us = bench(layer)
    graph_us = None
    if bench_graph is not None:
        try:
            graph_us = bench_graph(layer)
        except Exception as e:       # noqa: BLE001 -- recorded, the eager time stands
            print(f"  (CUDA-graph timing failed: {type(e).__name__}: {e})", file=sys.stderr)
    summary = dict(phase=phase, batch=batch, seq=seq, layer_measured_us=round(layer_us, 3),
                   layer_measured_cudagraph_us=round(graph_us, 3) if graph_us is not None else None,
                   sum_of_kernels_measured_us=round(sum(r["measured_us"] for r in rows), 3),
                   layer_predicted_us=round(predicted_layer, 3),
                   sum_of_kernels_predicted_alone_us=round(sum(r["predicted_alone_us"] for r in rows), 3),
                   checks_ok=all(r["check"] == "ok" for r in rows))
    print(f"  {phase} layer: measured {layer_us:.1f} us"
          + (f" ({graph_us:.1f} us in a CUDA graph)" if graph_us is not None else "")
          + f", kernels alone sum {summary['sum_of_kernels_measured_us']:.1f} us; "
            f"gpusim {cfg.name}: {predicted_layer:.1f} us", flush=True)
    return rows, summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama3-8b", help="preset or model YAML (default llama3-8b)")
    ap.add_argument("--prefill", default="1x8192", help="BATCHxSEQ of the prefill layer (default 1x8192)")
    ap.add_argument("--decode", default="1x8192", help="BATCHxCONTEXT of the decode layer (default 1x8192)")
    ap.add_argument("--attention", default="flash", choices=("flash", "naive"), help="prefill attention")
    ap.add_argument("--predict-gpu", default="h200", help="GPU config of the predictions (default h200)")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer model of hidden 256 at 1x128 and 1x256")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: the Triton interpreter")
    ap.add_argument("--out", default=os.environ.get("OUT") or "results/layer_on_gpu",
                    help="output directory (default $OUT when set, else results/layer_on_gpu)")
    args = ap.parse_args(argv)
    if args.tiny and args.prefill == "1x8192" and args.decode == "1x8192":
        args.prefill, args.decode = "1x128", "1x256"
    phases = [("prefill", *parse_bxs(args.prefill, "prefill")), ("decode", *parse_bxs(args.decode, "decode"))]
    if args.device == "cpu":
        if not args.tiny:
            fail("--device cpu runs the Triton interpreter, minutes per kernel at real sizes; add --tiny")
        os.environ["TRITON_INTERPRET"] = "1"          # before triton is imported
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as e:
        fail(f"needs torch and triton ({e})")
    if args.device == "cuda" and not torch.cuda.is_available():
        fail("needs a CUDA GPU (torch sees none); on a machine without one, try --tiny --device cpu")
    os.environ.setdefault("GPUSIM_RESOURCES", "compiled")
    sys.path.insert(0, str(ROOT))
    from gpusim.compiler.view import view_name
    from gpusim.hardware import load_gpu

    cfg = load_gpu(args.predict_gpu)
    gpu_name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu (Triton interpreter)"
    print(f"layer_on_gpu: {'tiny' if args.tiny else args.model} on {gpu_name}; predictions for {cfg.name} "
          f"({view_name(cfg)} resources)", flush=True)
    bench, bench_graph = bench_fn(args.device)
    t0 = time.perf_counter()
    all_rows, summaries = [], []
    for phase, b, s in phases:
        rows, summary = run_phase(args, phase, b, s, cfg, args.device, bench, bench_graph)
        all_rows += rows
        summaries.append(summary)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import csv

    with open(out / "layer_on_gpu.csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(all_rows[0]))
        wr.writeheader()
        wr.writerows(all_rows)
    meta = dict(model="tiny" if args.tiny else args.model, device=gpu_name, predict_gpu=cfg.name,
                resources=view_name(cfg), triton=__import__("triton").__version__, torch=torch.__version__,
                wall_s=round(time.perf_counter() - t0, 1))
    (out / "layer_on_gpu.json").write_text(json.dumps(dict(meta=meta, layers=summaries, ops=all_rows), indent=2))
    print(f"wrote {out / 'layer_on_gpu.csv'} and {out / 'layer_on_gpu.json'} in {meta['wall_s']} s")
    bad = [r for r in all_rows if r["check"] != "ok"]
    return 1 if bad or not all(math.isfinite(r["measured_us"]) for r in all_rows) else 0


if __name__ == "__main__":
    sys.exit(main())
