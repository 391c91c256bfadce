"""Immutable results: per-launch counters, per-point totals, and timeline events.

Column names follow Nsight Compute where one fits (dram bytes read/written, L2 hit rate).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .backends.sim.events import OP_KINDS, CTAEvent, LaunchEvent, OpEvent, TransferEvent  # noqa: F401  (re-exported)

# A resource busy at least half of the time is what the time is spent on: below that, no unit is
# saturated and the time goes to waiting (latency, dependencies) or to idle SMs.
BOUND_BUSY = 0.5

from .physics import CHECK_TOLERANCE, check_status, check_tolerance  # noqa: F401,E402  (re-exported)


RESULT_COLUMNS = ("gpu", "kernel")  # parameter columns follow, then METRIC_COLUMNS
METRIC_COLUMNS = ("status", "reason", "time_us", "time_us_lo", "time_us_hi", "time_us_sim", "calibration", "calibration_factor", "dram_read_bytes", "dram_write_bytes", "l2_read_bytes", "l2_hit_rate",
                  "flops", "tflops", "dram_gbps", "arithmetic_intensity", "bound", "clock_mhz", "max_rel_err",
                  "sram_read_bytes", "tensor_flops", "sampled_ctas", "total_ctas", "resources", "compiler", "interval", "sim_wall_s")
KERNEL_COLUMNS = ("point", "launch", "grid", "ctas_per_sm", "occupancy_limiter", "waves", "time_us", "dram_read_bytes",
                  "dram_write_bytes", "l2_read_bytes", "l2_hit_rate", "flops", "tensor_busy", "vector_busy", "sfu_busy",
                  "simulated_ctas", "total_ctas", "loop_group", "resources", "compiler", "clock_mhz", "power_w")


@dataclass(frozen=True)
class KernelResult:
    """One launch: where it ran, how long it took, what it moved."""

    launch: str
    grid: tuple
    ctas_per_sm: int
    occupancy_limiter: str
    waves: float
    time_us: float
    cycles: float
    dram_read_bytes: float
    dram_write_bytes: float
    l2_read_bytes: float
    l2_hit_bytes: float
    sram_read_bytes: float
    tensor_flops: float
    vector_flops: float
    sfu_ops: float
    tensor_busy: float
    vector_busy: float
    sfu_busy: float
    simulated_ctas: int
    total_ctas: int
    loop_group: int
    start_us: float = 0.0
    resources: str = "estimated"   # registers per thread from the compiled kernel or the estimate
    compiler: str = "estimate"     # the compiler's view it was timed with: "triton X.Y.Z" or "estimate"
    clock_hz: float | None = None  # the SM clock it ran at (below the maximum when power-limited)
    power_w: float | None = None   # predicted board power (None: the config has no power model)
    l2_merged_bytes: float = 0.0   # of l2_read_bytes, those the L2 request coalescer merged (no slice read)
    spills: bool = False           # registers spilled to local memory (compiled, or estimated above the cap)

    @property
    def flops(self) -> float:
        return self.tensor_flops + self.vector_flops

    @property
    def l2_hit_rate(self) -> float:
        return self.l2_hit_bytes / self.l2_read_bytes if self.l2_read_bytes else 0.0

    def row(self, point: int) -> dict:
        return {"point": point, "launch": self.launch, "grid": "x".join(map(str, self.grid)),
                "ctas_per_sm": self.ctas_per_sm, "occupancy_limiter": self.occupancy_limiter,
                "waves": round(self.waves, 3), "time_us": _r(self.time_us),
                "dram_read_bytes": int(round(self.dram_read_bytes)), "dram_write_bytes": int(round(self.dram_write_bytes)),
                "l2_read_bytes": int(round(self.l2_read_bytes)), "l2_hit_rate": round(self.l2_hit_rate, 4),
                "flops": int(round(self.flops)), "tensor_busy": round(self.tensor_busy, 4),
                "vector_busy": round(self.vector_busy, 4), "sfu_busy": round(self.sfu_busy, 4),
                "simulated_ctas": self.simulated_ctas, "total_ctas": self.total_ctas, "loop_group": self.loop_group,
                "resources": self.resources,
                "compiler": self.compiler,
                "clock_mhz": round(self.clock_hz / 1e6) if self.clock_hz else None,
                "power_w": round(self.power_w, 1) if self.power_w is not None else None}


def _r(x: float, digits: int = 4) -> float:
    """Round to ``digits`` significant digits so CSVs are stable and readable."""
    if x == 0 or x != x:
        return x
    from math import floor, log10

    return round(x, max(0, digits - 1 - int(floor(log10(abs(x))))))


@dataclass(frozen=True)
class Result:
    """One simulated point. ``status`` is ok, mismatch (simulated, but the exact check failed),
    infeasible or error; numbers are None unless simulated (ok or mismatch)."""

    gpu: str
    kernel: str
    params: dict
    status: str
    reason: str = ""
    kernels: tuple = ()
    time_us: float | None = None
    max_rel_err: float | None = None
    hbm_bandwidth_bytes_per_s: float | None = None
    peak_flops_per_s: float | None = None
    ridge_flop_per_byte: float | None = None
    timeline: tuple = field(default=(), repr=False, compare=False)
    clock_hz: float | None = None
    sim_wall_s: float | None = field(default=None, compare=False)   # wall time of the timing simulation
    l2_bandwidth_bytes_per_s: float | None = None
    sm_count: int | None = None
    config_kind: str = ""     # measured | derived | bound (gpusim.intervals.config_kind); "" = by the name
    config_note: str = ""     # why a derived config's interval is wider
    time_us_sim: float | None = None     # the mechanistic time (time_us is calibrated unless calibration is off)
    calibration: str = ""                # fitted | transferred (+ ", extrapolated") | off (gpusim.calibration)
    calibration_factor: float | None = None
    calibrated_interval: tuple | None = field(default=None, repr=False)   # (lo, hi, family) conformal, us

    @property
    def interval(self):
        """The 90% prediction interval of ``time_us`` (``gpusim.intervals.Interval``: lo and hi in
        us, None for an -ideal config's bound), or None when the point is not ok."""
        if self.status != "ok" or not self.time_us:
            return None
        from . import intervals

        if self.calibrated_interval:
            lo, hi, fam = self.calibrated_interval
            return intervals.Interval(lo, hi, fam, f"90% conformal interval of {fam} ({self.calibration})")

        kind, note = self.config_kind, self.config_note
        if not kind:
            kind, note = intervals.kind_by_name(self.gpu)
        launches = [(k.ctas_per_sm, k.spills, k.time_us) for k in self.kernels]
        feats = intervals.features(self.kernel, self.params, launches, self.utilisation()["dram"])
        return intervals.interval(self.time_us, feats, kind, note)

    @property
    def time_us_lo(self) -> float | None:
        iv = self.interval
        return iv.lo if iv else None

    @property
    def time_us_hi(self) -> float | None:
        iv = self.interval
        return iv.hi if iv else None

    def _sum(self, f):
        return sum(getattr(k, f) for k in self.kernels)

    dram_read_bytes = property(lambda self: self._sum("dram_read_bytes"))
    dram_write_bytes = property(lambda self: self._sum("dram_write_bytes"))
    l2_read_bytes = property(lambda self: self._sum("l2_read_bytes"))
    l2_merged_bytes = property(lambda self: self._sum("l2_merged_bytes"))
    sram_read_bytes = property(lambda self: self._sum("sram_read_bytes"))
    tensor_flops = property(lambda self: self._sum("tensor_flops"))
    flops = property(lambda self: self._sum("flops"))

    @property
    def resources(self) -> str:
        """Where the launches' registers per thread came from: compiled, estimated, or both."""
        return "+".join(sorted({k.resources for k in self.kernels}))

    @property
    def compiler(self) -> str:
        """The compiler's view the launches were timed with (``compiler.view_name``): ``triton X.Y.Z``,
        ``estimate``, or both joined by ``+`` when a launch did not compile and fell back."""
        return "+".join(sorted({k.compiler for k in self.kernels}))

    @property
    def dram_bytes(self) -> float:
        return self.dram_read_bytes + self.dram_write_bytes

    @property
    def l2_hit_rate(self) -> float:
        r = self.l2_read_bytes
        return self._sum("l2_hit_bytes") / r if r else 0.0

    @property
    def tflops(self) -> float:
        return self.flops / (self.time_us * 1e-6) / 1e12 if self.time_us else 0.0

    @property
    def dram_gbps(self) -> float:
        return self.dram_bytes / (self.time_us * 1e-6) / 1e9 if self.time_us else 0.0

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.dram_bytes if self.dram_bytes else float("inf")

    def utilisation(self) -> dict:
        """Share of the point's time each resource was busy (0..1): ``pipe`` the busiest SM pipe
        (tensor, SIMT or SFU, averaged over all SMs), ``dram`` and ``l2`` the bytes moved over
        the bandwidth x time, ``sms`` the share of SMs that had a CTA (weighted by each launch's time)."""
        t_s = (self.time_us or 0.0) * 1e-6
        if not t_s or not self.clock_hz:
            return {"pipe": 0.0, "dram": 0.0, "l2": 0.0, "sms": 0.0}
        # each launch's cycles are on its own clock (lower than the point's when power-limited)
        pipe = max(sum(getattr(k, f) * k.cycles / (k.clock_hz or self.clock_hz) for k in self.kernels) / t_s
                   for f in ("tensor_busy", "vector_busy", "sfu_busy"))
        dram = self.dram_bytes / (t_s * self.hbm_bandwidth_bytes_per_s) if self.hbm_bandwidth_bytes_per_s else 0.0
        # every store is written through the L2, so the slices' traffic is the loads the request
        # coalescer did not merge plus the DRAM writes
        l2 = ((self.l2_read_bytes - self.l2_merged_bytes + self.dram_write_bytes) / (t_s * self.l2_bandwidth_bytes_per_s)
              if self.l2_bandwidth_bytes_per_s else 0.0)
        ksec = sum(k.cycles / (k.clock_hz or self.clock_hz) for k in self.kernels)
        sms = (sum(min(1.0, k.total_ctas / self.sm_count) * k.cycles / (k.clock_hz or self.clock_hz)
                   for k in self.kernels) / ksec if self.sm_count and ksec else 1.0)
        return {"pipe": pipe, "dram": dram, "l2": l2, "sms": sms}

    @property
    def bound(self) -> str:
        """What limits the simulated time (docs/model.md, "The bound label"; the legend under
        the run table, ``output.tables.BOUND_LEGEND``):
        ``power`` when launches the power limit slowed (their clock below the maximum) take at least
        half the time; else ``tensor`` or ``simt`` when that SM pipe is the most utilised resource
        and busy at least BOUND_BUSY of the time, ``memory`` when DRAM or L2 bandwidth is; otherwise
        nothing is saturated and the label is ``launch`` when launch and sync overheads take at
        least half the time, ``grid`` when fewer than half the SMs had work (the grid is too small to
        fill the GPU; kernels.csv's ``occupancy_limiter`` names what limits CTAs per SM), else
        ``latency`` (waiting on memory latency or dependent instructions)."""
        t_s = (self.time_us or 0.0) * 1e-6
        secs = [(k, k.cycles / (k.clock_hz or self.clock_hz)) for k in self.kernels] if self.clock_hz else []
        if t_s and sum(s for k, s in secs if k.clock_hz and k.clock_hz < self.clock_hz * (1 - 1e-3)) >= 0.5 * t_s:
            return "power"
        u = self.utilisation()
        mem = max(u["dram"], u["l2"])
        if max(u["pipe"], mem) >= BOUND_BUSY:
            if u["pipe"] < mem:
                return "memory"
            tensor = sum(k.tensor_busy * s for k, s in secs)
            return "tensor" if tensor >= max(sum(k.vector_busy * s for k, s in secs),
                                             sum(k.sfu_busy * s for k, s in secs)) else "simt"
        if t_s and t_s - sum(s for _, s in secs) >= 0.5 * t_s:
            return "launch"
        return "grid" if u["sms"] < 0.5 else "latency"

    def launch(self, name: str) -> KernelResult:
        for k in self.kernels:
            if k.launch == name:
                return k
        raise KeyError(name)

    def row(self, param_names=None) -> dict:
        """Flat dict for results.csv (parameters first, empty where the kernel does not take one)."""
        names = param_names if param_names is not None else list(self.params)
        row = {"gpu": self.gpu, "kernel": self.kernel}
        for n in names:
            row[n] = self.params.get(n, "")
        ok = self.status in ("ok", "mismatch", "unphysical")   # a mismatch was simulated: its numbers are shown
        iv = self.interval
        row.update({
            "status": self.status, "reason": self.reason,
            "time_us": _r(self.time_us) if ok else "",
            "time_us_lo": _r(iv.lo) if iv and iv.lo is not None else "",
            "time_us_hi": _r(iv.hi) if iv and iv.hi is not None else "",
            "time_us_sim": _r(self.time_us_sim) if ok and self.time_us_sim else "",
            "calibration": self.calibration if ok else "",
            "calibration_factor": round(self.calibration_factor, 4) if ok and self.calibration_factor else "",
            "dram_read_bytes": int(round(self.dram_read_bytes)) if ok else "",
            "dram_write_bytes": int(round(self.dram_write_bytes)) if ok else "",
            "l2_read_bytes": int(round(self.l2_read_bytes)) if ok else "",
            "l2_hit_rate": round(self.l2_hit_rate, 4) if ok else "",
            "flops": int(round(self.flops)) if ok else "",
            "tflops": _r(self.tflops) if ok else "",
            "dram_gbps": _r(self.dram_gbps) if ok else "",
            "arithmetic_intensity": _r(self.arithmetic_intensity) if ok else "",
            "bound": self.bound if ok else "",
            "clock_mhz": self.clock_mhz if ok else "",
            "max_rel_err": ("%.3g" % self.max_rel_err) if self.max_rel_err is not None else "",
            "sram_read_bytes": int(round(self.sram_read_bytes)) if ok else "",
            "tensor_flops": int(round(self.tensor_flops)) if ok else "",
            "sampled_ctas": sum(k.simulated_ctas for k in self.kernels) if ok else "",
            "total_ctas": sum(k.total_ctas for k in self.kernels) if ok else "",
            "resources": self.resources if ok else "",
            "compiler": self.compiler if ok else "",
            "interval": iv.label if iv else "",
            "sim_wall_s": round(self.sim_wall_s, 4) if self.sim_wall_s is not None else "",
        })
        return row

    @property
    def clock_mhz(self):
        """The SM clock its launches ran at, time-weighted (MHz; below the maximum when power-limited)."""
        ks = [k for k in self.kernels if k.clock_hz]
        t = sum(k.time_us for k in ks)
        return round(sum(k.clock_hz * k.time_us for k in ks) / t / 1e6) if t else None

    def to_pandas(self):
        """This result as a one-row pandas DataFrame with the columns of results.csv."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Result.to_pandas() needs pandas: pip install 'gpusim[pandas]'") from None
        return pandas.DataFrame([self.row()])

    def summary(self) -> str:
        if self.status != "ok":
            return f"{self.kernel} on {self.gpu}: {self.status}: {self.reason}"
        iv = self.interval
        rng = "" if iv is None else (f" (90%: {iv.lo:.1f}-{iv.hi:.1f}, {iv.label})" if iv.lo is not None
                                     else f" ({iv.label})")
        lines = [f"{self.kernel} on {self.gpu}: {self.time_us:.1f} us{rng}, {self.dram_bytes / 1e9:.3f} GB DRAM, "
                 f"{self.tflops:.1f} TFLOP/s, {self.bound}-bound (AI {self.arithmetic_intensity:.1f} FLOP/B, "
                 f"ridge {self.ridge_flop_per_byte:.0f})"]
        for k in self.kernels:
            lines.append(f"  {k.launch:8s} grid {'x'.join(map(str, k.grid)):>14s} {k.ctas_per_sm} CTA/SM "
                         f"({k.occupancy_limiter}) {k.waves:7.2f} waves {k.time_us:10.1f} us "
                         f"DRAM r {k.dram_read_bytes / 1e6:9.1f} MB w {k.dram_write_bytes / 1e6:9.1f} MB "
                         f"L2 hit {k.l2_hit_rate:5.1%}")
        return "\n".join(lines)
