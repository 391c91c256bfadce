"""GPU configurations: pydantic models with units in field names, loaded from configs/*.yaml.

No hardware number lives outside configs/: the simulator reads everything from a ``GPUConfig``.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"   # the repository's configs/ (editable install)


class TileEfficiency(BaseModel):
    """Measured tensor-pipe efficiency of a ``dot`` of BLOCK_M x BLOCK_K by BLOCK_K x BLOCK_N per CTA."""

    model_config = ConfigDict(extra="forbid")
    m: PositiveInt
    n: PositiveInt
    k: PositiveInt
    num_warps: PositiveInt = 4
    efficiency: float = Field(gt=0, le=1.5)


class Measurement(BaseModel):
    """Provenance of one calibrated number."""

    model_config = ConfigDict(extra="forbid")
    field: str
    value: float
    spread: float | None = None
    method: str = ""


class GPUConfig(BaseModel):
    """One GPU. Every number has a source in ``sources`` (field name -> citation or measurement)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    sm_count: PositiveInt
    clock_hz: PositiveFloat
    sram_bytes_per_sm: PositiveInt
    sram_bytes_per_cta_max: PositiveInt
    registers_per_sm: PositiveInt
    max_registers_per_thread: PositiveInt = 255
    # CUDA compute capability as major*10+minor (90 = sm_90): the target kernels are compiled for to
    # read their registers per thread (backends/triton/compile.py); None = estimate them instead
    compute_capability: PositiveInt | None = None
    max_ctas_per_sm: PositiveInt
    max_warps_per_sm: PositiveInt
    l2_bytes: PositiveInt
    l2_line_bytes: PositiveInt = 128
    l2_ways: PositiveInt = 16
    l2_bandwidth_bytes_per_s: PositiveFloat
    l2_latency_cycles: PositiveFloat
    sm_load_bytes_per_clk: PositiveFloat
    hbm_bytes: PositiveInt
    hbm_read_bandwidth_bytes_per_s: PositiveFloat
    hbm_write_bandwidth_bytes_per_s: PositiveFloat
    hbm_latency_cycles: PositiveFloat
    # read + write bytes per second of a streaming copy; when given, a written byte costs
    # 2/copy - 1/read of channel time, so traffic that mixes directions pays the bus turnaround
    hbm_copy_bandwidth_bytes_per_s: PositiveFloat | None = None
    tensor_flops_per_s: dict[str, PositiveFloat]
    fp32_flops_per_s: PositiveFloat
    sfu_ops_per_clk_per_sm: PositiveFloat
    # measured lane-ops per clock per SM by IR op class (mul, add, maximum, compare_where, cast,
    # reduce_sum, reduce_max); a class not listed runs at the FP32 rate
    simt_lane_ops_per_clk_per_sm: dict[str, PositiveFloat] = {}
    # how far one CTA's dot and another resident CTA's SIMT work run side by side on an SM:
    # 1 = independent pipes, 0 = their times add (measured by calibrate_ops.measure_overlap)
    tensor_simt_overlap: float = Field(default=1.0, ge=0.0, le=1.0)
    # GPU-wide CTA dispatch: one CTA can start every this many ns (0 = unlimited); measured with
    # near-empty CTAs by calibrate_ops.measure_cta_dispatch
    cta_dispatch_ns: float = Field(default=0.0, ge=0.0)
    launch_overhead_us: float = Field(ge=0)
    sync_overhead_us: float = Field(ge=0)
    tensor_tile_efficiency: list[TileEfficiency] = []
    sources: dict[str, str] = {}
    measurements: list[Measurement] = []
    provenance: dict[str, str] = {}

    @model_validator(mode="after")
    def _check(self):
        if self.sram_bytes_per_cta_max > self.sram_bytes_per_sm:
            raise ValueError("sram_bytes_per_cta_max cannot exceed sram_bytes_per_sm")
        for dt in ("fp16", "bf16", "fp32"):
            if dt not in self.tensor_flops_per_s:
                raise ValueError(f"tensor_flops_per_s needs an entry for {dt} (fp32 means tf32 dot)")
        return self

    # ---- derived per-clock rates (pure arithmetic on the fields above)
    def tensor_flops_per_clk_per_sm(self, dtype: str) -> float:
        return self.tensor_flops_per_s[dtype] / (self.sm_count * self.clock_hz)

    @property
    def vector_ops_per_clk_per_sm(self) -> float:
        # an FMA counts as 2 FLOPs in the datasheet figure; one elementwise op issues one lane-op
        return self.fp32_flops_per_s / 2.0 / (self.sm_count * self.clock_hz)

    @property
    def hbm_mixed_write_bandwidth_bytes_per_s(self) -> float:
        """Write bandwidth when writes share the channel with reads (from the copy benchmark)."""
        if not self.hbm_copy_bandwidth_bytes_per_s:
            return self.hbm_write_bandwidth_bytes_per_s
        per_byte = 2.0 / self.hbm_copy_bandwidth_bytes_per_s - 1.0 / self.hbm_read_bandwidth_bytes_per_s
        return 1.0 / per_byte if per_byte > 0 else self.hbm_write_bandwidth_bytes_per_s

    def ridge_flop_per_byte(self, dtype: str = "fp16", tensor: bool = True) -> float:
        peak = self.tensor_flops_per_s[dtype] if tensor else self.fp32_flops_per_s
        return peak / self.hbm_read_bandwidth_bytes_per_s

    def tile_efficiency(self, m: int, n: int, k: int, num_warps: int) -> float:
        """Tensor-pipe efficiency for a dot tile; nearest measured shape in log space, 1.0 if none."""
        if not self.tensor_tile_efficiency:
            return 1.0
        import math

        def d(e):
            return (abs(math.log2(e.m / m)) + abs(math.log2(e.n / n)) + abs(math.log2(e.k / k))
                    + 0.5 * abs(math.log2(e.num_warps / num_warps)))
        return min(self.tensor_tile_efficiency, key=lambda e: (d(e), e.m, e.n, e.k, e.num_warps)).efficiency

    def config_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.model_dump(), sort_keys=True).encode()).hexdigest()[:16]


class ConfigError(ValueError):
    """A GPU config could not be found or validated (message names file and field)."""


def available_gpus() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def load_gpu(name_or_path: str | Path) -> GPUConfig:
    """Load a GPU by name (configs/NAME.yaml) or by path to a YAML file."""
    p = Path(name_or_path)
    if not (p.suffix in (".yaml", ".yml") and p.exists()):
        p = CONFIG_DIR / f"{name_or_path}.yaml"
        if not p.exists():
            import difflib

            names = available_gpus()
            close = difflib.get_close_matches(str(name_or_path), names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown GPU {str(name_or_path)!r}{hint}; available: {', '.join(names)} or a path to a GPU YAML")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{p}:{where} YAML syntax error: {getattr(e, 'problem', e)}") from None
    except OSError as e:
        raise ConfigError(f"{p}: cannot read: {e.strerror}") from None
    try:
        return GPUConfig.model_validate(data)
    except Exception as e:  # pydantic.ValidationError
        errs = getattr(e, "errors", lambda: [])()
        if errs:
            err = errs[0]
            loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
            raise ConfigError(f"{p}: field {loc}: {err['msg']} (got {err.get('input')!r})") from None
        raise ConfigError(f"{p}: {e}") from None
