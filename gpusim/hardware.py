"""GPU configurations: pydantic models with units in field names, loaded from configs/*.yaml.

No hardware number lives outside configs/: the simulator reads everything from a ``GPUConfig``.
The schema and its checks live here; reading the files is ``config_io``, the plausible range of
each field ``plausible``, what a what-if derives ``whatif`` (all re-exported here).
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from pydantic import (BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt,
                      field_validator, model_validator)
from pydantic_core import PydanticCustomError

from .config_io import (CONFIG_DIR, MODELED_ARCHS, ConfigError, arch_problem, available_gpus, config_path,  # noqa: F401
                        read_config, refuse_booleans, validation_error)
from .plausible import PLAUSIBLE, plausibility_problem  # noqa: F401
from .whatif import SM_WIDE_PEAKS, derived_overrides  # noqa: F401


# the keys a dict field takes: (what they are, the allowed ones)
KEY_CLASSES = {
    "dependent_latency_cycles": ("latency", ("fp32", "int", "mufu", "shfl", "shared", "shared_store", "barrier",
                                             "branch", "local")),     # backends/sim/warp.py's classes
    "staged_access_cost": ("staging", ("line", "8", "4", "2")),   # backends/sim/staging.py staging_class
    "activity_energy_j": ("activity", ("tensor_flop", "vector_cycle", "sfu_cycle", "sram_byte", "dram_byte",
                                        "l2_byte")),
    "request_latency_cycles": ("request latency", ("hit", "miss")),   # backends/sim/memory.py's two tables
}


def physics_problem(cfg) -> str | None:
    """Why ``cfg``'s fields together describe no buildable GPU (one line naming the field and what
    is allowed), or None: each field's range alone is ``PLAUSIBLE``'s."""
    line = cfg.l2_line_bytes
    if line & (line - 1):
        return f"l2_line_bytes = {line}: must be a power of two (32, 64, 128 or 256)"
    if cfg.l2_bytes < line * cfg.l2_ways:
        return (f"l2_bytes = {cfg.l2_bytes}: must hold at least one set of l2_ways x l2_line_bytes "
                f"= {line * cfg.l2_ways} bytes")
    rw = cfg.hbm_read_bandwidth_bytes_per_s + cfg.hbm_write_bandwidth_bytes_per_s
    if cfg.hbm_copy_bandwidth_bytes_per_s and cfg.hbm_copy_bandwidth_bytes_per_s > rw:
        return (f"hbm_copy_bandwidth_bytes_per_s = {cfg.hbm_copy_bandwidth_bytes_per_s:g}: a copy moves its bytes no "
                f"faster than reads and writes at once, at most hbm_read + hbm_write = {rw:g}")
    if cfg.max_registers_per_thread * 32 > cfg.registers_per_sm:
        return (f"max_registers_per_thread = {cfg.max_registers_per_thread}: one warp of 32 threads must fit "
                f"registers_per_sm = {cfg.registers_per_sm}, at most {cfg.registers_per_sm // 32}")
    if cfg.power_limit_w and cfg.idle_power_w >= cfg.power_limit_w:
        return (f"idle_power_w = {cfg.idle_power_w:g}: an idle GPU draws less than its power limit, "
                f"below power_limit_w = {cfg.power_limit_w:g}")
    return None


class TileEfficiency(BaseModel):
    """Measured tensor-pipe efficiency of a ``dot`` of BLOCK_M x BLOCK_K by BLOCK_K x BLOCK_N per CTA."""

    model_config = ConfigDict(extra="forbid")
    _no_booleans = model_validator(mode="before")(classmethod(refuse_booleans))
    m: PositiveInt
    n: PositiveInt
    k: PositiveInt
    num_warps: PositiveInt = 4
    efficiency: float = Field(gt=0, le=1.5)


class Measurement(BaseModel):
    """Provenance of one calibrated number."""

    model_config = ConfigDict(extra="forbid")
    _no_booleans = model_validator(mode="before")(classmethod(refuse_booleans))
    field: str
    value: float
    spread: float | None = None
    method: str = ""


class GPUConfig(BaseModel):
    """One GPU. Every number has a source in ``sources`` (field name -> citation or measurement)."""

    # a field assigned after loading (cfg.sm_count = 0) is validated as one read from a file
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str
    description: str = ""
    sm_count: PositiveInt
    clock_hz: PositiveFloat
    sram_bytes_per_sm: PositiveInt
    sram_bytes_per_cta_max: PositiveInt
    registers_per_sm: PositiveInt
    max_registers_per_thread: PositiveInt = 255
    # CUDA compute capability as major*10+minor (90 = sm_90): the target kernels are compiled for to
    # read their registers per thread (toolchain/compile.py); None = estimate them instead
    compute_capability: PositiveInt | None = None
    max_ctas_per_sm: PositiveInt
    max_warps_per_sm: PositiveInt
    l2_bytes: PositiveInt
    l2_line_bytes: PositiveInt = 128
    l2_ways: PositiveInt = 16
    l2_bandwidth_bytes_per_s: PositiveFloat
    # the rate the SMs' stores reach the L2 at (benchmarks/l2_write.py: 3.7-4.7 TB/s on the H200,
    # against 9.07 TB/s of reads). The model puts reads and writes on one SM <-> L2 path, so a
    # spill's local store (STL, written through the L1) holds it for l2_bandwidth / this of a read
    # byte's time; output stores are charged at the read rate. None = spills at the read rate too
    l2_write_bandwidth_bytes_per_s: PositiveFloat | None = None
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
    # global accesses Triton cannot vectorise (alignment not provable): elements per clock per SM
    # the load/store path sustains at one element per access, by element size in bytes; empty =
    # no cost beyond bytes (measured by benchmarks/micro_fidelity.py vector)
    scalar_access_per_clk_per_sm: dict[int, PositiveFloat] = {}
    # a tile staged into shared memory (it feeds a dot) from rows that are not 128-byte aligned
    # costs this many times its aligned time on the L2, the SM's port and the CTA's fill, by the
    # widest access Triton can prove aligned: "line" (16 bytes, rows straddling L2 lines), "8",
    # "4" (narrower cp.async), "2" (an odd pitch: 2-byte loads and shared stores through
    # registers). Empty = bytes only. Measured by benchmarks/kernels/stage_dot.py.
    staged_access_cost: dict[str, float] = {}
    # the HBM's read rate for a tile whose rows give it contiguous pieces of this many bytes (rows
    # further apart than their length), as a fraction of the streaming rate: a DRAM page opened for
    # 32 bytes delivers less per activation than one streamed through. Between keys the fraction is
    # interpolated in log2 of the piece; pieces past the largest key stream at the full rate.
    # Empty = every piece at the full rate. Measured by benchmarks/micro_fidelity.py dramchunk.
    hbm_piece_efficiency: dict[int, PositiveFloat] = {}
    # the narrowest per-thread copy cp.async makes (4, 8 or 16 bytes: PTX ISA, cp.async cp-size); a
    # staged tile whose rows are aligned to fewer bytes goes through registers (LDG + STS) and its
    # loop does not run it ahead (backends/sim/staging.py copies_async). 0 = every staged tile is
    # copied asynchronously (ideal).
    cp_async_min_bytes: NonNegativeInt = 0
    # bytes an L2 read miss fetches from DRAM: the aligned block of this size around each missed
    # sector (64 = a 32-byte miss brings its neighbour sector too, which a later request then finds
    # present). 0 = only the sectors asked for (each 32 bytes). Measured by ncu on the H200.
    l2_fetch_bytes: NonNegativeInt = 0
    # a tile's round trip against how many L2 line requests it makes at once (its lines): the extra
    # cycles over one request's latency, for a tile that misses ("miss", after hbm_latency_cycles)
    # and one that hits ("hit", after l2_latency_cycles), by number of lines; interpolated linearly
    # between keys and extended past the largest with the last slope. Empty = every tile waits
    # one request's latency (ideal). Measured by benchmarks/micro_fidelity.py sectorlines/sectorhits.
    request_latency_cycles: dict[str, dict[int, NonNegativeFloat]] = {}
    # the L2 request coalescer: of the sectors that k CTAs on different SMs ask for at once (the
    # same tile, in phase), the fraction the L2 slices read (the rest is merged on the way and
    # costs no slice bandwidth), by CTAs per SM, tile bytes, and k; interpolated in log2 of all
    # three (backends/sim/coalescer.py coalesced_fraction). Empty = no merging (ideal, and the
    # A100, whose coalescer is not measured here). Measured by ncu on
    # benchmarks/micro_fidelity.py coalescek and coalescek_dense.
    l2_coalesced_fraction: dict[int, dict[int, dict[int, float]]] = {}
    # warp-instructions an SM issues per clock: one per sub-partition scheduler (4 on Ampere and
    # Hopper: NVIDIA A100 / H100 whitepapers)
    warp_issue_per_clk_per_sm: PositiveFloat = 4.0
    # memory-level parallelism of one CTA: once a tile's first bytes arrive (after the L2 or HBM
    # latency), the rest streams into the CTA no faster than this many bytes per clock; tiles
    # copied asynchronously into SRAM (cp.async, feeding a dot) at a per-CTA rate, tiles loaded
    # into registers (LDG) at a per-warp rate. None = only the SM's shared port limits (ideal).
    # Measured by benchmarks/micro_fidelity.py mlp (one CTA per SM streaming tiles of 8..32 KiB).
    cta_async_fill_bytes_per_clk: PositiveFloat | None = None
    # loaded HBM latency: a miss's round trip grows as hbm_latency_cycles x u / (1 - u) with the
    # DRAM's utilisation u, its bytes over the last this-many cycles over what the peak read rate
    # moves in them (backends/sim/memory.py LoadedLatency). None = the latency does not grow with
    # load (the -ideal configs; the others set 8192 since round 15, docs/history.md). Checked on
    # benchmarks/kernels/stream_cols.py at 1 to 396 CTAs.
    hbm_queue_window_cycles: PositiveFloat | None = None
    warp_load_bytes_per_clk: PositiveFloat | None = None
    # cycles from an instruction's issue until a dependent instruction can use its result, by class
    # (fp32, int, mufu, shfl, shared, shared_store, barrier, branch: backends/sim/warp.py); with the compiled loop
    # body, a CTA's loop iteration takes at least as long as its warps' dependent chains allow.
    # Empty = no latency floor (ideal). Fitted by benchmarks/fit_latency.py to dependent chains.
    dependent_latency_cycles: dict[str, NonNegativeFloat] = {}
    # spill reloads (LDL) one warp keeps in flight: the next waits for the oldest to return
    # (backends/sim/warp.py). None = no limit (ideal).
    spill_reloads_in_flight_per_warp: PositiveInt | None = None
    # SM-wide units the warp scoreboard shares among the schedulers: warp-shuffle results and
    # shared-memory bytes per clock per SM (CUDA C++ Programming Guide, arithmetic instruction
    # throughput: 32 shuffles per clock per SM on cc 7.x-9.0; 32 banks of 4 bytes per clock)
    shuffle_lanes_per_clk_per_sm: PositiveFloat = 32.0
    shared_bytes_per_clk_per_sm: PositiveFloat = 128.0
    # The SM clock under load (backends/sim/power.py). A launch whose predicted board power at
    # clock_hz exceeds power_limit_w runs at the clock where it meets the limit: idle_power_w plus
    # its memory power plus its SM power scaled by (f / clock_hz) ** (1 + dvfs_energy_exponent)
    # (SM work per second follows f; energy per operation follows V**2, V following f: 2). Energy
    # per unit of activity at clock_hz (activity_energy_j): tensor_flop, vector_cycle and sfu_cycle
    # (an SM-cycle of that pipe busy), sram_byte (a byte staged from the L2 into shared memory, beyond
    # its L2 read), dram_byte (beyond its pass through the L2), l2_byte.
    # None / empty = the clock never drops (ideal). Measured by benchmarks/clock_probe.py.
    power_limit_w: PositiveFloat | None = None
    idle_power_w: NonNegativeFloat = 0.0
    activity_energy_j: dict[str, NonNegativeFloat] = {}
    dvfs_energy_exponent: NonNegativeFloat = 2.0
    # The rate of the timing loop's L2 flush (power.flush_energy); None: hbm_write_bandwidth_bytes_per_s.
    # A what-if of the HBM write rate keeps the named GPU's here (whatif.py): the loop is the measurement's.
    timing_loop_flush_bytes_per_s: PositiveFloat | None = None
    launch_overhead_us: float = Field(ge=0)
    sync_overhead_us: float = Field(ge=0)
    tensor_tile_efficiency: list[TileEfficiency] = []
    sources: dict[str, str] = {}
    measurements: list[Measurement] = []
    provenance: dict[str, str] = {}
    # ---- the links between the GPUs of one node, for a model split over GPUs (tensor parallelism:
    # gpusim/models/collectives.py times its all-reduces). 0 links = none: tp > 1 is refused.
    nvlink_generation: NonNegativeInt = 0
    nvlink_links: NonNegativeInt = 0
    # all links together, both directions (the datasheet's "NVLink bandwidth"); one direction is half
    nvlink_bandwidth_bytes_per_s: NonNegativeFloat = 0.0
    # every GPU of the node reaches every other at its full link rate through NVSwitch chips
    nvswitch: bool = False
    # the NVSwitch reduces in the switch (NVLink SHARP; NCCL's NVLS all-reduce algorithm)
    nvlink_sharp: bool = False
    gpus_per_node: PositiveInt = 8
    # NCCL on these links, fitted to published all-reduce figures (gpusim/models/collectives_fit.py):
    # ring (Simple protocol) bus bandwidth and NVLS algorithm bandwidth as fractions of one direction's
    # link rate; LL's bandwidth relative to Simple's; the time every collective call costs beyond
    # NCCL's own per-step latencies (its launch and the ranks' arrival); NVLS's own latency; and the
    # bandwidth ramp: the first nccl_ramp_bytes of a Simple-protocol collective move at
    # nccl_ramp_fraction of its full rate (fewer channels in flight below that size)
    nccl_ring_efficiency: float = Field(default=1.0, gt=0.0, le=1.0)
    nccl_nvls_efficiency: float = Field(default=1.0, gt=0.0, le=1.5)
    nccl_ll_fraction: float = Field(default=1.0, gt=0.0, le=1.0)
    nccl_call_overhead_us: NonNegativeFloat = 0.0
    nccl_nvls_latency_us: NonNegativeFloat = 0.0
    nccl_ramp_bytes: NonNegativeFloat = 0.0
    nccl_ramp_fraction: float = Field(default=1.0, gt=0.0, le=1.0)

    _no_booleans = model_validator(mode="before")(classmethod(refuse_booleans))

    @field_validator("compute_capability", mode="after")
    @classmethod
    def _modeled_arch(cls, v):
        why = arch_problem(v) if v is not None else None
        if why:
            raise PydanticCustomError("implausible", "compute_capability = {value}: {why}", {"value": v, "why": why})
        return v

    @field_validator(*PLAUSIBLE, mode="after")
    @classmethod
    def _plausible(cls, v, info):
        for key, x in (v.items() if isinstance(v, dict) else ((None, v),)):
            if isinstance(x, dict):     # nested tables check their own entries (request_latency_cycles)
                continue
            why = plausibility_problem(info.field_name, x)
            if why:
                where = info.field_name + (f".{key}" if key is not None else "")
                raise PydanticCustomError("implausible", "{where} = {value}: {why}",
                                          {"where": where, "value": f"{x:g}", "why": why})
        return v

    @field_validator("request_latency_cycles", mode="after")
    @classmethod
    def _request_latency(cls, v, info):
        for where, table in v.items():          # the classes: _known_classes
            for n, x in table.items():
                if n < 1:
                    raise PydanticCustomError("implausible", "request_latency_cycles.{where}.{n}: lines must be >= 1",
                                              {"where": where, "n": str(n)})
                why = plausibility_problem("request_latency_cycles", x)
                if why:
                    raise PydanticCustomError("implausible", "request_latency_cycles.{where}.{n} = {value}: {why}",
                                              {"where": where, "n": str(n), "value": f"{x:g}", "why": why})
        return v

    @field_validator("l2_coalesced_fraction", mode="after")
    @classmethod
    def _coalesced(cls, v, info):
        for c, by_tile in v.items():
            for tb, curve in by_tile.items():
                for k, x in curve.items():
                    where = f"l2_coalesced_fraction.{c}.{tb}.{k}"
                    if min(c, tb, k) < 1:
                        raise PydanticCustomError("implausible", "{where}: CTAs per SM, tile bytes and sharers must be >= 1",
                                                  {"where": where})
                    why = plausibility_problem("l2_coalesced_fraction", x)
                    if why:
                        raise PydanticCustomError("implausible", "{where} = {value}: {why}",
                                                  {"where": where, "value": f"{x:g}", "why": why})
        return v

    @field_validator("dependent_latency_cycles", "staged_access_cost", "activity_energy_j", "request_latency_cycles",
                     mode="after")
    @classmethod
    def _known_classes(cls, v, info):
        what, allowed = KEY_CLASSES[info.field_name]
        bad = sorted(set(v) - set(allowed))
        if bad:
            raise PydanticCustomError("key_class", "unknown {what} class {bad}; allowed: {allowed}",
                                      {"what": what, "bad": ", ".join(bad), "allowed": ", ".join(allowed)})
        return v

    @model_validator(mode="after")
    def _check(self):
        if self.sram_bytes_per_cta_max > self.sram_bytes_per_sm:
            raise ValueError("sram_bytes_per_cta_max cannot exceed sram_bytes_per_sm")
        why = physics_problem(self)
        if why:
            raise PydanticCustomError("implausible", "{why}", {"why": why})
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
        """Write bandwidth when writes share the channel with reads (from the copy benchmark): a
        copy's written byte takes 2/copy - 1/read, and never less than at the write rate alone
        (a copy faster than its reads and writes each at their own rate is not physical)."""
        if not self.hbm_copy_bandwidth_bytes_per_s:
            return self.hbm_write_bandwidth_bytes_per_s
        per_byte = 2.0 / self.hbm_copy_bandwidth_bytes_per_s - 1.0 / self.hbm_read_bandwidth_bytes_per_s
        return min(self.hbm_write_bandwidth_bytes_per_s, 1.0 / per_byte if per_byte > 0 else math.inf)

    @property
    def l2_write_cost(self) -> float:
        """L2 path time of a spill's local store (STL) byte, in read bytes."""
        if not self.l2_write_bandwidth_bytes_per_s:
            return 1.0
        return self.l2_bandwidth_bytes_per_s / self.l2_write_bandwidth_bytes_per_s

    @property
    def hbm_write_cost(self) -> float:
        """HBM channel time of a written byte, in read bytes (a write holds the channel longer)."""
        return self.hbm_read_bandwidth_bytes_per_s / self.hbm_mixed_write_bandwidth_bytes_per_s

    def ridge_flop_per_byte(self, dtype: str = "fp16", tensor: bool = True) -> float:
        peak = self.tensor_flops_per_s[dtype] if tensor else self.fp32_flops_per_s
        return peak / self.hbm_read_bandwidth_bytes_per_s

    def tile_efficiency(self, m: int, n: int, k: int, num_warps: int) -> float:
        """Tensor-pipe efficiency for a dot tile; nearest measured shape in log space, 1.0 if none."""
        e = self.tile_entry(m, n, k, num_warps)
        return 1.0 if e is None else e.efficiency

    def tile_entry(self, m: int, n: int, k: int, num_warps: int):
        """The measured tile (``tensor_tile_efficiency``) nearest a dot tile in log space; None if none."""
        if not self.tensor_tile_efficiency:
            return None
        import math

        def d(e):
            return (abs(math.log2(e.m / m)) + abs(math.log2(e.n / n)) + abs(math.log2(e.k / k))
                    + 0.5 * abs(math.log2(e.num_warps / num_warps)))
        return min(self.tensor_tile_efficiency, key=lambda e: (d(e), e.m, e.n, e.k, e.num_warps))

    def config_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.model_dump(), sort_keys=True).encode()).hexdigest()[:16]


def load_gpu(name_or_path: str | Path) -> GPUConfig:
    """Load a GPU by name (configs/NAME.yaml) or by path to a YAML file.

    Every failure is a ``ConfigError`` with one short line naming the file and the field."""
    p = config_path(name_or_path)
    data = read_config(p)
    try:
        return GPUConfig.model_validate(data)
    except Exception as e:  # pydantic.ValidationError
        raise validation_error(p, e) from None
