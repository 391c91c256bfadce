"""Checks a point passes before any simulation: fast, closed-form, no SimPy.

Owns these refusals, in this order:

1. HBM capacity: the workload's tensors must fit in the GPU's HBM (``hbm_bytes``), else the point
   is ``infeasible``; so is an fp8 workload on a GPU without FP8 tensor cores (``dtype_problem``).
2. Tile rules Triton enforces (``dsl/rules.py``), else ``infeasible``.
3. Work: an estimate of what the simulator (and the numpy check) would do; above ``max_work`` the
   point is refused with ``WorkLimitError`` naming the estimate and how to raise the limit.
4. The exact check's memory (``check: true``): the arrays the numpy check would hold
   (``check_bytes``); above ``MAX_CHECK_BYTES`` (scaled by ``max_work`` / ``DEFAULT_MAX_WORK``,
   so raising the work limit raises it too) the point is refused the same way, before anything
   is allocated.

The per-CTA resource limits (SRAM, warps) stay in ``backends/sim/cost.occupancy``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .dsl import ir
from .dsl.rules import first_violation
from .hardware import GPUConfig

# GPU memory sizes are printed in decimal GB (1e9 B), as the rest of gpusim prints bytes. The
# configs hold the binary sizes drivers report (the A100 80GB has 80 GiB = 85.9e9 B).
GB = 1e9

# One work unit is one simulated step (an IR op of one CTA, or of one coarsened loop step, on
# the SimPy engine): about 15 us each on a 2-core development machine (attention_flash B4 H16
# N4096 on h100: 170k steps and loads in 4.6 s, of which 17M L2 lines take 2 s). The other costs
# are expressed in these units from the same measurement. Checked on flash, naive, matmul, fast
# and full: 3.5 to 22 us of wall time per estimated unit (the IR op count over-counts the engine's
# steps for flash).
L2_LINES_PER_UNIT = 125       # the numba L2 walks ~8M lines/s (0.12 us per line)
SCANNED_CTAS_PER_UNIT = 9     # a sampled launch counts every CTA's loop trips (~1.7 us per CTA)
NUMPY_OPS_PER_UNIT = 1        # the numpy check runs every op of every CTA (~10 us per tile op)
# Default limit: 1 to 7 minutes of simulation at 4 to 20 us per unit; every built-in scenario
# point estimates below 3e6 (the largest: scenarios/validation/flash_tiles.yaml, 2.6e6).
DEFAULT_MAX_WORK = 2e7
LOOP_STEPS = 16               # the engine's default loop coarsening (LaunchSim loop_steps)
# The exact check's arrays at the default work limit: 4 GB. Every built-in scenario point with
# check: true holds well below it; the auto check (api.AUTO_CHECK_MAX_ELEMS) far below.
MAX_CHECK_BYTES = 4e9
F64 = 8


class WorkLimitError(ValueError):
    """A point would take too long to simulate; the message gives the estimate and the override."""


@dataclass(frozen=True)
class WorkEstimate:
    units: float
    sim_steps: float
    l2_lines: float
    scanned_ctas: float
    numpy_ops: float

    def describe(self) -> str:
        return (f"{self.units:.3g} work units ({self.sim_steps:.3g} simulated steps, {self.l2_lines:.3g} L2 lines, "
                f"{self.scanned_ctas:.3g} CTAs scanned, {self.numpy_ops:.3g} numpy check ops)")


def hbm_problem(workload: ir.Workload, cfg: GPUConfig) -> str | None:
    """Why the workload's tensors do not fit in HBM, or None."""
    need = sum(t.nbytes for t in workload.tensors.values())
    if need > cfg.hbm_bytes:
        return f"needs {need / GB:.0f} GB of HBM, {cfg.name} has {cfg.hbm_bytes / GB:.0f} GB"
    return None


def _trips(loop: ir.Loop, pid: tuple) -> int:
    a, b = ir.eval_expr(loop.start, pid, {}), ir.eval_expr(loop.end, pid, {})
    return max(0, -(-(b - a) // loop.step)) if loop.step > 0 else 0


def _tile_bytes(op) -> int:
    v = op.out if isinstance(op, ir.Load) else op.value
    return v.numel * ir.DTYPE_BYTES[op.tensor.dtype]


def estimate_work(workload: ir.Workload, cfg: GPUConfig, fidelity: str = "fast", check=False,
                  ctas_per_sm: dict | None = None) -> WorkEstimate:
    """Upper-bound estimate of the simulation's cost, from the grid, the loop trips and the tiles.

    Mirrors the engine's sampling (``fast``: 4 waves from the start and the last 1-2 waves, loops
    coarsened to ``LOOP_STEPS`` steps; ``full``: everything). Loop trips are taken at the first and
    last program, the most any CTA runs for the built-in kernels (causal rows grow with the row)."""
    steps = lines = scanned = numpy_ops = 0.0
    for launch in workload.launches:
        n = launch.num_programs
        per_sm = (ctas_per_sm or {}).get(launch.name, 1)
        slots = max(1, min(n, cfg.sm_count * per_sm))
        sampled = fidelity == "fast" and n > 8 * slots
        sim_ctas = min(n, 5 * slots + n % slots) if sampled else n
        if sampled:
            scanned += n
        rank = len(launch.grid)
        first = (0, 0, 0)
        last = tuple(g - 1 for g in launch.grid) + (0,) * (3 - rank)
        top_steps = top_bytes = 0.0
        all_ops = 0.0
        for op in launch.program.body:
            if isinstance(op, ir.Loop):
                trips = max(_trips(op, first), _trips(op, last))
                body = list(ir.walk(op.body))
                group = 1 if fidelity == "full" else max(1, math.ceil(trips / LOOP_STEPS))
                iters = math.ceil(trips / group)
                top_steps += iters * len(body)
                top_bytes += trips * sum(_tile_bytes(o) for o in body if isinstance(o, (ir.Load, ir.Store)))
                all_ops += trips * len(body)
            else:
                top_steps += 1
                all_ops += 1
                if isinstance(op, (ir.Load, ir.Store)):
                    top_bytes += _tile_bytes(op)
        steps += sim_ctas * top_steps
        lines += sim_ctas * top_bytes / cfg.l2_line_bytes
        if check is True:
            numpy_ops += n * all_ops
    units = (steps + lines / L2_LINES_PER_UNIT + scanned / SCANNED_CTAS_PER_UNIT
             + numpy_ops / NUMPY_OPS_PER_UNIT)
    return WorkEstimate(units, steps, lines, scanned, numpy_ops)


def check_bytes(workload: ir.Workload) -> float:
    """Bytes of arrays the numpy check (``numpy_exec.check``) holds at its peak, estimated from the
    tensors: the inputs drawn (float64 while drawn, then the storage dtype), every tensor in the
    executor's memory (storage dtype), the reference's float64 inputs and outputs, and the error's
    float64 copies of each output. A reference over attention scores (a ``seq_len`` parameter with
    ``batch`` and ``heads``) also holds about four float64 arrays of batch x heads x seq_len^2."""
    numel = {n: t.nbytes // ir.DTYPE_BYTES[t.dtype] for n, t in workload.tensors.items()}
    size = {n: ir.DTYPE_BYTES[t.dtype] for n, t in workload.tensors.items()}
    total = sum(numel[n] * size[n] for n in numel)                        # the executor's memory
    total += sum(numel[n] * (size[n] + 2 * F64) for n in workload.inputs if n in numel)   # drawn + reference copy
    total += sum(numel[n] * 3 * F64 for n in workload.outputs if n in numel)              # reference + error copies
    p = workload.params or {}
    if all(isinstance(p.get(k), int) and not isinstance(p.get(k), bool) for k in ("seq_len", "batch", "heads")):
        total += 4 * F64 * p["batch"] * p["heads"] * p["seq_len"] ** 2
    return float(total)


def check_memory(workload: ir.Workload, check=False, max_work: float | None = None) -> None:
    """Raise ``WorkLimitError`` when ``check is True`` and the exact check would hold more than
    ``MAX_CHECK_BYTES`` (scaled by the work limit) of arrays."""
    if check is not True:
        return
    limit = MAX_CHECK_BYTES * ((max_work or DEFAULT_MAX_WORK) / DEFAULT_MAX_WORK)
    need = check_bytes(workload)
    if need > limit:
        raise WorkLimitError(
            f"{workload.name}: refused, the exact check (check: true) would hold about {need / GB:.3g} GB of arrays, "
            f"above its limit of {limit / GB:.3g} GB; set check: false (or auto), shrink the point, or raise "
            f"max_work (the limit scales with it)")


def dtype_problem(workload: ir.Workload, cfg: GPUConfig) -> str | None:
    """Why ``cfg`` cannot run the workload's dtypes, or None: an fp8 tensor needs FP8 tensor cores,
    i.e. an fp8 entry in ``tensor_flops_per_s`` (Hopper has them; the A100 does not)."""
    used = {t.dtype for t in workload.tensors.values()} | {
        x.dtype for launch in workload.launches for op in ir.walk(launch.program.body)
        if isinstance(op, ir.Dot) for x in (op.a, op.b)}
    for dt in sorted(used & set(ir.FP8_DTYPES)):
        if dt not in cfg.tensor_flops_per_s:
            return (f"{dt} on {cfg.name}: this GPU has no FP8 tensor cores (its tensor_flops_per_s lists "
                    f"{', '.join(cfg.tensor_flops_per_s)}); FP8 needs a Hopper GPU such as h100 or h200")
    return None


def infeasible_reason(workload: ir.Workload, cfg: GPUConfig) -> str | None:
    """Why no GPU run of ``workload`` on ``cfg`` is possible (HBM capacity, dtypes the GPU lacks,
    Triton tile rules), or None."""
    return hbm_problem(workload, cfg) or dtype_problem(workload, cfg) or first_violation(workload)


def check_work(workload: ir.Workload, cfg: GPUConfig, fidelity: str = "fast", check=False,
               max_work: float | None = None, ctas_per_sm: dict | None = None) -> WorkEstimate:
    """Raise ``WorkLimitError`` when the estimate exceeds ``max_work`` (default ``DEFAULT_MAX_WORK``)."""
    limit = DEFAULT_MAX_WORK if max_work is None else max_work
    check_memory(workload, check, max_work)
    est = estimate_work(workload, cfg, fidelity, check, ctas_per_sm)
    if est.units > limit:
        raise WorkLimitError(
            f"{workload.name}: refused, the simulation would take about {est.describe()}, above max_work={limit:.3g}; raise it with max_work=... (simulate() argument, or "
            f"max_work: in the scenario / --set max_work=...) or shrink the point")
    return est


def check_options(check, fidelity, max_work=None) -> None:
    """Validate the simulate() options; raises ValueError with a one-line message."""
    if not (check == "auto" or isinstance(check, bool)):
        raise ValueError(f"check must be True, False or 'auto', got {check!r}")
    if fidelity not in ("fast", "full"):
        raise ValueError(f"fidelity must be 'fast' or 'full', got {fidelity!r}")
    if max_work_problem(max_work):
        raise ValueError(f"max_work must be a positive number of work units, got {max_work!r}")


def max_work_problem(max_work) -> str | None:
    """Why ``max_work`` is not a valid work limit (None, or a positive number), or None."""
    if max_work is not None and (isinstance(max_work, bool) or not isinstance(max_work, (int, float))
                                 or not max_work > 0):
        return "must be a positive number of work units (e.g. 1e8)"
    return None


def read_max_work(max_work):
    """``max_work`` as written in a scenario or ``--set``: YAML 1.1 reads ``1e8`` (no dot) as a
    string, so a string that parses as a number is taken as that number; anything else unchanged."""
    if isinstance(max_work, str):
        try:
            return float(max_work)
        except ValueError:
            pass
    return max_work
