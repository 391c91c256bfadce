"""One transformer layer and a whole model as a list of built-in kernel launches.

Each op is (name, kernel, params, count): ``count`` is how many times the model runs it (layers for
a layer's ops, 1 for the embedding and LM head). Ops with no kernel of their own are stand-ins
with the same HBM bytes, named as such: RoPE, the residual adds, the activation and the embedding
gather run as ``elementwise_fused`` (one read and one write per element), with ``n`` chosen so the
bytes moved equal the real op's (an add reads two tensors and writes one: n = 1.5 x elements).

Tiles are picked per shape and GPU (``Target``: its SM count and shared memory per CTA):

* a GEMM of at most ``GEMV_MAX_M`` rows (a decode step's projections, the LM head) runs as
  ``gemv_splitk``, the weight stored as a linear layer stores it (``[N, K]``): 32 columns per CTA
  (wider where the grid still has 4 CTAs per SM), K in steps of 256 (128 where four stages of
  those tiles exceed the shared memory), 4 stages; where that grid has fewer than 2 CTAs per SM, a
  split of K that fills them is the alternative, and the faster of the two is used
  (``Op.alternatives``). These run at full fidelity: loop coarsening makes a streaming GEMV 5-28%
  quicker than its full simulation;
* a GEMM of at least 128 rows with a full wave of 128 x 256 output tiles runs as ``matmul`` at
  128 x 256 x 64 with 8 warps (the fastest measured of the 4096^3 tile sweep on an H200), as many
  stages (4, else 3) as the shared memory holds;
* any other GEMM: ``BLOCK_M`` no taller than M needs, ``BLOCK_N`` narrowed until the grid has a
  CTA for every SM where the shape allows;
* the elementwise stand-ins of many elements run 8192 elements per CTA on 8 warps (their time is
  that of the bytes; fewer, larger CTAs are quicker to simulate), small ones 1024 on 4.
"""
from __future__ import annotations

from dataclasses import dataclass

from .spec import ModelSpec

PHASES = ("prefill", "decode")
ATTENTION = ("flash", "naive", "decode")


GEMV_MAX_M = 16        # GEMMs of at most this many rows run as gemv_splitk
EW_BIG_BLOCK = 8192    # elements per CTA of a large elementwise stand-in


@dataclass(frozen=True)
class Target:
    """What the tile choice needs to know of the GPU."""
    sm_count: int = 132
    sram_bytes_per_cta_max: int = 232448

    @classmethod
    def of(cls, cfg) -> "Target":
        return cls(cfg.sm_count, cfg.sram_bytes_per_cta_max)


@dataclass(frozen=True)
class Op:
    name: str
    kernel: str
    params: tuple          # sorted (key, value) pairs
    count: int
    stand_in: str = ""     # what the kernel stands in for, when it is not the op itself
    alternatives: tuple = ()   # other params tuples of the same kernel; the fastest of all is used
    fidelity: str = "fast"     # "full" where sampling and loop coarsening are off by more than 2%

    @property
    def candidates(self) -> tuple:
        return (self.params,) + self.alternatives


def _op(name, kernel, count, stand_in="", **params) -> Op:
    return Op(name, kernel, tuple(sorted(params.items())), count, stand_in)


def _cdiv(a, b):
    return -(-a // b)


def _ew(name, elems: float, count, dtype, what, tg: Target = Target()) -> Op:
    n = max(1024, int(round(elems / 1024)) * 1024)
    if n >= EW_BIG_BLOCK * tg.sm_count * 8:       # 8+ CTAs of 8192 per SM
        return _op(name, "elementwise_fused", count, what, n=n, dtype=dtype, BLOCK=EW_BIG_BLOCK, num_warps=8)
    return _op(name, "elementwise_fused", count, what, n=n, dtype=dtype)


def _gemv(name, count, M, N, K, dtype, tg: Target) -> Op:
    bn = 32
    while bn < 128 and _cdiv(N, 2 * bn) >= 4 * tg.sm_count:
        bn *= 2
    es = 4 if dtype == "fp32" else 2
    bk = 256 if 4 * (16 + bn) * 256 * es <= tg.sram_bytes_per_cta_max else 128     # 4 stages of A and W tiles
    base = dict(M=M, N=N, K=K, BLOCK_N=bn, BLOCK_K=bk, num_stages=4, num_warps=4, dtype=dtype)
    alts = ()
    ctas = _cdiv(N, bn) * _cdiv(M, 16)
    if ctas < 2 * tg.sm_count and K >= 4 * bk:
        split = 2
        while split < 16 and ctas * split < 2 * tg.sm_count and K >= 2 * split * bk:
            split *= 2
        alts = (tuple(sorted(dict(base, SPLIT_K=split).items())),)
    # a streaming GEMV's coarsened loop (fast fidelity) runs 5-28% quicker than its full simulation
    return Op(name, "gemv_splitk", tuple(sorted(dict(base, SPLIT_K=1).items())), count, "", alts, "full")


def _gemm(name, count, M, N, K, dtype, tg: Target = Target()) -> Op:
    """A GEMM with tiles picked for its shape and GPU (see the module's docstring)."""
    if M <= GEMV_MAX_M:
        return _gemv(name, count, M, N, K, dtype, tg)
    if M >= 128 and _cdiv(M, 128) * _cdiv(N, 256) >= tg.sm_count:
        per_stage = (128 * 64 + 64 * 256) * (4 if dtype == "fp32" else 2)
        stages = 4 if 4 * per_stage <= tg.sram_bytes_per_cta_max else 3
        return _op(name, "matmul", count, M=M, N=N, K=K, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8,
                   num_stages=stages, dtype=dtype)
    bm = 16
    while bm < 128 and bm < M:
        bm *= 2
    bn = 128
    while bn > 32 and _cdiv(M, bm) * _cdiv(N, bn) < tg.sm_count:
        bn //= 2
    bk = 128 if bm <= 32 else 64
    return _op(name, "matmul", count, M=M, N=N, K=K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, dtype=dtype)


def default_attention(phase: str) -> str:
    return "decode" if phase == "decode" else "flash"


def _attention(m: ModelSpec, phase, attention, batch, seq, L, dt, kv_bytes: float | None = None) -> Op:
    if attention == "decode":
        es = 4 if dt == "fp32" else 2
        if kv_bytes and kv_bytes < es and phase == "decode":
            # a KV cache of narrower elements: the same kernel over a cache of kv_len x kv_bytes / es
            # tokens (the same bytes; decode attention is bound by them)
            kvl = max(1, int(round(seq * kv_bytes / es)))
            return _op("attention", "attention_decode", L, f"{kv_bytes:g}-byte KV cache: kv_len x {kv_bytes / es:g}",
                       batch=batch, heads=m.heads, kv_heads=m.kv_heads, q_len=1, kv_len=kvl, head_dim=m.head_dim,
                       dtype=dt)
        return _op("attention", "attention_decode", L, batch=batch, heads=m.heads, kv_heads=m.kv_heads,
                   q_len=1 if phase == "decode" else seq, kv_len=seq, head_dim=m.head_dim, dtype=dt)
    if phase == "decode":
        raise ValueError(f"attention {attention!r} does not take one new token; decode uses 'decode'")
    if attention == "flash":
        return _op("attention", "attention_flash", L, batch=batch, heads=m.heads, kv_heads=m.kv_heads,
                   seq_len=seq, head_dim=m.head_dim, causal=True, dtype=dt)
    # naive attention has no GQA and no causal mask: K/V broadcast to every head, the full N x N
    return _op("attention", "attention_naive", L, "non-causal, K/V repeated to every head",
               batch=batch, heads=m.heads, seq_len=seq, head_dim=m.head_dim, dtype=dt)


def _qgemm(name, count, M, N, K, dt, tg: Target, wbytes: float) -> Op:
    """A projection whose weights are stored in ``wbytes`` bytes per element (the model's dtype
    otherwise): a decode GEMV streams its weights, so it runs as the GEMV over N x wbytes / dtype
    bytes columns (the same weight bytes; the dequantization's ALU work is not charged); a prefill
    GEMM dequantizes to the model's dtype and computes at its rate, so it runs as it is."""
    es = 4 if dt == "fp32" else 2
    if wbytes >= es or M > GEMV_MAX_M:
        return _gemm(name, count, M, N, K, dt, tg)
    op = _gemv(name, count, M, max(32, int(round(N * wbytes / es))), K, dt, tg)
    return Op(op.name, op.kernel, op.params, op.count, f"{wbytes:g}-byte weights: GEMV over N x {wbytes / es:g}",
              op.alternatives, op.fidelity)


def local_dims(m: ModelSpec, tp: int) -> tuple:
    """(query heads, KV heads, FFN size) one of ``tp`` GPUs holds: heads and the FFN split evenly,
    KV heads split, or each held by tp / kv_heads GPUs where tp exceeds them."""
    if tp < 1 or m.heads % tp or m.ffn % tp or (m.kv_heads % tp and tp % m.kv_heads):
        raise ValueError(f"tp {tp}: must divide heads ({m.heads}) and ffn ({m.ffn}), and divide or be a multiple "
                         f"of kv_heads ({m.kv_heads})")
    return m.heads // tp, max(1, m.kv_heads // tp), m.ffn // tp


def model_ops(m: ModelSpec, phase: str, batch: int, seq: int, attention: str | None = None,
              target: Target | None = None, tp: int = 1, weight_bytes: float | None = None,
              kv_bytes: float | None = None) -> list[Op]:
    """The ops one GPU runs in one forward step: ``seq`` is the prompt length at prefill, the
    KV-cache length (context) at decode, where each of the ``batch`` sequences adds one token.
    ``target``: the GPU the tiles are picked for (default: 132 SMs, 227 KiB of shared memory per
    CTA). ``tp`` > 1 splits the model over that many GPUs (Megatron's tensor parallelism: QKV and
    gate/up column-parallel, output and down projections row-parallel, each followed by an
    all-reduce of the hidden states; the embedding and LM head split over the vocabulary).
    ``weight_bytes`` / ``kv_bytes``: bytes per weight / KV-cache element (default the model's)."""
    tg = target or Target()
    if phase not in PHASES:
        raise ValueError(f"phase {phase!r}: allowed {', '.join(PHASES)}")
    attention = attention or default_attention(phase)
    if attention not in ATTENTION:
        raise ValueError(f"attention {attention!r}: allowed {', '.join(ATTENTION)}")
    T = batch * seq if phase == "prefill" else batch
    L, dt, h = m.layers, m.dtype, m.hidden
    heads, kv_heads, ffn = local_dims(m, tp)
    q, kv = heads * m.head_dim, kv_heads * m.head_dim
    norm = m.norm
    ffn_out = 2 * ffn if m.activation == "swiglu" else ffn
    wb = weight_bytes or m.dtype_bytes
    ops = [_ew("embedding", T * h, 1, dt, "embedding gather", tg),
           _op("attn_norm", norm, L, rows=T, cols=h, dtype=dt),
           _qgemm("qkv_proj", L, T, q + 2 * kv, h, dt, tg, wb)]
    if m.rope:
        ops.append(_ew("rope", T * (q + kv), L, dt, "RoPE on Q and K", tg))
    local = m if tp == 1 else m.model_copy(update={"heads": heads, "kv_heads": kv_heads})
    ops += [_attention(local, phase, attention, batch, seq, L, dt, kv_bytes),
            _qgemm("o_proj", L, T, h, q, dt, tg, wb),
            _ew("residual_1", 1.5 * T * h, L, dt, "residual add", tg),
            _op("ffn_norm", norm, L, rows=T, cols=h, dtype=dt),
            _qgemm("up_proj" if m.activation == "gelu" else "gate_up_proj", L, T, ffn_out, h, dt, tg, wb),
            _ew(m.activation, (1.5 if m.activation == "swiglu" else 1.0) * T * ffn, L, dt, m.activation, tg),
            _qgemm("down_proj", L, T, h, ffn, dt, tg, wb),
            _ew("residual_2", 1.5 * T * h, L, dt, "residual add", tg),
            _op("final_norm", norm, 1, rows=T, cols=h, dtype=dt),
            # at prefill the next token's logits come from each sequence's last position
            _gemm("lm_head", 1, batch, _cdiv(m.vocab, tp), h, dt, tg)]
    if tp > 1:
        ops += collective_ops(m, T, batch, tp)
    return ops


def collective_ops(m: ModelSpec, T: int, batch: int, tp: int) -> list[Op]:
    """The collectives of one step on ``tp`` GPUs: an all-reduce of the hidden states after each
    row-parallel projection (two per layer), one after the vocabulary-parallel embedding, and an
    all-gather of the logits."""
    act = T * m.hidden * m.dtype_bytes
    return [_op("embedding_allreduce", "all_reduce", 1, "NCCL all-reduce", bytes=act, gpus=tp),
            _op("attn_allreduce", "all_reduce", m.layers, "NCCL all-reduce", bytes=act, gpus=tp),
            _op("mlp_allreduce", "all_reduce", m.layers, "NCCL all-reduce", bytes=act, gpus=tp),
            _op("logits_allgather", "all_gather", 1, "NCCL all-gather", bytes=batch * m.vocab * m.dtype_bytes,
                gpus=tp)]


def memory_bytes(m: ModelSpec, phase: str, batch: int, seq: int, tp: int = 1, weight_bytes: float | None = None,
                 kv_bytes: float | None = None) -> dict:
    """HBM one GPU needs for the step: its weights, its KV cache, and at prefill one layer's live
    activations. With ``weight_bytes`` the layers' projections are stored at that size (the
    embedding, LM head and norms stay in the model's dtype)."""
    heads, kv_heads, ffn = local_dims(m, tp)
    es = m.dtype_bytes
    wb, kb = weight_bytes or es, kv_bytes or es
    q, kv = heads * m.head_dim, kv_heads * m.head_dim
    proj = m.hidden * (q + 2 * kv) + q * m.hidden + (3 if m.activation == "swiglu" else 2) * m.hidden * ffn
    emb = _cdiv(m.vocab, tp) * m.hidden * (1 if m.tied_embeddings else 2)
    weights = m.layers * (proj * wb + 2 * m.hidden * es) + (emb + m.hidden) * es
    kv_cache = batch * (seq + (1 if phase == "decode" else 0)) * 2 * m.layers * kv * kb
    T = batch * seq if phase == "prefill" else batch
    ffn_out = 2 * ffn if m.activation == "swiglu" else ffn
    act = T * (2 * m.hidden + q + 2 * kv + ffn_out + ffn) * es if phase == "prefill" else 0
    return {"weights": weights, "kv_cache": kv_cache, "activations": act}
