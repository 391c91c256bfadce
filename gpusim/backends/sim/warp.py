"""How long one warp takes to issue a compiled loop body when each instruction waits for the
results it reads: a scoreboard over the loop's SASS (``toolchain/sass_deps.py``).

One warp alone on its scheduler issues at most one instruction per clock, in order. An
instruction issues once its source registers are ready; its result is ready ``latency`` cycles
later, by class (``GPUConfig.dependent_latency_cycles``, measured by dependent chains on the H200:
``benchmarks/micro_fidelity.py latency`` and ``reduction``):

* ``fp32``: floating-point arithmetic, compares, selects and conversions (FFMA, FMNMX, FSEL, F2FP...);
* ``int``: integer and predicate arithmetic, moves and uniform-datapath ops (IADD3, ISETP, MOV, UIADD3...);
* ``mufu``: the special-function unit (MUFU.EX2...), which also accepts one warp-instruction per
  ``32 / (sfu_ops_per_clk_per_sm / 4)`` clocks on its sub-partition;
* ``shfl``: warp shuffles; ``shared``: shared-memory loads (LDS, LDSM); ``shared_store``: the time a
  shared store (STS) takes to be visible to the CTA's other warps; ``barrier``: a CTA barrier (BAR), which also waits for this warp's shared stores;
  ``branch``: cycles from a taken backward branch (the loop's) to the next instruction's issue.

* ``local``: a register spill's reload (LDL), a round trip to the L2 (``GPUConfig.l2_latency_cycles``
  unless ``dependent_latency_cycles`` names its own): the L1 writes every spill store through to
  the L2 and the reloads miss it (ncu on the H200, ``micro/ncu_probe_round16.json``). A warp keeps
  at most ``GPUConfig.spill_reloads_in_flight_per_warp`` reloads in flight: the next waits for the
  oldest to return (``benchmarks/spill_reload_chain.py``: spilling split-K GEMVs on the H100 take
  about a third of the round trip per reload, where independent reloads issued back to back would
  take a few cycles each; the limit, 6, was chosen on the recorded training points that spill, docs/model.md).
  Not
  modelled: reloads that hit the L1 (few spilled bytes, no shared memory, no streaming loads beside
  them) are charged the same round trip.

Tensor instructions (HGMMA, HMMA, their fences and waits) and global memory traffic (LDG, LDGSTS,
STG) and the spill stores (STL) have no latency here: the engine times the tensor pipe and every
load itself (and the spills' bytes, ``spills.py``). The result is the steady-state cycles per
iteration of one warp; the engine uses it as the least time a CTA's loop iteration of SIMT work
can take, while holding the pipes only for the issue and throughput cycles (a latency-bound CTA
leaves them to other CTAs). The same scoreboard runs once over the code outside every loop
(``pass_cycles``, ``straight_cycles``).

Measured by: every latency on its own on the H200 (``benchmarks/latency_chains.py``: FADD 4.0,
shuffle 24.1, ``ld.shared`` 23.2, ``bar.sync`` 20.0); checked on 96 dependent-chain
microbenchmarks (``benchmarks/fit_latency.py --check-all``: median |error| 9.2%, p90 18.8%).

Effect (docs/model.md, ablation "dependent latency (scoreboard)" off): median / p90 |error| +0.5 /
+4.1 points on the recorded points, +1.5 / +0.9 on the held-out points.
"""
from __future__ import annotations

from functools import lru_cache

from ...hardware import KEY_CLASSES, GPUConfig

LATENCY_CLASSES = KEY_CLASSES["dependent_latency_cycles"][1]   # fp32, int, mufu, shfl, shared, ..., local
_FREE = ("HGMMA", "HMMA", "WARPGROUP", "LDG", "LDGSTS", "LDGDEPBAR", "DEPBAR", "STG", "STL",
         "FENCE", "MEMBAR", "RED", "ATOM", "NOP", "EXIT", "CCTL", "UTMA")


def op_class(opcode: str) -> str:
    """Latency class of a SASS opcode (with or without modifiers)."""
    op = opcode.split(".", 1)[0]
    if op == "LDL":
        return "local"
    if op.startswith(_FREE) or op in ("LDGSTS",):
        return "free"
    if op == "MUFU":
        return "mufu"
    if op == "SHFL":
        return "shfl"
    if op in ("LDS", "LDSM", "STS"):
        return "shared"
    if op == "BAR":
        return "barrier"
    if op == "BRA":
        return "branch"
    if op.startswith(("F", "HADD2", "HMUL2", "HFMA2")) and not op.startswith("FENCE"):
        return "fp32"
    return "int"


def _shared_bytes(op: str) -> int:
    """Bytes one warp moves through shared memory with a LDS/STS/LDSM instruction."""
    name, _, mods = op.partition(".")
    if name == "LDSM":
        return 32 * 4 * (int(mods[-1]) if mods[-1:].isdigit() else 1)
    return 32 * (16 if ".128" in op else 8 if ".64" in op else 4)


def _decode(ins: str) -> tuple:
    op, dst, src = ins.split("|")
    cls = op_class(op)
    return cls, op.split(".", 1)[0], tuple(dst.split()), tuple(src.split()), _shared_bytes(op) if cls == "shared" else 32


@lru_cache(maxsize=4096)
def _decoded(body: tuple) -> tuple:
    return tuple(_decode(i) for i in body)


def _start(ins, w, lat, sh):
    """Earliest issue cycle of instruction ``ins`` of warp ``w`` (a dict) on the shared scheduler ``sh``."""
    cls, op, dst, src, units = ins
    start = w["t"] if w["t"] > sh["free"] else sh["free"]
    ready = w["ready"]
    for r in src:
        x = ready.get(r, 0.0)
        if x > start:
            start = x
    if cls in sh["rate"] and sh[cls] > start:
        start = sh[cls]
    if cls == "barrier" and w["stores"] > start:
        start = w["stores"]
    if cls == "local" and sh["slots"] and len(w["loads"]) >= sh["slots"] and w["loads"][-sh["slots"]] > start:
        start = w["loads"][-sh["slots"]]     # the oldest of the warp's reloads in flight returns first
    return start


def _issue(ins, w, start, lat, sh):
    cls, op, dst, src, units = ins
    done = start
    if cls in sh["rate"]:
        sh[cls] = start + units / sh["rate"][cls]
    if cls == "shared" and op == "STS":
        w["stores"] = max(w["stores"], start + lat["shared_store"])
    elif cls != "free" and cls != "barrier":
        done = start + lat[cls]
    if cls == "local" and sh["slots"]:
        w["loads"] = (w["loads"] + [done])[-sh["slots"]:]
    for r in dst:
        w["ready"][r] = done
    sh["free"] = start + 1.0
    w["t"] = done if cls == "branch" else start + 1.0
    w["pc"] += 1


def _run(code: tuple, lat: dict, rate: dict, iterations: int, warps: int, slots: int = 0) -> list:
    """Cycle at which the warps finish each of ``iterations`` passes over the body, ``warps``
    identical warps sharing one scheduler (each in order; the scheduler issues one instruction
    per clock, the earliest ready; a barrier releases when every warp has reached it; a warp
    keeps at most ``slots`` spill reloads in flight, 0: any number)."""
    ws = [{"t": 0.0, "ready": {}, "stores": 0.0, "pc": 0, "loads": []} for _ in range(warps)]
    sh = {"free": 0.0, "rate": rate, "slots": slots, **{k: 0.0 for k in rate}}
    n = len(code)
    ends = []
    for _ in range(iterations):
        for w in ws:
            w["pc"] = 0
        while True:
            cands = [(_start(code[w["pc"]], w, lat, sh), k) for k, w in enumerate(ws)
                     if w["pc"] < n and code[w["pc"]][0] != "barrier"]
            if not cands:
                waiting = [w for w in ws if w["pc"] < n]
                if not waiting:
                    break
                at = max(_start(code[w["pc"]], w, lat, sh) for w in waiting) + lat["barrier"]
                for w in waiting:
                    w["t"], w["pc"] = at, w["pc"] + 1
                continue
            start, k = min(cands)
            _issue(code[ws[k]["pc"]], ws[k], start, lat, sh)
        ends.append(max(w["t"] for w in ws))
    return ends


def iteration_cycles(body: tuple, latency: dict, rates: dict, num_warps: int = 1, schedulers: int = 4,
                     reloads_in_flight: int = 0) -> float:
    """Steady-state cycles per pass over ``body`` (instruction strings) of one CTA of ``num_warps``
    warps: ``ceil(num_warps / schedulers)`` of them share each scheduler, and the SM-wide units in
    ``rates`` (per clock per SM: ``mufu`` lanes, ``shfl`` lanes, ``shared`` bytes) are split among
    the ``min(num_warps, schedulers)`` schedulers in use. The mean of passes 3 and 4, after the
    loop-carried registers settle. Memoised: every launch of a sweep that shares a compiled kernel
    asks the same question."""
    return _passes(body, latency, rates, num_warps, schedulers, 4, reloads_in_flight)


def pass_cycles(body: tuple, latency: dict, rates: dict, num_warps: int = 1, schedulers: int = 4,
                reloads_in_flight: int = 0) -> float:
    """Cycles one CTA's warps take to issue straight-line code once (``body``: the instructions
    outside every loop), each instruction waiting for the results it reads, as ``iteration_cycles``
    schedules a loop body: what a kernel's single pass, prologue and epilogue take at least."""
    return _passes(body, latency, rates, num_warps, schedulers, 1, reloads_in_flight)


def _passes(body, latency: dict, rates: dict, num_warps: int, schedulers: int, passes: int, slots: int = 0) -> float:
    if not body or not latency:
        return 0.0
    return _scheduled(tuple(body), tuple(sorted(latency.items())), tuple(sorted(rates.items())),
                      max(1, int(num_warps)), schedulers, passes, int(slots or 0))


@lru_cache(maxsize=8192)
def _scheduled(body: tuple, latency: tuple, rates: tuple, num_warps: int, schedulers: int, passes: int,
               slots: int = 0) -> float:
    """One pass's cycles (``passes`` 1), or the steady state of a loop: the mean of passes 3 and 4."""
    given, rate = dict(latency), dict(rates)
    lat = {k: float(given.get(k, 0.0)) for k in LATENCY_CLASSES}
    active = min(num_warps, schedulers)
    # the SFU is per sub-partition (a quarter of the SM's); shuffles and shared memory are SM-wide
    per = {"mufu": rate["mufu"] / schedulers, "shfl": rate["shfl"] / active, "shared": rate["shared"] / active}
    ends = _run(_decoded(body), lat, per, passes, -(-num_warps // schedulers), slots)
    return ends[0] if passes == 1 else (ends[3] - ends[1]) / 2.0


# --------------------------------------------------------------------------- on the compiled kernel
def loop_latency_cycles(compiled, num_warps: int, cfg: GPUConfig) -> list | None:
    """Per compiled loop body: the cycles one iteration of the CTA's warps takes at least, when each
    instruction waits for the results it reads (``iteration_cycles``, with ``ceil(num_warps / 4)``
    warps sharing each scheduler). None without the loop bodies or the config's latencies."""
    bodies = getattr(compiled, "loop_bodies", None)
    if not bodies or not cfg.dependent_latency_cycles:
        return None
    lat = latencies(cfg)
    return [iteration_cycles(b, lat, scoreboard_rates(cfg), num_warps, schedulers(cfg), reload_slots(cfg))
            for b in bodies]


def latencies(cfg: GPUConfig) -> dict:
    """The scoreboard's latency per class on ``cfg``: the measured classes, and a spill reload's
    (``local``): a round trip to the L2 unless the config names its own."""
    return {"local": cfg.l2_latency_cycles, **cfg.dependent_latency_cycles}


def reload_slots(cfg: GPUConfig) -> int:
    """The spill reloads one warp keeps in flight on ``cfg`` (0: no limit)."""
    return int(cfg.spill_reloads_in_flight_per_warp or 0)


SUBPARTITIONS = 4      # an SM's warp schedulers, each with its share of the SFUs


def schedulers(cfg: GPUConfig) -> int:
    """The schedulers the scoreboard splits a CTA's warps among: one per warp-instruction issued per
    clock, at most the SM's four sub-partitions (a what-if issuing faster adds no partitions to
    split the SFUs and the shared units over, so it never slows a chain)."""
    return max(1, min(SUBPARTITIONS, int(cfg.warp_issue_per_clk_per_sm)))


def scoreboard_rates(cfg: GPUConfig) -> dict:
    """The SM-wide throughput units the warp scoreboard shares among its schedulers."""
    return {"mufu": cfg.sfu_ops_per_clk_per_sm, "shfl": cfg.shuffle_lanes_per_clk_per_sm,
            "shared": cfg.shared_bytes_per_clk_per_sm}


def straight_cycles(compiled, num_warps: int, cfg: GPUConfig) -> float:
    """The cycles the compiled kernel's code outside its loops takes at least, each instruction
    waiting for the results it reads (``pass_cycles``): a row kernel's single pass with its
    cross-warp reductions, a loop's prologue and epilogue. 0 without the compiled code or the
    config's latencies."""
    body = getattr(compiled, "straight_body", None)
    if not body or not cfg.dependent_latency_cycles:
        return 0.0
    return pass_cycles(body, latencies(cfg), scoreboard_rates(cfg), num_warps, schedulers(cfg), reload_slots(cfg))
