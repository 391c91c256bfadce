"""One transformer layer and a whole model as a list of built-in kernel launches.

Each op is (name, kernel, params, count): ``count`` is how many times the model runs it (layers for
a layer's ops, 1 for the embedding and LM head). Ops with no kernel of their own are stand-ins
with the same HBM bytes, named as such: RoPE, the residual adds, the activation and the embedding
gather run as ``elementwise_fused`` (one read and one write per element), with ``n`` chosen so the
bytes moved equal the real op's (an add reads two tensors and writes one: n = 1.5 x elements).
"""
from __future__ import annotations

from dataclasses import dataclass

from .spec import ModelSpec

PHASES = ("prefill", "decode")
ATTENTION = ("flash", "naive", "decode")


@dataclass(frozen=True)
class Op:
    name: str
    kernel: str
    params: tuple          # sorted (key, value) pairs
    count: int
    stand_in: str = ""     # what the kernel stands in for, when it is not the op itself


def _op(name, kernel, count, stand_in="", **params) -> Op:
    return Op(name, kernel, tuple(sorted(params.items())), count, stand_in)


def _ew(name, elems: float, count, dtype, what) -> Op:
    n = max(1024, int(round(elems / 1024)) * 1024)
    return _op(name, "elementwise_fused", count, what, n=n, dtype=dtype)


def _gemm(name, count, M, N, K, dtype, sm_count=132) -> Op:
    """A GEMM with tiles picked for its shape: BLOCK_M no taller than M needs (16 at decode), and
    BLOCK_N narrowed until the grid has a CTA for every SM where the shape allows."""
    bm = 16
    while bm < 128 and bm < M:
        bm *= 2
    bn = 128
    while bn > 32 and -(-M // bm) * -(-N // bn) < sm_count:
        bn //= 2
    bk = 128 if bm <= 32 else 64
    return _op(name, "matmul", count, M=M, N=N, K=K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, dtype=dtype)


def default_attention(phase: str) -> str:
    return "decode" if phase == "decode" else "flash"


def _attention(m: ModelSpec, phase, attention, batch, seq, L, dt) -> Op:
    if attention == "decode":
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


def model_ops(m: ModelSpec, phase: str, batch: int, seq: int, attention: str | None = None) -> list[Op]:
    """The ops of one forward step: ``seq`` is the prompt length at prefill, the KV-cache length
    (context) at decode, where each of the ``batch`` sequences adds one token."""
    if phase not in PHASES:
        raise ValueError(f"phase {phase!r}: allowed {', '.join(PHASES)}")
    attention = attention or default_attention(phase)
    if attention not in ATTENTION:
        raise ValueError(f"attention {attention!r}: allowed {', '.join(ATTENTION)}")
    T = batch * seq if phase == "prefill" else batch
    L, dt, h = m.layers, m.dtype, m.hidden
    q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
    norm = m.norm
    ffn_out = 2 * m.ffn if m.activation == "swiglu" else m.ffn
    ops = [_ew("embedding", T * h, 1, dt, "embedding gather"),
           _op("attn_norm", norm, L, rows=T, cols=h, dtype=dt),
           _gemm("qkv_proj", L, T, q + 2 * kv, h, dt)]
    if m.rope:
        ops.append(_ew("rope", T * (q + kv), L, dt, "RoPE on Q and K"))
    ops += [_attention(m, phase, attention, batch, seq, L, dt),
            _gemm("o_proj", L, T, h, q, dt),
            _ew("residual_1", 1.5 * T * h, L, dt, "residual add"),
            _op("ffn_norm", norm, L, rows=T, cols=h, dtype=dt),
            _gemm("up_proj" if m.activation == "gelu" else "gate_up_proj", L, T, ffn_out, h, dt),
            _ew(m.activation, (1.5 if m.activation == "swiglu" else 1.0) * T * m.ffn, L, dt, m.activation),
            _gemm("down_proj", L, T, h, m.ffn, dt),
            _ew("residual_2", 1.5 * T * h, L, dt, "residual add"),
            _op("final_norm", norm, 1, rows=T, cols=h, dtype=dt),
            # at prefill the next token's logits come from each sequence's last position
            _gemm("lm_head", 1, batch, m.vocab, h, dt)]
    return ops


def memory_bytes(m: ModelSpec, phase: str, batch: int, seq: int) -> dict:
    """HBM the step needs: weights, the KV cache, and at prefill one layer's live activations."""
    kv_cache = batch * (seq + (1 if phase == "decode" else 0)) * m.kv_bytes_per_token()
    T = batch * seq if phase == "prefill" else batch
    q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
    ffn_out = 2 * m.ffn if m.activation == "swiglu" else m.ffn
    act = T * (2 * m.hidden + q + 2 * kv + ffn_out + m.ffn) * m.dtype_bytes if phase == "prefill" else 0
    return {"weights": m.weight_bytes(), "kv_cache": kv_cache, "activations": act}
