"""Measuring on the GPU: correctness against a float64 reference, then timing.

Owns the tolerances and sampling of the output check (``sampled_reference``, ``check_outputs``),
the GPU backend that runs and times workloads through ``gpusim.backends.triton`` on cuda:0
(``TritonCudaBackend``), the PyTorch eager / SDPA-flash attention reference times, and
``measure_point``: build, run on random normal inputs, check, then time on each seed. torch and
triton are imported inside functions only.
"""
from __future__ import annotations

import math
import sys
import time

import numpy as np

from ...backends import numpy_exec
from ...kernels import build
from . import user_kernels
from .common import error_text

TOL = {"fp16": 5e-3, "bf16": 2e-2, "fp32": 1e-2}        # max_rel_err allowed, by storage dtype
BIG_ATTENTION = 1 << 28          # batch*heads*N^2 above which attention is checked on sampled rows
BIG_FLASH_BWD = 1 << 24          # the same for attention_flash_bwd (its full reference holds 5 N x N arrays)
BIG_MATMUL = 1 << 30             # M*N*K above which matmul is checked on sampled rows
SAMPLE_ROWS = 64
SEEDS = (1, 2)


def tolerance(params: dict) -> float:
    return TOL.get(params.get("dtype", "fp16"), 1e-2)


def _attention_rows(q, k, v, rows, causal: bool, window: int = 0) -> np.ndarray:
    """float64 softmax(q[rows] k^T / sqrt(d)) v for one batch*head: a causal mask and a sliding
    window (keys fewer than ``window`` positions away) on absolute rows, as attention_flash has."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    s = q[rows] @ k.T / math.sqrt(q.shape[-1])
    j, i = np.arange(k.shape[0])[None, :], np.asarray(rows)[:, None]
    if causal:
        s = np.where(j <= i, s, -np.inf)
    if window:
        s = np.where(np.abs(i - j) < window, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return (e / e.sum(axis=-1, keepdims=True)) @ v


SAMPLED_ATTENTION = ("attention_flash", "attention_naive")   # outputs o from q, k, v: row-sampled check
BIG_DECODE = 1 << 26             # batch*kv_heads*kv_len*(d + rows) above which decode is checked on sampled (batch, KV head)
SAMPLE_HEADS = 4                 # heads (or (batch, KV head) pairs) of a sampled check: first, last, random


def _sample_heads(n: int, rng, k: int = SAMPLE_HEADS) -> list:
    """First, last and random distinct indices below n, at most k of them, sorted."""
    chosen = {0, n - 1}
    rest = [i for i in range(1, n - 1)]
    if rest and k > len(chosen):
        chosen.update(int(i) for i in rng.choice(rest, size=min(k - len(chosen), len(rest)), replace=False))
    return sorted(chosen)


def _flash_bwd_rows(x: dict, qrows, krows, causal: bool) -> tuple:
    """float64 (dQ[qrows], dK[krows], dV[krows]) of one batch*head from its q, k, v, o, do, lse as the
    backward pass defines them (P = exp(S - L), D = rowsum(dO O), dS = P (dO V^T - D)): the query
    rows need their rows of P, the key rows their columns, so the cost is O(N * rows * d)."""
    q, k, v, o, do, lse = (np.asarray(x[n], dtype=np.float64) for n in ("q", "k", "v", "o", "do", "lse"))
    n = q.shape[0]
    scale = 1.0 / math.sqrt(q.shape[-1])
    delta = (do * o).sum(axis=-1)
    # rows of dQ
    p = np.exp(q[qrows] @ k.T * scale - lse[qrows, None])
    if causal:
        p = np.where(np.arange(n)[None, :] <= np.asarray(qrows)[:, None], p, 0.0)
    ds = p * (do[qrows] @ v.T - delta[qrows, None])
    dq = ds @ k * scale
    # rows of dK and dV: columns krows of P and dS
    pt = np.exp(k[krows] @ q.T * scale - lse[None, :])                     # P^T rows, (len(krows), N)
    if causal:
        pt = np.where(np.arange(n)[None, :] >= np.asarray(krows)[:, None], pt, 0.0)
    dst = pt * (v[krows] @ do.T - delta[None, :])
    return dq, dst @ q * scale, pt @ do


def sampled_reference(workload, inputs: dict, rows: int = SAMPLE_ROWS, seed: int = 0,
                      force_sample: bool = False) -> tuple:
    """float64 references of the outputs: ``({name: (index, ref)}, "full" | "sampled")``.

    ``out[index]`` is what ``ref`` must match. Small problems: ``numpy_exec.reference`` of the
    whole output (index ``...``). Large attention: the first and last batch*head and ``rows``
    random query rows; large attention_flash_bwd: ``rows`` random rows of dQ and of dK/dV in the
    first, last and two random batch*heads; large attention_decode: every output row of the first,
    last and two random (batch, KV head) pairs; large matmul: ``rows`` random rows of C.
    Elementwise is always full. A kernel traced from the user's Triton source: the numpy execution
    of its traced IR (``user_kernels.traced_reference``)."""
    if user_kernels.native_launch(workload) is not None:
        return user_kernels.traced_reference(workload, inputs, seed)
    sampler = _SAMPLERS.get(workload.name)
    if sampler is not None:
        got = sampler(workload, inputs, rows, np.random.default_rng(seed), force_sample)
        if got is not None:
            return got, "sampled"
    full = numpy_exec.reference(workload, inputs)
    return {name: (Ellipsis, full[name]) for name in workload.outputs}, "full"


def _sample_attention(workload, inputs, rows, rng, force):
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    bh, n, d = q.shape
    if not (force or bh * n * n > BIG_ATTENTION):
        return None
    heads = sorted({0, bh - 1})
    r = np.sort(rng.choice(n, size=min(rows, n), replace=False))
    causal = bool(workload.params.get("causal"))
    heads_per_q = workload.params.get("heads", 1)
    kv_heads = workload.params.get("kv_heads") or heads_per_q
    window = workload.params.get("window") or 0

    def kv(h):          # the K/V head a query head reads (GQA: groups of heads share one)
        return (h // heads_per_q) * kv_heads + (h % heads_per_q) // (heads_per_q // kv_heads)

    ref = np.stack([_attention_rows(q[h], k[kv(h)], v[kv(h)], r, causal, window) for h in heads])
    return {"o": (np.ix_(heads, r, np.arange(d)), ref)}


def _sample_flash_bwd(workload, inputs, rows, rng, force):
    bh, n, d = inputs["q"].shape
    if not (force or bh * n * n > BIG_FLASH_BWD):
        return None
    heads = _sample_heads(bh, rng)
    r = np.sort(rng.choice(n, size=min(rows, n), replace=False))
    c = np.sort(rng.choice(n, size=min(rows, n), replace=False))
    got = [_flash_bwd_rows({nm: inputs[nm][h] for nm in ("q", "k", "v", "o", "do", "lse")}, r, c,
                           bool(workload.params.get("causal"))) for h in heads]
    cols = np.arange(d)
    return {"dq": (np.ix_(heads, r, cols), np.stack([g[0] for g in got])),
            "dk": (np.ix_(heads, c, cols), np.stack([g[1] for g in got])),
            "dv": (np.ix_(heads, c, cols), np.stack([g[2] for g in got]))}


def _sample_decode(workload, inputs, rows, rng, force):
    bkv, kv_len, d = inputs["k"].shape
    cost = kv_len * (d + inputs["q"].shape[1])         # float64 values per pair: K, V and the scores
    if not (force or bkv * cost > BIG_DECODE):
        return None
    # (batch, KV head) pairs, each one KV cache and its query tile; 2 when a pair is 32M values
    pairs = _sample_heads(bkv, rng, max(2, min(SAMPLE_HEADS, (1 << 25) // cost)))
    ref = workload.reference({nm: inputs[nm][pairs] for nm in ("q", "k", "v")})["o"]
    return {"o": (np.ix_(pairs, np.arange(ref.shape[1]), np.arange(d)), ref)}


def _sample_matmul(workload, inputs, rows, rng, force):
    a, b = inputs["a"], inputs["b"]
    m, kk = a.shape
    n = b.shape[1]
    if not (force or m * n * kk > BIG_MATMUL):
        return None
    r = np.sort(rng.choice(m, size=min(rows, m), replace=False))
    ref = np.asarray(a[r], dtype=np.float64) @ np.asarray(b, dtype=np.float64)
    return {"c": (np.ix_(r, np.arange(n)), ref)}


# the built-in kernels checked on samples when large (a user kernel is checked by its own reference)
_SAMPLERS = {**{k: _sample_attention for k in SAMPLED_ATTENTION}, "attention_flash_bwd": _sample_flash_bwd,
             "attention_decode": _sample_decode, "matmul": _sample_matmul}


def reference_error(refs: dict, outputs: dict) -> float:
    """Worst max_rel_err of ``outputs`` against ``sampled_reference``'s ``refs``."""
    return max((numpy_exec.max_rel_err(np.asarray(outputs[name])[idx], ref) for name, (idx, ref) in refs.items()),
               default=0.0)


def check_outputs(workload, outputs: dict, inputs: dict, seed: int = 0) -> tuple:
    """(worst max_rel_err over the outputs, "full" | "sampled")."""
    refs, how = sampled_reference(workload, inputs, seed=seed)
    return reference_error(refs, outputs), how


class TritonCudaBackend:
    """Runs and times workloads through ``gpusim.backends.triton`` on cuda:0; a workload traced from
    the user's own Triton kernel runs that kernel, unmodified (``user_kernels``)."""

    name = "triton-cuda"

    def __init__(self):
        self._reference_cache: dict = {}

    def run(self, workload, inputs: dict) -> dict:
        from ...backends.triton import run as tb

        if user_kernels.native_launch(workload) is not None:
            return user_kernels.run(workload, inputs, device="cuda")
        return tb.run_workload(workload, inputs, device="cuda")

    def time(self, workload, inputs: dict) -> dict:
        from ...backends.triton import run as tb

        if user_kernels.native_launch(workload) is not None:
            return user_kernels.time(workload, inputs)
        return tb.time_workload(workload, inputs)

    def torch_attention(self, params: dict) -> dict:
        key = tuple(params.get(k) for k in ("batch", "heads", "seq_len", "head_dim", "dtype", "causal"))
        if key not in self._reference_cache:
            self._reference_cache[key] = torch_attention_times(params)
        return dict(self._reference_cache[key])

    def environment(self) -> dict:
        env = {"backend": self.name}
        try:
            import torch
            import triton

            env.update(torch=torch.__version__, triton=triton.__version__, cuda=str(torch.version.cuda),
                       device=torch.cuda.get_device_name(0))
        except Exception as e:
            env["error"] = error_text(e)
        return env


def _bench_us(fn, n: int = 2) -> tuple:
    """(median, spread %) of n do_bench medians, in microseconds."""
    from triton.testing import do_bench

    ts = [1000.0 * float(do_bench(fn, warmup=25, rep=100, return_mode="median")) for _ in range(n)]
    med = float(np.median(ts))
    return med, (max(ts) - min(ts)) / med * 100.0 if med else None


def torch_attention_times(params: dict) -> dict:
    """do_bench medians of PyTorch eager attention (softmax(q k^T * scale) v) and of
    scaled_dot_product_attention restricted to the flash backend, same shapes and dtype."""
    import torch

    b, h, n, d = params["batch"], params["heads"], params["seq_len"], params["head_dim"]
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[params.get("dtype", "fp16")]
    causal = bool(params.get("causal"))
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dt) for _ in range(3))
    scale = 1.0 / math.sqrt(d)
    out = {}
    try:
        mask = torch.ones(n, n, dtype=torch.bool, device="cuda").tril() if causal else None

        def eager():
            s = (q @ k.transpose(-1, -2)) * scale
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            return torch.softmax(s, dim=-1) @ v

        eager()
        out["eager_us"], out["eager_spread_pct"] = _bench_us(eager)
    except Exception as e:  # e.g. out of memory at long sequences
        out["eager_error"] = error_text(e)
    torch.cuda.empty_cache()
    try:
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            out["sdpa_us"], out["sdpa_spread_pct"] = _bench_us(
                lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    except Exception as e:  # e.g. fp32 has no flash kernel
        out["sdpa_error"] = error_text(e)
    return out


def free_gpu_memory():
    """Drop Python garbage and torch's cached CUDA blocks (between points)."""
    import gc

    gc.collect()
    if "torch" in sys.modules:
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception:
            pass


_INPUT_CACHE: dict = {}      # seed -> (key, inputs): the last plain random inputs of each seed


def point_inputs(workload, seed: int) -> dict:
    """``numpy_exec.random_inputs(workload, seed)``, reused while consecutive points have the same
    input names, shapes and dtypes (a sweep over splits or tiles: a 4 GB KV cache is drawn once per
    seed, not once per point). A kernel with its own generator is never reused (its inputs may depend
    on any parameter)."""
    if workload.make_inputs is not None:
        return numpy_exec.random_inputs(workload, seed)
    key = tuple((n, tuple(workload.tensors[n].shape), workload.tensors[n].dtype) for n in workload.inputs)
    hit = _INPUT_CACHE.get(seed)
    if hit is not None and hit[0] == key:
        return hit[1]
    _INPUT_CACHE.pop(seed, None)
    inputs = numpy_exec.random_inputs(workload, seed)
    _INPUT_CACHE[seed] = (key, inputs)
    return inputs


def measure_point(kernel: str, params: dict, backend, seeds=SEEDS, reference: bool = False) -> dict:
    """Correctness check, then timing on each input set; never raises."""
    rec = {"status": "ok", "reason": "", "max_rel_err": None, "tolerance": tolerance(params), "check": None,
           "measured": None, "reference": None, "timings_s": {}}
    t0 = time.time()
    try:
        wl = build(kernel, params)
        if user_kernels.native_launch(wl) is not None:
            rec["tolerance"] = user_kernels.tolerance(wl)
        inputs = point_inputs(wl, seeds[0])
    except Exception as e:
        rec.update(status="gpu-error", reason=f"build: {error_text(e)}")
        return rec
    rec["timings_s"]["inputs"] = round(time.time() - t0, 2)
    try:
        outs = backend.run(wl, inputs)
    except Exception as e:
        rec.update(status="gpu-error", reason=f"run: {error_text(e)}")
        free_gpu_memory()
        return rec
    rec["timings_s"]["run"] = round(time.time() - t0, 2)
    t1 = time.time()
    try:
        err, how = check_outputs(wl, outs, inputs)
    except Exception as e:
        rec.update(status="gpu-error", reason=f"reference: {error_text(e)}")
        return rec
    finally:
        del outs
        free_gpu_memory()
    rec["timings_s"]["check"] = round(time.time() - t1, 2)
    rec.update(max_rel_err=err, check=how)
    if not err <= rec["tolerance"]:
        rec.update(status="wrong-result", reason=f"max_rel_err {err:.3g} > {rec['tolerance']:g} ({how} check)")
        return rec
    if not _time_seeds(rec, wl, inputs, backend, seeds):
        return rec
    if reference and kernel.startswith("attention"):
        t3 = time.time()
        try:
            rec["reference"] = backend.torch_attention(params)
        except Exception as e:
            rec["reference"] = {"error": error_text(e)}
        rec["timings_s"]["reference"] = round(time.time() - t3, 2)
        free_gpu_memory()
    return rec


def _time_seeds(rec: dict, wl, inputs: dict, backend, seeds) -> bool:
    """Time ``wl`` on each seed's inputs into ``rec["measured"]``; False (``rec`` says why) on an error."""
    t2 = time.time()
    runs = []      # the time of the second seed's inputs is in "time"
    for seed in seeds:
        try:
            inp = inputs if seed == seeds[0] else point_inputs(wl, seed)
            runs.append(backend.time(wl, inp))
        except Exception as e:
            rec.update(status="gpu-error", reason=f"timing: {error_text(e)}")
            free_gpu_memory()
            return False
    free_gpu_memory()
    names = list(runs[0]["per_launch_us"])
    rec["measured"] = {"total_us": [float(r["total_us"]) for r in runs],
                       "per_launch_us": {nm: [float(r["per_launch_us"].get(nm, float("nan"))) for r in runs]
                                         for nm in names},
                       "launch_names": names, "seeds": list(seeds)}
    rec["timings_s"]["time"] = round(time.time() - t2, 2)
    return True
