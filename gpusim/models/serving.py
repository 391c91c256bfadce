"""Serving metrics of a model at a batch and context: time to first token (the prefill of the
batch's prompts), time per output token (one decode step at the context), tokens per second of
the system and per GPU, and the largest batch whose weights and KV cache fit at that context.

Each time carries its 90% interval: the step's ops summed as if fully correlated (``simulate``).
"""
from __future__ import annotations

from .compose import memory_bytes
from .simulate import KV_DTYPES, WEIGHT_DTYPES, simulate_model
from .spec import load_model

MAX_BATCH = 4096


def max_batch(model, cfg, context: int, tp: int = 1, weight_dtype: str | None = None, kv_dtype: str | None = None,
              dtype: str | None = None) -> int:
    """The largest batch whose weights and KV cache at ``context`` fit one GPU's HBM (0: not one)."""
    m = load_model(model, dtype=dtype)
    wb = WEIGHT_DTYPES.get(weight_dtype) if weight_dtype else None
    kb = KV_DTYPES.get(kv_dtype) if kv_dtype else None

    def fits(b):
        return sum(memory_bytes(m, "decode", b, context, tp, wb, kb).values()) <= cfg.hbm_bytes
    lo, hi = 0, MAX_BATCH
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def _ms(x):
    return round(x / 1e3, 3) if x is not None else ""


def serve(model, *, batch: int, context: int, prompt: int | None = None, gpu="h100", tp: int = 1,
          weight_dtype: str | None = None, kv_dtype: str | None = None, dtype: str | None = None,
          attention: str | None = None, overlap: bool = False) -> dict:
    """One serving point: ``batch`` sequences, prompts of ``prompt`` tokens (default ``context``)
    prefilled together, then decoded one token each over a KV cache of ``context`` tokens."""
    kw = dict(gpu=gpu, tp=tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype, dtype=dtype, overlap=overlap)
    pre = simulate_model(model, phase="prefill", batch=batch, seq_len=prompt or context, **kw)
    dec = simulate_model(model, phase="decode", batch=batch, context=context, attention=attention, **kw)
    cfg = gpu if not isinstance(gpu, str) else None
    if cfg is None:
        from ..hardware import load_gpu
        cfg = load_gpu(gpu)
    row = {"model": dec.model, "gpu": dec.gpu, "tp": tp, "weight_dtype": dec.weight_dtype, "kv_dtype": dec.kv_dtype,
           "batch": batch, "prompt": prompt or context, "context": context,
           "max_batch": max_batch(model, cfg, context, tp, weight_dtype, kv_dtype, dtype)}
    for name, r in (("ttft", pre), ("tpot", dec)):
        ok = r.status == "ok"
        row[f"{name}_ms"] = _ms(r.time_us) if ok else ""
        row[f"{name}_lo_ms"] = _ms(r.time_us_lo) if ok else ""
        row[f"{name}_hi_ms"] = _ms(r.time_us_hi) if ok else ""
        row[f"{name}_status"] = r.status if ok else f"{r.status}: {r.reason}"
    ok = dec.status == "ok"
    row["tokens_per_s"] = round(dec.tokens_per_s, 1) if ok else ""
    row["tokens_per_s_per_gpu"] = round(dec.tokens_per_s_per_gpu, 1) if ok else ""
    row["tokens_per_s_lo"] = round(batch / (dec.time_us_hi * 1e-6), 1) if ok and dec.time_us_hi else ""
    row["tokens_per_s_hi"] = round(batch / (dec.time_us_lo * 1e-6), 1) if ok and dec.time_us_lo else ""
    row["allreduce_us_per_layer"] = round(dec.allreduce_us_per_layer(), 1) if ok else ""
    return row
