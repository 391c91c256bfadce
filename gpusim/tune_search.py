"""The search behind ``gpusim tune``: every config bounded, the promising ones simulated, the rest pruned.

Each config's lower bound (``lower_bound.py``: no compiler, no simulation, about a millisecond)
either says it cannot run (shared memory, warps, Triton's tile rules: listed with the reason, never
simulated) or bounds its simulated time from below. Configs are simulated in the order of their
bounds, on ``jobs`` processes; a config is pruned, never simulated, when its bound exceeds the best
simulated time so far by more than ``margin``. Since no config is faster than its bound, a pruned
config is more than ``margin`` slower than the best: the best config and every config within
``margin`` of it are always simulated, so the ranking's head is that of simulating every config.
The bound bounds the simulated (mechanistic) time; where a row's ``time_us`` is calibrated, the
threshold is divided by the least calibration factor seen (``prune_above``), so the guarantee
holds for the calibrated ranking while the pruned configs' factors are no lower than the
simulated ones'.

A config is simulated with that threshold as a time limit (``backends/sim/time_limit.py``): once
its simulated clock passes it, the config is more than ``margin`` slower than the best so far, and
it is stopped there and counted as pruned, the limit it passed being its proven lower bound.

Each simulated config is saved as it finishes (``tune_store.py``) and served on a re-run.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .backends.sim.time_limit import reached, time_limit
from .compiler import registers
from .lower_bound import lower_bound
from .sweep.errors import RunError
from .sweep.executors import worker_init
from .sweep.point import run_point
from .sweep.progress import Progress


@dataclass
class Outcome:
    """What the search did with each config (by index into the points)."""

    rows: dict = field(default_factory=dict)         # simulated (or saved): the results.csv row
    bounds: dict = field(default_factory=dict)       # lower bound in us of each feasible config
    infeasible: dict = field(default_factory=dict)   # reason, found by the bound (never simulated)
    pruned: list = field(default_factory=list)       # indices pruned: bound > best x (1 + margin), or stopped
    stopped: dict = field(default_factory=dict)      # of those, the ones stopped mid-simulation: the limit (us) passed
    cached: int = 0                                  # rows served from the store


def bounds_of(points: list, build) -> tuple:
    """({i: bound us}, {i: infeasible reason}, {i: error row}, {i: likely to spill}) of ``points``;
    ``build(pt)`` returns (workload, config) or raises ValueError for a point that cannot be built.
    A config likely to spill (``spill_prone``) is simulated after the others: its bound leaves its
    spills out, so in bound order it would come first and, simulated without a best time to stop
    at, take the longest."""
    bounds, infeasible, errors, late = {}, {}, {}, set()
    for i, pt in enumerate(points):
        try:
            wl, cfg = build(pt)
        except ValueError as e:
            errors[i] = {"status": "error", "reason": str(e).splitlines()[0] if str(e) else type(e).__name__}
            continue
        try:
            b = lower_bound(wl, cfg)
        except Exception:       # no bound for this config: it is simulated, never pruned
            bounds[i] = 0.0
            continue
        if b.infeasible:
            infeasible[i] = b.infeasible
        else:
            bounds[i] = b.time_us
            if spill_prone(wl, cfg):
                late.add(i)
    return bounds, infeasible, errors, late


def spill_prone(workload, cfg) -> bool:
    """Whether the analytic register estimate of a launch of ``workload`` exceeds the per-thread
    cap (only an order for the search: never a reason to prune)."""
    cap = cfg.max_registers_per_thread
    try:
        return bool(cap) and any(registers.estimate(l.program, cfg.compute_capability or 90) > cap
                                 for l in workload.launches)
    except Exception:
        return False


def _num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 else None


def prune_above(rows: dict, margin: float) -> float:
    """The lower bound above which a config is pruned: the best ranked time x (1 + margin), over
    the least ratio of ranked to simulated time seen (1 without calibration; ``time_us_sim`` is
    the simulated time where ``time_us`` is calibrated), so that a pruned config's ranked time,
    at least its bound times that ratio, is more than ``margin`` above the best (inf when no row
    is ok yet)."""
    best, least = float("inf"), 1.0
    for r in rows.values():
        t = _num(r.get("time_us")) if r.get("status") == "ok" else None
        if t is None:
            continue
        sim = _num(r.get("time_us_sim")) or t
        best, least = min(best, t), min(least, t / sim)
    return best * (1 + margin) / least


def search(points: list, bounds: dict, store, jobs: int = 1, margin: float = 0.05, prune: bool = True,
           progress: bool | None = None, fn=run_point, late=frozenset()) -> Outcome:
    """Simulate the configs of ``bounds`` (index -> lower bound) in bound order (those in ``late``
    after the rest), pruning those that cannot come within ``margin`` of the best; ``store``
    serves and saves rows."""
    out = Outcome(bounds=dict(bounds))
    out.rows = {i: r for i, r in store.load(points).items() if i in bounds}
    out.cached = len(out.rows)
    order = sorted((i for i in bounds if i not in out.rows), key=lambda i: (i in late, bounds[i], i))
    bar = Progress(len(order), progress, cached=out.cached, what=" tune")

    def done(i, res):
        if res[0].get("status") == STOPPED:
            out.stopped[i] = res[0]["lower_bound_us"]
        else:
            out.rows[i] = res[0]
            if not res[0].get("lost"):
                store.save(points[i], res[0])
        bar.update()

    def keep(i) -> bool:
        return not prune or bounds[i] <= prune_above(out.rows, margin)

    def limit() -> float | None:
        return prune_above(out.rows, margin) if prune else None

    try:
        if jobs <= 1:
            rest = _run_serial(points, order, keep, done, fn, limit)
        else:
            rest = _run_pool(points, order, keep, done, jobs, fn, limit)
    finally:
        bar.close()
    out.pruned = list(out.stopped) + rest
    return out


STOPPED = "stopped"


def run_bounded(fn, point, limit_us: float | None):
    """``fn(point)`` with its simulation stopped once its time passes ``limit_us`` (None: never):
    fn's result, or ``({"status": "stopped", "lower_bound_us": the limit}, [], None)`` when stopped."""
    with time_limit(None if limit_us is None else limit_us * 1e-6):
        res = fn(point)
        passed = reached()
    if passed is not None:
        return {"status": STOPPED, "lower_bound_us": passed * 1e6}, [], None
    return res


def _run_serial(points, order, keep, done, fn, limit) -> list:
    pruned = []
    for i in order:
        if keep(i):
            done(i, run_bounded(fn, points[i], limit()))
        else:
            pruned.append(i)
    return pruned


def _run_pool(points, order, keep, done, jobs, fn, limit) -> list:
    """``order`` on ``jobs`` processes, at most ``jobs`` in flight, each next config checked against
    the best known when a worker frees and simulated with that best as its time limit; returns the
    configs of ``order`` its bound pruned."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    ex = ProcessPoolExecutor(max_workers=min(jobs, max(1, len(order))), initializer=worker_init)
    running, pending, pruned = {}, iter(order), []

    def next_config():
        for i in pending:
            if keep(i):
                return i
            pruned.append(i)
        return None
    try:
        while True:
            while len(running) < jobs and (i := next_config()) is not None:
                running[ex.submit(run_bounded, fn, points[i], limit())] = i
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in finished:
                i = running.pop(f)
                try:
                    res = f.result()
                except BrokenProcessPool:
                    raise RunError("a worker process died (killed, out of memory or crashed); every finished "
                                   "config is saved in --out: re-run the same command to go on (--jobs 1 "
                                   "isolates a crashing config)") from None
                except Exception as e:      # the config is an error row (not saved), the rest go on
                    why = (f"{type(e).__name__}: {e}".splitlines() or ["error"])[0]
                    res = ({"status": "error", "reason": why, "lost": True}, [], None)
                done(i, res)
    except BaseException:
        for p in list((getattr(ex, "_processes", None) or {}).values()):
            try:
                p.kill()
            except Exception:
                pass
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)
    return pruned
