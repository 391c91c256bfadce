"""The L2 request coalescer (round 11, docs/history.md): requests from several SMs for the same
lines at once are merged on the way to the L2 slices, which then read only a fraction of the
sectors the SMs receive. Measured by ncu on ``benchmarks/micro_fidelity.py coalescek``
(``data/h200/micro/micro_coalescek.json``, ``ncu_coalescek*.csv``): at one CTA per SM
two sharers leave 57% of the sectors to the slices, 132 leave 30%; at two CTAs per SM 92% and 68%.
"""
import json
from pathlib import Path

import pytest

from gpusim.api import simulate
from gpusim.backends.sim import codegen
from gpusim.backends.sim.l2 import L2Cache
from gpusim.backends.sim.memory import MemoryPath
from gpusim.backends.sim.stats import Tally
from gpusim.backends.sim.steps import LoadDesc
from gpusim.dsl import ir
from gpusim.hardware import ConfigError, load_gpu

ROOT = Path(__file__).resolve().parents[3]
MICRO = ROOT / "data" / "h200" / "micro"
TABLE = {1: {4096: {1: 1.0, 2: 0.8, 4: 0.6}, 16384: {1: 1.0, 2: 0.6, 4: 0.4}},
         2: {4096: {1: 1.0, 2: 0.9, 4: 0.8}}}


def test_fraction_interpolates_in_sharers_tile_bytes_and_ctas_per_sm():
    f = codegen.coalesced_fraction
    assert f({}, 1, 4096, 8) == 1.0
    assert f(TABLE, 1, 4096, 1) == 1.0
    assert f(TABLE, 1, 4096, 2) == pytest.approx(0.8)
    assert f(TABLE, 1, 4096, 2 ** 1.5) == pytest.approx(0.7)          # halfway in log2 of the sharers
    assert f(TABLE, 1, 8192, 2) == pytest.approx(0.7)                 # halfway in log2 of the tile bytes
    assert f(TABLE, 1, 1024, 4) == pytest.approx(0.6)                 # clamped to the smallest tile
    assert f(TABLE, 1, 4096, 64) == pytest.approx(0.6)                # the last value past the largest k
    assert f(TABLE, 3, 4096, 4) == pytest.approx(0.8)                 # past 2 CTAs per SM: the table at 2
    assert f(TABLE, 2 ** 0.5, 4096, 4) == pytest.approx(0.7)          # halfway in log2 of the CTAs per SM


def test_the_shares_of_a_run_add_up_to_the_measured_fraction():
    """The n-th request of a run costs what n cost less what n - 1 did: a run of n costs n x f(n)."""
    for n in (2, 3, 4, 7, 40):
        total = sum(codegen.merged_share(TABLE, 1, 16384, j) for j in range(1, n + 1))
        assert total == pytest.approx(n * codegen.coalesced_fraction(TABLE, 1, 16384, n))
    assert codegen.merged_share(TABLE, 1, 16384, 1) == 1.0
    assert 0.0 <= codegen.merged_share(TABLE, 1, 16384, 100) <= 1.0


def _path(table, ctas_per_sm=1):
    cfg = load_gpu("h200").model_copy(update={"l2_coalesced_fraction": table})
    t = ir.TensorArg("x", (1024, 64), "fp16")
    l2 = L2Cache(cfg.l2_bytes, cfg.l2_line_bytes, cfg.l2_ways)
    tally = Tally()
    mem = MemoryPath(cfg, l2, {"x": 0}, {"x": t}, 4, tally, ctas_per_sm=ctas_per_sm)
    return mem, LoadDesc(0, "x", (), (64, 64), False), tally


def test_simultaneous_requests_for_one_tile_cost_the_slices_their_share():
    mem, d, tally = _path(TABLE)
    for sm in range(4):                         # four SMs ask for the same 8 KiB tile at once
        mem.load(d, (0, 0), 0.0, mem.sms[sm], who=sm)
    nbytes = 64 * 64 * 2
    assert tally.l2_read_bytes == 4 * nbytes                  # every SM still receives the tile
    f = codegen.coalesced_fraction(TABLE, 1, nbytes, 4)
    assert tally.l2_merged_bytes == pytest.approx(4 * nbytes * (1 - f))
    assert mem.l2ch.busy == pytest.approx(4 * nbytes * f / mem.l2ch.rate)


def test_a_request_after_the_first_is_back_is_not_merged():
    mem, d, tally = _path(TABLE)
    ready = mem.load(d, (0, 0), 0.0, mem.sms[0], who=0)
    mem.load(d, (0, 0), ready + 1.0, mem.sms[1], who=1)
    assert tally.l2_merged_bytes == 0.0
    mem.load(d, (0, 64), ready + 1.0, mem.sms[2], who=2)     # another tile: its own run
    assert tally.l2_merged_bytes == 0.0


def test_without_a_table_nothing_merges():
    mem, d, tally = _path({})
    for sm in range(4):
        mem.load(d, (0, 0), 0.0, mem.sms[sm], who=sm)
    assert tally.l2_merged_bytes == 0.0


def test_a_gemm_that_shares_its_panels_reads_fewer_slice_bytes_and_runs_faster():
    """An L2-bound GEMM whose B panel 32 CTAs read at once (4096 x 1024 x 4096, 64 x 128 tiles):
    the slices read a fraction of what the SMs receive, and the launch is faster than without the
    coalescer; the ideal config keeps every byte."""
    h200 = load_gpu("h200")
    kw = dict(check=False, M=4096, N=1024, K=4096, BLOCK_M=64, BLOCK_N=128, BLOCK_K=32, dtype="fp16",
              num_warps=4, num_stages=3)
    k = simulate("matmul", h200, **kw).kernels[0]
    k0 = simulate("matmul", h200.model_copy(update={"l2_coalesced_fraction": {}}), **kw).kernels[0]
    assert k.l2_read_bytes == k0.l2_read_bytes
    assert 0.1 < k.l2_merged_bytes / k.l2_read_bytes < 0.5
    assert k.time_us < 0.9 * k0.time_us
    assert k0.l2_merged_bytes == 0.0
    assert load_gpu("h100-ideal").l2_coalesced_fraction == {}


def test_the_shipped_table_is_the_recorded_measurement():
    """configs/h200.yaml's l2_coalesced_fraction is what micro_fidelity.coalesce_fields derives from
    the recorded coalescek runs, and never grows with the sharers."""
    src = (ROOT / "benchmarks" / "micro_fidelity.py").read_text()
    ns: dict = {}
    exec(src[src.index("def coalesce_fields"):], ns)
    runs = [(json.loads((MICRO / f"micro_{s}.json").read_text()), s, [MICRO / f"ncu_{s}.csv", MICRO / f"ncu_{s}_lrc.csv"])
            for s in ("coalescek", "coalescek_dense")]
    got = ns["coalesce_fields"](runs)
    table = load_gpu("h200").l2_coalesced_fraction
    assert got["l2_coalesced_fraction"] == table
    assert load_gpu("h100").l2_coalesced_fraction == table
    for by_tile in table.values():
        for curve in by_tile.values():
            vals = [curve[k] for k in sorted(curve)]
            assert vals[0] == 1.0 and all(a >= b for a, b in zip(vals, vals[1:]))


@pytest.mark.parametrize("bad,where", [("{1: {4096: {2: 1.5}}}", "l2_coalesced_fraction.1.4096.2"),
                                       ("{0: {4096: {2: 0.5}}}", "l2_coalesced_fraction.0.4096.2")])
def test_a_bad_table_names_its_entry(tmp_path, bad, where):
    import yaml

    data = yaml.safe_load((ROOT / "configs" / "h200.yaml").read_text())
    data["l2_coalesced_fraction"] = yaml.safe_load(bad)
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as e:
        load_gpu(p)
    assert where in str(e.value) and "bad.yaml" in str(e.value)
