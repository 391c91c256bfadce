"""simulate_model: time one forward step of a model from its kernels, each distinct shape once."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..hardware import GPUConfig, load_gpu
from .compose import default_attention, memory_bytes, model_ops
from .spec import ModelSpec, load_model

GiB = 1 << 30
_CACHE: dict = {}   # (gpu, kernel, params) -> Result, shared by every point of a run


@dataclass
class OpResult:
    op: str
    kernel: str
    count: int
    time_us: float          # all of the op's launches in the step (one launch x count)
    bound: str
    dram_bytes: float
    flops: float
    params: dict
    stand_in: str = ""
    share: float = 0.0


@dataclass
class ModelResult:
    model: str
    gpu: str
    phase: str
    batch: int
    seq: int                # prompt length at prefill, context at decode
    attention: str
    status: str
    reason: str = ""
    ops: list = field(default_factory=list)
    memory: dict = field(default_factory=dict)
    time_us: float | None = None

    @property
    def tokens(self) -> int:
        return self.batch * self.seq if self.phase == "prefill" else self.batch

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / (self.time_us * 1e-6) if self.time_us else 0.0

    def table(self):
        import pandas as pd
        return pd.DataFrame([{"op": o.op, "kernel": o.kernel, "x": o.count, "time_us": round(o.time_us, 1),
                              "share": round(o.share, 4), "bound": o.bound, "dram_MB": round(o.dram_bytes / 1e6, 1),
                              "GFLOP": round(o.flops / 1e9, 2)} for o in self.ops])


def _run(cfg: GPUConfig, kernel: str, params: tuple):
    from ..api import simulate
    key = (cfg.name, kernel, params)
    if key not in _CACHE:
        _CACHE[key] = simulate(kernel, gpu=cfg, check=False, **dict(params))
    return _CACHE[key]


def _infeasible_memory(mem: dict, cfg: GPUConfig) -> str:
    need = sum(mem.values())
    if need <= cfg.hbm_bytes:
        return ""
    parts = ", ".join(f"{k} {v / GiB:.1f} GiB" for k, v in mem.items() if v)
    return f"needs {need / GiB:.1f} GiB ({parts}) > {cfg.name}'s {cfg.hbm_bytes / GiB:.1f} GiB of HBM"


def simulate_model(model: str | ModelSpec, *, phase: str = "prefill", batch: int = 1, seq_len: int | None = None,
                   context: int | None = None, gpu: str | GPUConfig = "h100", attention: str | None = None,
                   dtype: str | None = None) -> ModelResult:
    """One forward step: ``prefill`` of ``batch`` x ``seq_len`` tokens, or ``decode`` of one new token
    for each of ``batch`` sequences over a KV cache of ``context`` tokens."""
    m = load_model(model, dtype=dtype)
    cfg = gpu if isinstance(gpu, GPUConfig) else load_gpu(gpu)
    seq = seq_len if phase == "prefill" else context
    if seq is None:
        raise ValueError(f"phase {phase!r} needs {'seq_len' if phase == 'prefill' else 'context'}")
    attention = attention or default_attention(phase)
    ops = model_ops(m, phase, batch, seq, attention)
    res = ModelResult(m.name, cfg.name, phase, batch, seq, attention, "ok", memory=memory_bytes(m, phase, batch, seq))
    why = _infeasible_memory(res.memory, cfg)
    if why:
        res.status, res.reason = "infeasible", why
        return res
    for op in ops:
        r = _run(cfg, op.kernel, op.params)
        if r.status != "ok":
            res.status, res.reason = r.status, f"{op.name} ({op.kernel}): {r.reason}"
            return res
        res.ops.append(OpResult(op.name, op.kernel, op.count, r.time_us * op.count, r.bound,
                                r.dram_bytes * op.count, r.flops * op.count, dict(op.params), op.stand_in))
    res.time_us = sum(o.time_us for o in res.ops)
    for o in res.ops:
        o.share = o.time_us / res.time_us
    return res
