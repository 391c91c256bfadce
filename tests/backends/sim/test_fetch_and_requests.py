"""Two measured mechanisms of a tile's round trip (round 10, docs/history.md):

* the L2 fetches 64-byte blocks: a 32-byte read miss brings its neighbour sector too, so a tile of
  32-byte rows walking along its rows finds every second sector present (ncu on the H200:
  4,096 of 8,208 sector lookups hit, ``data/h200/micro/ncu_probe_round9.json``);
* a tile's round trip grows with the lines it asks for at once (pointer chains on the H200:
  one line 706 cycles, 16 lines 866, 256 lines 1561; ``micro_round10d.json``, ``micro_round10e.json``).
"""
import json
import math
from pathlib import Path

import pytest

from gpusim.api import simulate
from gpusim.backends.sim import codegen
from gpusim.backends.sim.l2 import L2Cache
from gpusim.hardware import load_gpu

ROOT = Path(__file__).resolve().parents[3]
MICRO = ROOT / "data" / "h200" / "micro"
STREAM = "benchmarks/kernels/stream_cols.py:stream_cols"


def test_a_32_byte_miss_fetches_its_64_byte_block():
    c = L2Cache(1 << 20, 128, 16, fetch_bytes=64)
    assert c.access(0, 1, 0, 32, now=0.0)[:2] == (0, 1)
    assert (c.missed_sectors, c.fetched_sectors) == (1, 2)     # sector 0 asked, 0 and 1 from DRAM
    assert c.access(32, 1, 0, 32, now=1.0)[:2] == (1, 0)       # sector 1: present
    assert (c.missed_sectors, c.fetched_sectors) == (0, 0)
    assert c.access(64, 1, 0, 32, now=1.0)[:2] == (0, 1)       # sector 2: another block
    assert (c.missed_sectors, c.fetched_sectors) == (1, 2)
    assert c.access(96, 1, 0, 32, now=1.0)[:2] == (1, 0)


def test_without_fetch_blocks_only_the_asked_sector_comes():
    c = L2Cache(1 << 20, 128, 16)
    c.access(0, 1, 0, 32, now=0.0)
    assert (c.missed_sectors, c.fetched_sectors) == (1, 1)
    assert c.access(32, 1, 0, 32, now=1.0)[:2] == (0, 1)


def test_a_partial_block_fetches_only_what_is_absent():
    c = L2Cache(1 << 20, 128, 16, fetch_bytes=64)
    c.access(32, 1, 0, 32, now=0.0, read=False)             # a store writes sector 1 only
    assert c.fetched_sectors == 1
    assert c.access(0, 1, 0, 32, now=1.0)[:2] == (0, 1)     # sector 0 missing: fetch it, not 1 again
    assert (c.missed_sectors, c.fetched_sectors) == (1, 1)
    assert c.access(64, 1, 0, 64, now=1.0)[:2] == (0, 1)
    assert (c.missed_sectors, c.fetched_sectors) == (2, 2)


@pytest.mark.parametrize("fetch,group", [(0, 1), (32, 1), (64, 2), (96, 2), (128, 4), (256, 4)])
def test_fetch_block_is_a_power_of_two_within_the_line(fetch, group):
    assert L2Cache(1 << 20, 128, 16, fetch_bytes=fetch).fetch_group == group


def test_a_32_byte_row_stream_hits_every_second_sector():
    """The ncu measurement itself: stream_cols at 32-byte rows (BLOCK_K 16), one CTA."""
    h200 = load_gpu("h200")
    kw = dict(check=False, BLOCK_N=16, BLOCK_K=16, ctas=1, cols=2048, fidelity="full")
    k = simulate(STREAM, h200, **kw).kernels[0]
    assert k.l2_hit_rate == pytest.approx(0.5, abs=0.02)
    asked = 16 * 2048 * 2
    assert asked <= k.dram_read_bytes <= 1.05 * asked      # the neighbour is used: no extra DRAM bytes
    k0 = simulate(STREAM, h200.model_copy(update={"l2_fetch_bytes": 0}), **kw).kernels[0]
    assert k0.l2_hit_rate < 0.02


def test_request_latency_interpolates_and_extends():
    t = {4: 8.0, 16: 160.0, 256: 855.0}
    assert codegen.request_latency(t, 1) == 0.0
    assert codegen.request_latency(t, 2) == pytest.approx(8.0 / 3)
    assert codegen.request_latency(t, 16) == 160.0
    assert codegen.request_latency(t, 136) == pytest.approx((160 + 855) / 2)
    assert codegen.request_latency(t, 512) == pytest.approx(855 + 695 / 240 * 256)
    assert codegen.request_latency({}, 300) == 0.0


def test_the_shipped_table_is_the_recorded_measurement():
    """configs/h200.yaml's request_latency_cycles is what micro_fidelity.request_latency_fields
    derives from the recorded pointer chains (so the numbers have a reproducible source)."""
    src = (ROOT / "benchmarks" / "micro_fidelity.py").read_text()
    ns: dict = {}
    exec(src[src.index("def request_latency_fields"):], ns)
    lines = json.loads((MICRO / "micro_round10d.json").read_text())["sectorlines"]
    hits = json.loads((MICRO / "micro_round10e.json").read_text())["sectorhits"]
    got = ns["request_latency_fields"](lines, hits)
    assert got == load_gpu("h200").request_latency_cycles
    assert all(a <= b for t in got.values() for a, b in zip(list(t.values()), list(t.values())[1:]))


@pytest.mark.parametrize("rows", [16, 64])
def test_a_tile_of_more_lines_waits_longer(rows):
    """One CTA streaming rows x 128 bytes (not pipelined): the table adds its extra cycles to every
    iteration's miss, and nothing when emptied (the ideal configs)."""
    h200 = load_gpu("h200")
    kw = dict(check=False, BLOCK_N=rows, BLOCK_K=64, ctas=1, cols=4096, num_stages=2, fidelity="full")
    with_t = simulate(STREAM, h200, **kw).time_us
    without = simulate(STREAM, h200.model_copy(update={"request_latency_cycles": {}}), **kw).time_us
    iters = 4096 // 64
    extra = codegen.request_latency(h200.request_latency_cycles["miss"], rows) / h200.clock_hz * 1e6 * iters
    assert with_t - without == pytest.approx(extra, rel=0.15)
    assert math.isclose(codegen.request_latency(load_gpu("h100-ideal").request_latency_cycles.get("miss", {}), rows), 0)


def test_the_shipped_fill_rates_are_the_mlp_slopes_net_of_the_round_trip():
    """micro_fidelity.mlp_fields on the recorded mlp microbenchmark: without the measured round trip
    it gives the old rates (56.48 B/clk per CTA, 3.437 per warp); with it, what configs/h200.yaml
    ships (no cp.async rate left, 4.661 per warp)."""
    src = (ROOT / "benchmarks" / "micro_fidelity.py").read_text()
    ns: dict = {"math": math}
    exec(src[src.index("def mlp_fields"):src.index("def request_latency_fields")], ns)
    mlp = json.loads((MICRO / "micro_mlp.json").read_text())
    h200 = load_gpu("h200")
    assert ns["mlp_fields"](mlp["mlp"], mlp["sm_count"]) == {"cta_async_fill_bytes_per_clk": 56.48,
                                                              "warp_load_bytes_per_clk": 3.437}
    got = ns["mlp_fields"](mlp["mlp"], mlp["sm_count"], h200.request_latency_cycles["miss"])
    assert got == {"cta_async_fill_bytes_per_clk": h200.cta_async_fill_bytes_per_clk,
                   "warp_load_bytes_per_clk": h200.warp_load_bytes_per_clk}
    assert h200.cta_async_fill_bytes_per_clk is None
