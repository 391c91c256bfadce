"""NCCL collectives on the links of one node: the time of an all-reduce (tensor parallelism's two per
layer), an all-gather and a reduce-scatter, from the GPU config's link fields.

The model is NCCL's own tuning model (src/graph/tuning.cc of NVIDIA/nccl: for each algorithm and
protocol, time = latency + bytes / bandwidth, and NCCL runs the quickest), with the link rate of the
config and NCCL's efficiency on it fitted to published all-reduce figures
(``collectives_fit.py``):

* **ring** (every collective): ``2(n-1)`` steps for an all-reduce, ``n-1`` for an all-gather or a
  reduce-scatter; each GPU sends ``2(n-1)/n`` of the buffer (all-reduce) over one direction of its
  links at ``nccl_ring_efficiency`` of the line rate (the bus bandwidth);
* **tree** (all-reduce): inside one node NCCL's tree is a chain; it has NCCL's latencies and 0.9 x
  0.5 of the ring's bus bandwidth, and so never wins on one node (it is kept as NCCL keeps it);
* **NVLS** (all-reduce, NVSwitch with NVLink SHARP, at least ``NVLS_MIN_GPUS`` GPUs): the switch
  adds the buffers and multicasts the sum; each GPU sends and receives the buffer once, at
  ``nccl_nvls_efficiency`` of one direction's line rate (its algorithm bandwidth);
* protocols: LL (low latency, ``nccl_ll_fraction`` of the Simple bandwidth), LL128 (0.92 of it,
  ring only) and Simple; NVLS runs Simple only.

Every call costs ``nccl_call_overhead_us`` more (the launch and the ranks' arrival, as a program
that calls NCCL once per collective sees it), and a Simple-protocol collective moves its first
``nccl_ramp_bytes`` at ``nccl_ramp_fraction`` of its full rate (NCCL uses fewer channels for
smaller buffers: the mid-size dip NCCL itself corrects trees for).
"""
from __future__ import annotations

from dataclasses import dataclass

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
NVLS_MIN_GPUS = 5      # NCCL picks NVLS above 4 GPUs on an 8x H200 node (ml-engineering network/README.md, SHARP)

# NCCL's latencies in us (src/graph/tuning.cc, NVIDIA/nccl): base per (algorithm, protocol) and per
# step over NVLink
BASE_LAT = {("tree", "LL"): 4.4, ("tree", "LL128"): 4.4, ("tree", "Simple"): 0.0,
            ("ring", "LL"): 3.6, ("ring", "LL128"): 10.0, ("ring", "Simple"): 8.4}
STEP_LAT = {("tree", "LL"): 0.52, ("tree", "LL128"): 1.2, ("tree", "Simple"): 28.0,
            ("ring", "LL"): 0.47, ("ring", "LL128"): 1.9, ("ring", "Simple"): 3.4}
LL128_FRACTION = 0.92   # tuning.cc: LL128 carries 120 of every 128 bytes
TREE_FRACTION = 0.9     # tuning.cc: a tree's bus bandwidth is 0.9 of the ring's


class CollectiveError(ValueError):
    """A collective this GPU config cannot run (no links, more GPUs than a node holds)."""


@dataclass(frozen=True)
class CollectiveTime:
    time_us: float
    algorithm: str
    protocol: str
    nbytes: float
    gpus: int

    @property
    def bus_bandwidth(self) -> float:
        """nccl-tests' bus bandwidth of this all-reduce, bytes/s: algbw x 2(n-1)/n."""
        return self.nbytes / (self.time_us * 1e-6) * 2 * (self.gpus - 1) / self.gpus


def check_links(cfg, gpus: int) -> None:
    """CollectiveError (one line naming the field) if ``cfg`` cannot join ``gpus`` GPUs."""
    if gpus <= 1:
        return
    if not cfg.nvlink_links or not cfg.nvlink_bandwidth_bytes_per_s:
        raise CollectiveError(f"{cfg.name} has no NVLink fields (nvlink_links, nvlink_bandwidth_bytes_per_s); "
                              f"tp {gpus} needs them")
    if gpus > cfg.gpus_per_node:
        raise CollectiveError(f"tp {gpus} > gpus_per_node {cfg.gpus_per_node} of {cfg.name}: only one node is modeled")
    if not cfg.nvswitch and gpus > 2:
        raise CollectiveError(f"{cfg.name} has no NVSwitch (nvswitch: false): tp {gpus} needs every GPU linked "
                              f"to every other; at most 2 without it")


def _steps(coll: str, n: int) -> int:
    return 2 * (n - 1) if coll == "all_reduce" else n - 1


def _ring_algbw(cfg, coll: str, n: int) -> float:
    """Algorithm bandwidth (buffer bytes per second) of the ring at the Simple protocol."""
    bus = cfg.nvlink_bandwidth_bytes_per_s / 2 * cfg.nccl_ring_efficiency
    return bus * n / _steps(coll, n)


def _candidates(cfg, coll: str, n: int) -> list:
    """(algorithm, protocol, latency us, bandwidth bytes/s, ramped) NCCL chooses among."""
    ring = _ring_algbw(cfg, coll, n)
    call = cfg.nccl_call_overhead_us
    out = [("ring", "LL", ring * cfg.nccl_ll_fraction, False), ("ring", "LL128", ring * LL128_FRACTION, False),
           ("ring", "Simple", ring, True)]
    rows = [(a, p, call + BASE_LAT[a, p] + _steps(coll, n) * STEP_LAT[a, p], bw, r) for a, p, bw, r in out]
    if coll == "all_reduce" and n > 2:
        tree = cfg.nvlink_bandwidth_bytes_per_s / 2 * cfg.nccl_ring_efficiency * TREE_FRACTION * 0.5
        for p, f, ramp in (("LL", cfg.nccl_ll_fraction, False), ("Simple", 1.0, True)):
            rows.append(("tree", p, call + BASE_LAT["tree", p] + 2 * (n - 1) * STEP_LAT["tree", p], tree * f, ramp))
    if coll == "all_reduce" and cfg.nvswitch and cfg.nvlink_sharp and n >= NVLS_MIN_GPUS:
        nvls = cfg.nvlink_bandwidth_bytes_per_s / 2 * cfg.nccl_nvls_efficiency
        rows.append(("nvls", "Simple", call + cfg.nccl_nvls_latency_us, nvls, True))
    return rows


def _time(cfg, lat: float, bw: float, ramped: bool, nbytes: float) -> float:
    if not ramped or cfg.nccl_ramp_bytes <= 0:
        return lat + nbytes / bw * 1e6
    slow = min(nbytes, cfg.nccl_ramp_bytes)
    return lat + (slow / (bw * cfg.nccl_ramp_fraction) + (nbytes - slow) / bw) * 1e6


def collective_time(cfg, coll: str, gpus: int, nbytes: float, algorithm: str | None = None) -> CollectiveTime:
    """The time of one ``coll`` over ``gpus`` GPUs of ``cfg``'s node; ``nbytes`` is the buffer each GPU
    holds (all-reduce), the gathered result (all-gather) or the input (reduce-scatter). NCCL's
    choice: the quickest algorithm and protocol, or the quickest protocol of ``algorithm``."""
    if coll not in COLLECTIVES:
        raise CollectiveError(f"collective {coll!r}: allowed {', '.join(COLLECTIVES)}")
    if gpus <= 1 or nbytes <= 0:
        return CollectiveTime(0.0, "none", "", nbytes, gpus)
    check_links(cfg, gpus)
    rows = [r for r in _candidates(cfg, coll, gpus) if algorithm in (None, r[0])]
    if not rows:
        raise CollectiveError(f"algorithm {algorithm!r} does not run {coll} on {gpus} GPUs of {cfg.name}")
    best = min(rows, key=lambda r: _time(cfg, r[2], r[3], r[4], nbytes))
    return CollectiveTime(_time(cfg, best[2], best[3], best[4], nbytes), best[0], best[1], nbytes, gpus)


def all_reduce_us(cfg, gpus: int, nbytes: float) -> float:
    return collective_time(cfg, "all_reduce", gpus, nbytes).time_us
