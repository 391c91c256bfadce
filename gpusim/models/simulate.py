"""simulate_model: time one forward step of a model from its kernels, each distinct shape once."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..hardware import GPUConfig, load_gpu
from .collectives import CollectiveError, collective_time
from .compose import Target, default_attention, memory_bytes, model_ops
from .spec import ModelSpec, load_model

COLLECTIVE_KERNELS = ("all_reduce", "all_gather")
# bytes per element a model's projection weights / KV cache can be stored in
WEIGHT_DTYPES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
KV_DTYPES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
TP_SIZES = (1, 2, 4, 8)

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
    time_us_lo: float | None = None     # the op's 90% interval (its kernel's, times count)
    time_us_hi: float | None = None


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
    time_us: float | None = None     # the ops' launches and one host synchronisation (one GPU's step)
    tp: int = 1                      # GPUs the model is split over; every GPU runs the same ops
    weight_dtype: str = ""
    kv_dtype: str = ""
    overlap: bool = False            # collectives hidden behind compute (perfect overlap: a bound)
    # the 90% interval of time_us: each op's interval summed as if fully correlated (every op off
    # in the same direction at once), the conservative choice
    time_us_lo: float | None = None
    time_us_hi: float | None = None

    @property
    def tokens(self) -> int:
        return self.batch * self.seq if self.phase == "prefill" else self.batch

    @property
    def tokens_per_s(self) -> float:
        """Tokens per second of the whole system (all ``tp`` GPUs serve the same batch)."""
        return self.tokens / (self.time_us * 1e-6) if self.time_us else 0.0

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.tp

    @property
    def comm_us(self) -> float:
        return sum(o.time_us for o in self.ops if o.kernel in COLLECTIVE_KERNELS)

    def allreduce_us_per_layer(self) -> float:
        """The two all-reduces of one layer (attention's and the MLP's), us."""
        return sum(o.time_us / o.count for o in self.ops if o.op in ("attn_allreduce", "mlp_allreduce"))

    def table(self):
        import pandas as pd
        rows = [{"op": o.op, "kernel": o.kernel, "x": o.count, "time_us": round(o.time_us, 1),
                 "90% range": "" if o.time_us_lo is None else f"{o.time_us_lo:.1f}-{o.time_us_hi:.1f}",
                 "share": round(o.share, 4), "bound": o.bound, "dram_MB": round(o.dram_bytes / 1e6, 1),
                 "GFLOP": round(o.flops / 1e9, 2)} for o in self.ops]
        return pd.DataFrame(rows, columns=["op", "kernel", "x", "time_us", "90% range", "share", "bound", "dram_MB",
                                           "GFLOP"])

    def to_string(self) -> str:
        """The op table, every column shown (pandas does not wrap or truncate it)."""
        return self.table().to_string(index=False, max_cols=None, max_colwidth=None, line_width=None)


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


def _dtype_bytes(table: dict, name: str | None, what: str) -> float | None:
    if name is None:
        return None
    if name not in table:
        raise ValueError(f"{what} {name!r}: allowed {', '.join(table)}")
    return table[name]


def _prepare(model, phase, batch, seq_len, context, gpu, attention, dtype, tp=1, weight_dtype=None, kv_dtype=None):
    m = load_model(model, dtype=dtype)
    cfg = gpu if isinstance(gpu, GPUConfig) else load_gpu(gpu)
    seq = seq_len if phase == "prefill" else context
    if seq is None:
        raise ValueError(f"phase {phase!r} needs {'seq_len' if phase == 'prefill' else 'context'}")
    if tp not in TP_SIZES:
        raise ValueError(f"tp {tp!r}: allowed {', '.join(map(str, TP_SIZES))}")
    wb = _dtype_bytes(WEIGHT_DTYPES, weight_dtype, "weight_dtype")
    kb = _dtype_bytes(KV_DTYPES, kv_dtype, "kv_dtype")
    attention = attention or default_attention(phase)
    ops = model_ops(m, phase, batch, seq, attention, Target.of(cfg), tp, wb, kb)
    res = ModelResult(m.name, cfg.name, phase, batch, seq, attention, "ok",
                      memory=memory_bytes(m, phase, batch, seq, tp, wb, kb), tp=tp,
                      weight_dtype=weight_dtype or m.dtype, kv_dtype=kv_dtype or m.dtype)
    why = _infeasible_memory(res.memory, cfg)
    if why:
        res.status, res.reason = "infeasible", (f"per GPU of {tp}: " if tp > 1 else "") + why
    elif tp > 1:
        try:
            collective_time(cfg, "all_reduce", tp, 1.0)
        except CollectiveError as e:
            res.status, res.reason = "infeasible", str(e)
    return cfg, ops, res


def work_of(model: str | ModelSpec, *, phase: str = "prefill", batch: int = 1, seq_len: int | None = None,
            context: int | None = None, gpu: str | GPUConfig = "h100", attention: str | None = None,
            dtype: str | None = None, tp: int = 1, weight_dtype: str | None = None, kv_dtype: str | None = None,
            overlap: bool = False) -> list:
    """The (GPUConfig, kernel, params, fidelity) that ``simulate_model`` with these arguments
    simulates, every candidate tile config included (none for a point that does not fit in HBM):
    for ``fill_cache``."""
    cfg, ops, res = _prepare(model, phase, batch, seq_len, context, gpu, attention, dtype, tp, weight_dtype, kv_dtype)
    return [] if res.status != "ok" else [(cfg, op.kernel, p, op.fidelity) for op in ops for p in op.candidates
                                          if op.kernel not in COLLECTIVE_KERNELS]


def _collective_op(cfg: GPUConfig, op) -> OpResult:
    p = dict(op.params)
    c = collective_time(cfg, op.kernel, p["gpus"], p["bytes"])
    e = collective_error(cfg)
    t = c.time_us * op.count
    return OpResult(op.name, op.kernel, op.count, t, f"{c.algorithm}/{c.protocol}", 0.0, 0.0, p, op.stand_in,
                    time_us_lo=t * (1 - e), time_us_hi=t * (1 + e))


def collective_error(cfg: GPUConfig) -> float:
    """The relative half-width of a collective's 90% interval: the model's worst error on the
    published figures it was not fitted to (NVLink 4 nodes); 30% on other links, which no published
    size sweep here checks."""
    if cfg.nvlink_generation != 4 or cfg.name.endswith("-ideal"):
        return 0.3
    key = ("collective_error", cfg.config_hash())
    if key not in _CACHE:
        from .collectives_fit import CHECK, errors
        _CACHE[key] = max(abs(e) for *_, e in errors(cfg, CHECK))
    return _CACHE[key]


def _kernel_op(cfg: GPUConfig, op, r, params) -> OpResult:
    # a kernel's time_us ends with one host synchronisation; the step's launches run back to
    # back on one stream and synchronise once, so each op counts its launches without it
    sync = cfg.sync_overhead_us
    launches = (r.time_us - sync) * op.count
    lo, hi = r.time_us_lo, r.time_us_hi
    return OpResult(op.name, op.kernel, op.count, launches, r.bound, r.dram_bytes * op.count, r.flops * op.count,
                    dict(params), op.stand_in,
                    time_us_lo=None if lo is None else max(0.0, lo - sync) * op.count,
                    time_us_hi=None if hi is None else max(0.0, hi - sync) * op.count)


def _total(ops: list, sync: float, overlap: bool, attr: str = "time_us") -> float | None:
    vals = [getattr(o, attr) for o in ops]
    if any(v is None for v in vals):
        return None
    comm = sum(v for o, v in zip(ops, vals) if o.kernel in COLLECTIVE_KERNELS)
    compute = sum(vals) - comm
    return (max(compute, comm) if overlap else compute + comm) + sync


def simulate_model(model: str | ModelSpec, *, phase: str = "prefill", batch: int = 1, seq_len: int | None = None,
                   context: int | None = None, gpu: str | GPUConfig = "h100", attention: str | None = None,
                   dtype: str | None = None, tp: int = 1, weight_dtype: str | None = None, kv_dtype: str | None = None,
                   overlap: bool = False) -> ModelResult:
    """One forward step: ``prefill`` of ``batch`` x ``seq_len`` tokens, or ``decode`` of one new token
    for each of ``batch`` sequences over a KV cache of ``context`` tokens. Each op's kernel runs at
    the tile config ``compose`` picks for the GPU (the fastest of its candidates). ``tp``: GPUs the
    model is split over (tensor parallelism; the times are one GPU's, every GPU runs the same
    ops); ``weight_dtype`` / ``kv_dtype``: how the projection weights / KV cache are stored
    (``WEIGHT_DTYPES``, ``KV_DTYPES``); ``overlap``: collectives hidden behind the compute (a
    perfect overlap, the optimistic bound; off by default: they add)."""
    cfg, ops, res = _prepare(model, phase, batch, seq_len, context, gpu, attention, dtype, tp, weight_dtype, kv_dtype)
    res.overlap = overlap
    if res.status != "ok":
        return res
    for op in ops:
        if op.kernel in COLLECTIVE_KERNELS:
            res.ops.append(_collective_op(cfg, op))
            continue
        r, params = _best(cfg, op)
        if r.status != "ok":
            res.status, res.reason = r.status, f"{op.name} ({op.kernel}): {r.reason}"
            return res
        res.ops.append(_kernel_op(cfg, op, r, params))
    sync = cfg.sync_overhead_us
    res.time_us = _total(res.ops, sync, overlap)
    res.time_us_lo, res.time_us_hi = _total(res.ops, sync, overlap, "time_us_lo"), _total(res.ops, sync, overlap,
                                                                                           "time_us_hi")
    for o in res.ops:
        o.share = o.time_us / res.time_us
    return res
