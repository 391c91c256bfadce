"""How a model scenario's point is deployed: its GPU config with fields changed (``gpu_overrides``,
``--set gpu.<field>``, ``sweep: {gpu.<field>: [...]}``), tensor parallelism and storage dtypes;
the checks of those fields and the columns they add to the tables."""
from __future__ import annotations

import difflib

from ..hardware import GPUConfig, load_gpu
from ..overrides import with_overrides
from .simulate import KV_DTYPES, TP_SIZES, WEIGHT_DTYPES

NOT_OVERRIDABLE = ("name", "description", "sources", "measurements", "provenance")
GPU_FIELDS = tuple(f for f in GPUConfig.model_fields if f not in NOT_OVERRIDABLE)
CHOICES = {"tp": TP_SIZES, "weight_dtype": tuple(WEIGHT_DTYPES), "kv_dtype": tuple(KV_DTYPES)}


def _unknown_field(where: str, k) -> str:
    close = difflib.get_close_matches(str(k), GPU_FIELDS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{where!r}: unknown GPU field {str(k)[:40]!r}{hint}; `gpusim gpus` lists the configs, GPUConfig the fields"


def problem(sc) -> str | None:
    """The first field of model scenario ``sc`` that cannot run (quoted path, then why), or None."""
    for k in sc.gpu_overrides:
        if k not in GPU_FIELDS:
            return _unknown_field(f"gpu_overrides.{k}", k)
    for k in sc.sweep:
        if k.startswith("gpu.") and k[4:] not in GPU_FIELDS:
            return _unknown_field(f"sweep.{k}", k[4:])
    for name, allowed in CHOICES.items():
        for where, v in [(name, getattr(sc, name))] + [(f"sweep.{name}[{i}]", x)
                                                         for i, x in enumerate(sc.sweep.get(name, []))]:
            if v is not None and (isinstance(v, bool) or v not in allowed):
                return f"{where!r}: {str(v)[:40]}; allowed {', '.join(map(str, allowed))}"
    if sc.phase == "serve" and sc.context is None and "context" not in sc.sweep:
        return "'context': phase serve needs the context its decode steps read (and seq_len, the prompt: default context)"
    return None


def changed_fields(sc) -> list:
    """The GPU fields the scenario changes, in order: its gpu_overrides, then the swept ones."""
    return list(dict.fromkeys(list(sc.gpu_overrides) + [k[4:] for k in sc.sweep if k.startswith("gpu.")]))


def config_of(sc, p: dict) -> GPUConfig:
    """The GPU config of point ``p``: its named config with the scenario's and the point's fields."""
    ov = {**sc.gpu_overrides, **{k[4:]: v for k, v in p.items() if k.startswith("gpu.")}}
    try:
        cfg, _ = with_overrides(load_gpu(p["gpu"]), ov, "gpu_overrides")
    except Exception as e:  # noqa: BLE001 -- ScenarioError/ConfigError: one line naming the field
        raise ValueError(str(e)) from None
    return cfg


def simulate_kwargs(sc, p: dict, cfg: GPUConfig, phase: str | None = None) -> dict:
    """``simulate_model``'s keyword arguments for point ``p`` on ``cfg``."""
    phase = phase or sc.phase
    return dict(phase=phase, batch=p["batch"], seq_len=(p["seq_len"] or p["context"]) if phase == "prefill" else None,
                context=p["context"] if phase == "decode" else None, gpu=cfg, attention=p["attention"],
                dtype=p["dtype"], tp=p["tp"], weight_dtype=p["weight_dtype"], kv_dtype=p["kv_dtype"],
                overlap=p["overlap"])


def columns(sc, p: dict, cfg: GPUConfig) -> dict:
    """The deployment columns of a point's rows: tp, dtypes, overlap, and each changed GPU field."""
    out = {"tp": p["tp"], "weight_dtype": p["weight_dtype"] or "", "kv_dtype": p["kv_dtype"] or "",
           "overlap": p["overlap"]}
    out.update({f"gpu.{f}": getattr(cfg, f) for f in changed_fields(sc)})
    return out


def describe(sc, p: dict, cfg: GPUConfig) -> str:
    """The part of a point's heading that names its deployment (empty for one plain GPU)."""
    bits = [f"tp {p['tp']}"] if p["tp"] > 1 else []
    bits += [f"{k} {p[k]}" for k in ("weight_dtype", "kv_dtype") if p[k]]
    bits += ["overlap"] if p["overlap"] else []
    bits += [f"gpu.{f}={getattr(cfg, f):g}" if isinstance(getattr(cfg, f), float) else f"gpu.{f}={getattr(cfg, f)}"
             for f in changed_fields(sc)]
    return (", " + ", ".join(bits)) if bits else ""
