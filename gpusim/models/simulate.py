"""simulate_model: time one forward step of a model from its kernels, each distinct shape once."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..hardware import GPUConfig, load_gpu
from .compose import Target, default_attention, memory_bytes, model_ops
from .spec import ModelSpec, load_model

GiB = 1 << 30
_CACHE: dict = {}   # (gpu, kernel, params) -> Result, shared by every point of a run


@dataclass
class OpResult:
    op: str
    kernel: str
    count: int
    time_us: float          # all of the op's launches in the step (one launch x count), without a host sync
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
    time_us: float | None = None     # the ops' launches and one host synchronisation

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


def _key(cfg: GPUConfig, kernel: str, params: tuple, fidelity: str) -> tuple:
    return (cfg.name, cfg.config_hash(), kernel, params, fidelity)


def _simulate_one(cfg: GPUConfig, kernel: str, params: tuple, fidelity: str):
    from ..api import simulate
    return simulate(kernel, gpu=cfg, check=False, fidelity=fidelity, **dict(params))


def _run(cfg: GPUConfig, kernel: str, params: tuple, fidelity: str = "fast"):
    key = _key(cfg, kernel, params, fidelity)
    if key not in _CACHE:
        _CACHE[key] = _simulate_one(cfg, kernel, params, fidelity)
    return _CACHE[key]


def _best(cfg: GPUConfig, op):
    """(result, params) of the fastest of the op's candidate tile configs that runs."""
    runs = [(_run(cfg, op.kernel, p, op.fidelity), p) for p in op.candidates]
    ok = [rp for rp in runs if rp[0].status == "ok"]
    return min(ok, key=lambda rp: rp[0].time_us) if ok else runs[0]


def shapes(cfg: GPUConfig, ops) -> list:
    """The distinct (kernel, params) the ops simulate on ``cfg``, every candidate config included."""
    return list(dict.fromkeys((op.kernel, p) for op in ops for p in op.candidates))


def fill_cache(work: list, jobs: int = 1) -> None:
    """Simulate each distinct (GPUConfig, kernel, params, fidelity) of ``work`` not yet cached, in
    ``jobs`` worker processes (one: in this process)."""
    todo = list({_key(*w): w for w in work if _key(*w) not in _CACHE}.items())
    if jobs <= 1 or len(todo) <= 1:
        for key, w in todo:
            _CACHE[key] = _simulate_one(*w)
        return
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=min(jobs, len(todo))) as pool:
        futures = {key: pool.submit(_simulate_one, *args) for key, args in todo}
        for key, f in futures.items():
            _CACHE[key] = f.result()


def _infeasible_memory(mem: dict, cfg: GPUConfig) -> str:
    need = sum(mem.values())
    if need <= cfg.hbm_bytes:
        return ""
    parts = ", ".join(f"{k} {v / GiB:.1f} GiB" for k, v in mem.items() if v)
    return f"needs {need / GiB:.1f} GiB ({parts}) > {cfg.name}'s {cfg.hbm_bytes / GiB:.1f} GiB of HBM"


def _prepare(model, phase, batch, seq_len, context, gpu, attention, dtype):
    m = load_model(model, dtype=dtype)
    cfg = gpu if isinstance(gpu, GPUConfig) else load_gpu(gpu)
    seq = seq_len if phase == "prefill" else context
    if seq is None:
        raise ValueError(f"phase {phase!r} needs {'seq_len' if phase == 'prefill' else 'context'}")
    attention = attention or default_attention(phase)
    ops = model_ops(m, phase, batch, seq, attention, Target.of(cfg))
    res = ModelResult(m.name, cfg.name, phase, batch, seq, attention, "ok", memory=memory_bytes(m, phase, batch, seq))
    why = _infeasible_memory(res.memory, cfg)
    if why:
        res.status, res.reason = "infeasible", why
    return cfg, ops, res


def work_of(model: str | ModelSpec, *, phase: str = "prefill", batch: int = 1, seq_len: int | None = None,
            context: int | None = None, gpu: str | GPUConfig = "h100", attention: str | None = None,
            dtype: str | None = None) -> list:
    """The (GPUConfig, kernel, params, fidelity) that ``simulate_model`` with these arguments
    simulates, every candidate tile config included (none for a point that does not fit in HBM):
    for ``fill_cache``."""
    cfg, ops, res = _prepare(model, phase, batch, seq_len, context, gpu, attention, dtype)
    return [] if res.status != "ok" else [(cfg, op.kernel, p, op.fidelity) for op in ops for p in op.candidates]


def simulate_model(model: str | ModelSpec, *, phase: str = "prefill", batch: int = 1, seq_len: int | None = None,
                   context: int | None = None, gpu: str | GPUConfig = "h100", attention: str | None = None,
                   dtype: str | None = None) -> ModelResult:
    """One forward step: ``prefill`` of ``batch`` x ``seq_len`` tokens, or ``decode`` of one new token
    for each of ``batch`` sequences over a KV cache of ``context`` tokens. Each op's kernel runs at
    the tile config ``compose`` picks for the GPU (the fastest of its candidates)."""
    cfg, ops, res = _prepare(model, phase, batch, seq_len, context, gpu, attention, dtype)
    if res.status != "ok":
        return res
    for op in ops:
        r, params = _best(cfg, op)
        if r.status != "ok":
            res.status, res.reason = r.status, f"{op.name} ({op.kernel}): {r.reason}"
            return res
        # a kernel's time_us ends with one host synchronisation; the step's launches run back to
        # back on one stream and synchronise once, so each op counts its launches without it
        launches = (r.time_us - cfg.sync_overhead_us) * op.count
        res.ops.append(OpResult(op.name, op.kernel, op.count, launches, r.bound,
                                r.dram_bytes * op.count, r.flops * op.count, dict(params), op.stand_in))
    res.time_us = sum(o.time_us for o in res.ops) + cfg.sync_overhead_us
    for o in res.ops:
        o.share = o.time_us / res.time_us
    return res
