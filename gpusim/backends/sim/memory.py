"""The memory path of one launch: the shared channels and tile loads and stores through the L2.

Bandwidth is modelled by reserving time on FIFO channels (``Channel``: the HBM, the L2's
bandwidth, each SM's load/store port); latency is added on top. A tile's bytes go through the L2
(tags-only sectored LRU in ``l2.py``); its missed 32-byte sectors also cross the HBM channel.
``MemoryPath`` owns these for one launch and adds the bytes it moves to the launch's ``Tally``;
the engine (``engine.py``) decides when a CTA issues a load and how long it waits for it.

Speed: a tile's placement (first byte, rows, pitch, bytes, port cost) depends only on the load and
its offsets, so it is worked out once per distinct tile (CTAs that share a tile, the K/V of one
head or a GEMM panel, reuse it).

Mechanisms charged here besides those of their own modules (``loaded_latency``, ``round_trip``,
``coalescer``, ``hbm_pieces``, ``access``, ``staging``): a register tile fills at no more than
``warp_load_bytes_per_clk`` per warp (``benchmarks/micro_fidelity.py mlp``; ablation "per-warp load
rate" off: median / p90 |error| +0.3 / -0.0 points recorded, -0.0 / +0.0 held-out), and a written
byte holds the HBM for ``2/copy - 1/read`` of a read byte (the bus turnaround of a streaming copy;
ablation "HBM copy rate" off: +0.2 / -0.0 recorded, +0.4 / -0.2 held-out).
"""
from __future__ import annotations

from ...dsl import analysis, ir
from ...hardware import GPUConfig
from . import access, coalescer, hbm_pieces, round_trip, staging
from .l2 import SECTOR_SHIFT, L2Cache
from .loaded_latency import LoadedLatency
from .stats import Tally
from .steps import LoadDesc

SECTOR_BYTES = 1 << SECTOR_SHIFT    # the L2's unit of allocation and DRAM transfer


def row_lines(start: int, rows: int, pitch: int, row_bytes: int, line_shift: int) -> int:
    """L2 lines a tile of ``rows`` rows of ``row_bytes`` bytes, ``pitch`` apart from byte ``start``,
    touches, counted row by row (as ``l2.L2Cache.lookup`` counts its hits and misses)."""
    if rows == 1 or pitch & ((1 << line_shift) - 1) == 0:
        return rows * (((start + row_bytes - 1) >> line_shift) - (start >> line_shift) + 1)
    return sum(((a + row_bytes - 1) >> line_shift) - (a >> line_shift) + 1
               for a in range(start, start + rows * pitch, pitch))


class Channel:
    """A FIFO bandwidth server: a transfer of ``b`` bytes holds it for b / rate cycles."""

    __slots__ = ("rate", "free_at", "busy", "log")

    def __init__(self, bytes_per_cycle: float, log: bool = False):
        self.rate = bytes_per_cycle
        self.free_at = 0.0
        self.busy = 0.0
        self.log = [] if log else None

    def transfer(self, nbytes: float, now: float) -> float:
        start = self.free_at if self.free_at > now else now
        dur = nbytes / self.rate
        self.free_at = start + dur
        self.busy += dur
        if self.log is not None and nbytes:
            self.log.append((start, self.free_at, nbytes))
        return self.free_at


class SM:
    __slots__ = ("pipe_free", "pipe_busy", "port")

    def __init__(self, port_rate: float):
        self.pipe_free = [0.0, 0.0, 0.0]      # tensor, vector, sfu
        self.pipe_busy = [0.0, 0.0, 0.0]
        self.port = Channel(port_rate)


class MemoryPath:
    """One launch's channels and SMs, and its tile loads and stores through ``l2`` (which persists
    across launches); every byte moved is added to ``counters``."""

    def __init__(self, cfg: GPUConfig, l2: L2Cache, addr: dict, tensors: dict, num_warps: int, counters: Tally,
                 timeline: bool = False, ctas_per_sm: int = 1):
        # ctas_per_sm: the CTAs resident on an SM at once (the occupancy, or fewer when the grid is small)
        clk = cfg.clock_hz
        self.cfg, self.l2, self.addr, self.tensors, self.counters = cfg, l2, addr, tensors, counters
        self.hbm = Channel(cfg.hbm_read_bandwidth_bytes_per_s / clk, log=timeline)
        self.hbm_write_rate_ratio = cfg.hbm_write_cost
        self.l2ch = Channel(cfg.l2_bandwidth_bytes_per_s / clk, log=timeline)
        self.spill_store_cost = cfg.l2_write_cost     # L2 path time of a spill's STL byte, in read bytes
        self.sms = [SM(cfg.sm_load_bytes_per_clk) for _ in range(cfg.sm_count)]
        self.l2_latency, self.hbm_latency = cfg.l2_latency_cycles, cfg.hbm_latency_cycles
        self.line_bytes = cfg.l2_line_bytes
        # a CTA's own fill rate once data arrives (None: only the shared port limits it)
        self.fill_rate = (cfg.cta_async_fill_bytes_per_clk,
                          cfg.warp_load_bytes_per_clk * num_warps if cfg.warp_load_bytes_per_clk else None)
        self.tiles: dict = {}     # (load idx, repeat, offsets) -> the tile's placement (see ``tile``) or None
        # a tile's round trip grows with the lines it asks for at once (round_trip.request_latency):
        # (hit, miss) extra cycles by line count, memoised
        self.req_tables = (cfg.request_latency_cycles.get("hit", {}), cfg.request_latency_cycles.get("miss", {}))
        self.req_extra: dict = {}
        # the L2 request coalescer (coalescer.merged_share): requests for a tile while an earlier one
        # is in flight form a run; the n-th of a run costs the slices its share of the bytes
        self.merge_table, self.ctas_per_sm = cfg.l2_coalesced_fraction, ctas_per_sm
        self.runs: dict = {}       # tile key -> [ready time of the run's first request, requests in the run]
        self.merge_cost: dict = {}     # (tile bytes, n) -> the n-th request's share, memoised
        w = cfg.hbm_queue_window_cycles
        self.loaded = LoadedLatency(self.hbm_latency, w, self.hbm.rate) if w else None

    def tile(self, d: LoadDesc, offs, nrep: int, rep_axis):
        """(first byte, rows, pitch, row bytes, bytes, port bytes, sram, fill rate, L2 and fill cost in
        bytes, HBM cost per missed byte: hbm_pieces.hbm_piece_cost, L2 lines one iteration's tile
        asks for) of a load's tile (``nrep`` tiles abutting along ``rep_axis``), or None when it lies
        outside the tensor."""
        shape = d.shape
        if nrep > 1:
            shape = list(shape)
            shape[rep_axis] *= nrep
        t = self.tensors[d.tensor]
        r = analysis.tile_bytes_in_bounds(t, offs, tuple(shape))
        if r is None:
            return None
        rows, row_bytes, first, pitch = r
        nbytes = rows * row_bytes
        # the narrow-access rate was measured on LDG/STG of register tiles; tiles that feed a dot are
        # staged into shared memory, at the cost measured for their rows' alignment (stage_dot)
        if d.sram:
            cost = nbytes * staging.staging_cost(t, d.shape, access.vector_width(t, d.shape), self.cfg)
            port = cost
        else:
            cost = port = nbytes     # a narrow load's repeated sectors hit in the L1 (access.port_width)
        # the DRAM's rate for the contiguous pieces one iteration's tile gives (a merged tile stands
        # for iterations that each read their own piece at their own time)
        r1 = r if nrep == 1 else analysis.tile_bytes_in_bounds(t, offs, tuple(d.shape))
        piece = r1[1] if r1[0] > 1 and r1[3] != r1[1] else r1[0] * r1[1]
        self.l2.reserve(rows, row_bytes)        # l2.lookup's precondition
        base = self.addr[d.tensor]
        return (base + first, rows, pitch, row_bytes, nbytes, port, d.sram,
                self.fill_rate[0 if d.sram and not d.via_registers else 1], cost, hbm_pieces.hbm_piece_cost(piece, self.cfg),
                row_lines(base + r1[2], r1[0], r1[3], r1[1], self.l2.line_shift))

    def load(self, d: LoadDesc, offs, now, sm: SM, who, nrep=1, rep_axis=None, exposures=0.0):
        """Issue one (possibly merged) tile load; returns its ready time. ``exposures``: how many
        more times the load's latency is waited out (a merged step standing for iterations that
        each wait for their own tile)."""
        key = (d.idx, nrep, *offs)
        tile = self.tiles.get(key, False)
        if tile is False:
            tile = self.tiles[key] = self.tile(d, offs, nrep, rep_axis)
        if tile is None:
            return now
        base, rows, pitch, row_bytes, nbytes, port, sram, rate, cost, piece_cost, lines = tile
        run, l2cost = self.coalesce(key, nbytes, nrep, cost, now) if self.merge_table else (None, cost)
        # the L2 is sectored: a miss fetches the blocks of the 32-byte sectors the tile's rows cover
        # (l2.py), so DRAM reads are those sectors' bytes, and a tile whose rows cover part of a
        # line misses the rest on its next access (ncu: data/h200/micro/ncu_probe_round8.json)
        hits, misses, hit_ready, fetched, sectors, missed = self.l2.lookup(base, rows, pitch, row_bytes, now, who)
        miss_bytes = fetched * SECTOR_BYTES
        c = self.counters
        c.l2_read_bytes += nbytes
        c.l2_hit_bytes += nbytes * (sectors - missed) / sectors if sectors else 0.0
        c.dram_read_bytes += miss_bytes
        if sram:
            c.sram_bytes += nbytes
        ch = self.l2ch
        if ch.log is None:          # Channel.transfer, inlined (the hottest call of a launch)
            start = ch.free_at if ch.free_at > now else now
            dur = l2cost / ch.rate
            ready = ch.free_at = start + dur
            ch.busy += dur
        else:
            ready = ch.transfer(l2cost, now)
        ch = sm.port
        start = ch.free_at if ch.free_at > now else now
        dur = port / ch.rate
        t = ch.free_at = start + dur
        ch.busy += dur
        if t > ready:
            ready = t
        # the round trip grows with the lines one iteration's tile asks for: a merged tile's rows of
        # part of a line each (64-byte rows) cover whole lines, but each iteration asks for all of them
        rkey = (lines, misses > 0)
        extra = self.req_extra.get(rkey)      # self.request_extra, inlined
        if extra is None:
            extra = self.request_extra(*rkey)
        lat = self.l2_latency + (0.0 if misses else extra)
        ready += lat
        if misses:
            fill, lat = self.miss(miss_bytes, piece_cost, self.hbm_latency + extra, now, nrep, exposures)
            if fill > ready:
                ready = fill
        if rate:
            t = now + lat + cost / rate
            if t > ready:
                ready = t
        ready += exposures * lat
        if hit_ready > ready:
            ready = hit_ready
        if run is not None:
            run[0] = ready      # later requests merge with this one until its data is back
        return ready

    def miss(self, miss_bytes: float, piece_cost: float, lat: float, now: float, nrep: int, exposures: float):
        """(when its lines are in the L2, its round trip) of a tile's DRAM read of ``miss_bytes``
        at an idle round trip of ``lat`` cycles, plus the loaded latency where the config has it."""
        hbm, loaded = self.hbm, self.loaded
        if loaded is None:
            fill = hbm.transfer(miss_bytes * piece_cost, now) + lat
        else:
            begin = hbm.free_at if hbm.free_at > now else now
            q = loaded.extra(now, begin - now)
            fill = hbm.transfer(miss_bytes * piece_cost, now) + lat + q
            loaded.add(miss_bytes, begin, max(hbm.free_at, now + exposures * lat))
            lat += q
            # a merged step keeps one iteration's tile in flight until its last one is back
            loaded.miss(miss_bytes / nrep, fill + exposures * lat)
        # a merged tile's later iterations' lines arrive their exposures later: a CTA sharing
        # them waits for those, as it would at full fidelity
        self.l2.fill_done(fill + exposures * lat)
        return fill, lat

    def coalesce(self, key, nbytes: int, nrep: int, cost: float, now: float):
        """(the run this request starts, or None when it joins one; its cost to the L2 slices) of a
        request for tile ``key``: one made while an earlier request's data is still on its way
        joins that run and costs its share (``merged``); the rest is merged by the coalescer."""
        run = self.runs.get(key)
        if run is not None and now < run[0]:
            run[1] += 1
            share = self.merged(nbytes // nrep, run[1])      # one iteration's tile: its size
            self.counters.l2_merged_bytes += nbytes * (1.0 - share)
            return None, cost * share
        run = self.runs[key] = [now, 1]
        return run, cost

    def merged(self, tile_bytes: int, n: int) -> float:
        """The share of its bytes the n-th request of a run for one tile costs the L2 slices
        (coalescer.merged_share), memoised."""
        key = (tile_bytes, n)
        x = self.merge_cost.get(key)
        if x is None:
            x = self.merge_cost[key] = coalescer.merged_share(self.merge_table, self.ctas_per_sm, tile_bytes, n)
        return x

    def request_extra(self, lines: int, miss: bool) -> float:
        """Extra round-trip cycles of a tile that asks for ``lines`` lines at once (one iteration's:
        a merged tile stands for several), memoised (round_trip.request_latency)."""
        key = (lines, miss)
        x = self.req_extra.get(key)
        if x is None:
            x = self.req_extra[key] = round_trip.request_latency(self.req_tables[miss], lines)
        return x

    def store(self, op: ir.Store, pid, lv, now, who, sm: SM | None = None) -> None:
        """Write a tile: allocated in the L2 (a later kernel's read can hit; the sectors it writes become
        present, a line's other sectors do not), written through to HBM."""
        offs = [ir.eval_expr(e, pid, lv) for e in op.offsets]
        t = self.tensors[op.tensor.name]
        r = analysis.tile_bytes_in_bounds(t, offs, op.value.shape)
        if r is None:
            return
        rows, row_bytes, first, pitch = r
        nbytes = rows * row_bytes
        if sm is not None:
            # a store Triton splits into element-wide partial-sector writes holds the SM's load/store
            # path for the narrow copy's measured time (access.port_width, access.store_port_bytes)
            port = access.store_port_bytes(t, op.value.shape, nbytes, self.cfg)
            if port > nbytes:
                sm.port.transfer(port, now)
        self.l2.access(self.addr[op.tensor.name] + first, rows, pitch, row_bytes, now, who, read=False)
        self.l2.fill_done(now)
        # an output store holds the L2 path as long as a read byte; at the write rate that spills pay
        # (``spill``) it made non-spilling GEMMs too slow on held-out points (docs/model.md)
        self.l2ch.transfer(nbytes, now)
        if self.loaded is None:
            self.hbm.transfer(nbytes * self.hbm_write_rate_ratio, now)
        else:
            begin = max(self.hbm.free_at, now)
            self.hbm.transfer(nbytes * self.hbm_write_rate_ratio, now)
            self.loaded.add(nbytes, begin, self.hbm.free_at)
        self.counters.dram_write_bytes += nbytes
        self.counters.l2_write_bytes += nbytes

    def spill(self, nbytes: float, now, sm: SM, store_bytes: float = 0.0) -> float:
        """Local-memory traffic (register spills) through the L2 and the SM's port; returns its end.
        ``store_bytes`` of ``nbytes`` are STLs, which the L1 writes through to the L2 (ncu on the
        H200, micro/ncu_probe_round16.json) at the L2's write rate."""
        l2 = nbytes + store_bytes * (self.spill_store_cost - 1.0)
        return max(self.l2ch.transfer(l2, now), sm.port.transfer(nbytes, now))
