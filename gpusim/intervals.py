"""How far off a predicted time may be: a 90% prediction interval on every prediction.

The interval is split conformal prediction over groups of the recorded H200 residuals
(docs/model.md, "How far off a number may be"). ``benchmarks/fit_intervals.py`` computes, for each
group of recorded points, the lower and upper quantile of r = log(measured / predicted) and ships
them in ``gpusim/data/intervals.json``; a new prediction t gets [t * exp(lo), t * exp(hi)] from
its group. A point is put in a group by what predicts the size of its error: its kernel family,
then, where the fit found it pays, a second feature (spilling, one pipeline stage, low occupancy,
DRAM-bound). A group with too few points falls back to its family, then to the pooled group.

The GPU config matters too: the intervals are measured on the H200 config as shipped. A config
derived from it (a100, h100, a what-if that changes a field) gets the interval widened by
``DERIVED_WIDEN`` in log space, with a reason saying so; an ``-ideal`` config is a bound, not a
prediction, and gets none (lo = hi = None, reason ``bound``).
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

DATA_FILE = Path(__file__).resolve().parent / "data" / "intervals.json"
MEASURED_CONFIG = "h200"         # the config the recorded points were measured on

FAMILIES = {"attention_flash": "flash", "attention_flash_bwd": "flash_bwd", "attention_decode": "decode",
            "attention_naive": "naive", "matmul": "matmul", "elementwise_chain": "elementwise",
            "elementwise_fused": "elementwise", "softmax": "norms", "layernorm": "norms", "rmsnorm": "norms"}
POOLED = "pooled"
LOW_OCCUPANCY_WARPS = 8          # warps resident per SM at or below which a launch counts as low occupancy
DRAM_BOUND = 0.5                 # DRAM busy at least this share of the time: the point is DRAM-bound
ROW_PARAMS = ("cols", "n", "K", "N", "head_dim")   # contiguous extents: a row of them not a multiple of
ROW_ALIGN_BYTES = 16                               # 16 bytes cannot be loaded with vector loads
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}


def family(kernel: str) -> str:
    """The kernel family of a kernel name; a user kernel is ``other`` (it falls back to the pooled group)."""
    return FAMILIES.get(kernel, "other")


def features(kernel: str, params: dict, launches, dram_util: float | None = None) -> dict:
    """What predicts the error's size, from the kernel, its parameters and its launches.

    ``launches``: (ctas_per_sm, spills, time_us) per launch; the longest launch sets the occupancy.
    ``dram_util``: DRAM bytes over (time x peak bandwidth), or None when unknown."""
    launches = list(launches)
    main = max(launches, key=lambda x: x[2]) if launches else (None, False, 0.0)
    warps = params.get("num_warps")
    resident = main[0] * warps if main[0] and isinstance(warps, int) else None
    return {"family": family(kernel),
            "spills": any(bool(x[1]) for x in launches),
            "one_stage": params.get("num_stages") == 1,
            "low_occupancy": resident is not None and resident <= LOW_OCCUPANCY_WARPS,
            "dram_bound": dram_util is not None and dram_util >= DRAM_BOUND,
            "unaligned": unaligned(params)}


def unaligned(params: dict) -> bool:
    """Whether a contiguous extent of the point (``ROW_PARAMS``) is not a multiple of 16 bytes."""
    nbytes = DTYPE_BYTES.get(params.get("dtype"), 2)
    return any(isinstance(params.get(p), int) and params[p] * nbytes % ROW_ALIGN_BYTES for p in ROW_PARAMS)


def group_of(feats: dict, splits: dict) -> str:
    """The group name of a point: its family, with the family's split feature when it has one
    and the point has it (``flash_bwd/spills``)."""
    fam = feats["family"]
    feat = splits.get(fam)
    return f"{fam}/{feat}" if feat and feats.get(feat) else fam


@functools.lru_cache(maxsize=4)
def load_table(path: str | None = None) -> dict:
    """The shipped interval table (``gpusim/data/intervals.json``)."""
    return json.loads(Path(path or DATA_FILE).read_text())


def lookup(feats: dict, table: dict | None = None) -> tuple:
    """(group, lo, hi) of a point with features ``feats``: its group, else its family, else pooled."""
    t = table or load_table()
    groups = t["groups"]
    for g in (group_of(feats, t.get("splits", {})), feats["family"], POOLED):
        if g in groups:
            return g, groups[g]["lo"], groups[g]["hi"]
    raise KeyError("the interval table has no pooled group")


@dataclass(frozen=True)
class Interval:
    """A predicted time's interval in us (None for a bound), the group it came from and why it is
    as wide as it is."""

    lo: float | None
    hi: float | None
    group: str
    reason: str

    @property
    def label(self) -> str:
        """Short: the group, ``, derived`` when widened for a derived config; ``bound`` for a bound."""
        if self.lo is None:
            return "bound"
        return self.group + (", derived" if "widened" in self.reason else "")


def config_kind(cfg) -> tuple:
    """(kind, reason) of a GPU config: ``measured`` (the H200 config as shipped), ``bound`` (an
    ``-ideal`` config) or ``derived`` (anything else, e.g. a100, h100, or the H200 with a field changed)."""
    if cfg.name == MEASURED_CONFIG and cfg.config_hash() != _measured_hash():
        return "derived", f"{cfg.name} with fields changed from the measured config"
    return kind_by_name(cfg.name)


def kind_by_name(name: str) -> tuple:
    """(kind, reason) from a config's name alone (when the config itself is not at hand)."""
    if name.endswith("-ideal"):
        return "bound", "bound"
    if name == MEASURED_CONFIG:
        return "measured", ""
    return "derived", f"{name} is derived from the measured {MEASURED_CONFIG}, not measured itself"


@functools.lru_cache(maxsize=1)
def _measured_hash() -> str:
    from .hardware import load_gpu

    return load_gpu(MEASURED_CONFIG).config_hash()


def interval(time_us: float, feats: dict, kind: str = "measured", why: str = "", table: dict | None = None) -> Interval:
    """The interval of a predicted ``time_us`` with features ``feats`` on a config of ``kind``
    (see ``config_kind``)."""
    if kind == "bound":
        return Interval(None, None, "", "bound")
    t = table or load_table()
    group, lo, hi = lookup(feats, t)
    reason = f"{t['coverage']:.0%} interval of group {group}"
    if kind == "derived":
        w = t["derived_widen"]
        mid = (lo + hi) / 2
        lo, hi = mid - (mid - lo) * w, mid + (hi - mid) * w
        reason += f", widened x{w:g} in log space: {why}"
    return Interval(time_us * math.exp(lo), time_us * math.exp(hi), group, reason)
