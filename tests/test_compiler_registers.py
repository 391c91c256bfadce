"""The analytic register estimate (the fallback when triton cannot compile) against the registers
ptxas gave the built-in kernels' tile spaces: our sm_90 table (triton 3.9, recorded here without a
GPU by benchmarks/record_resources.py: attention_flash, matmul, elementwise_fused, attention_naive,
then the flash backward's three launches, decode's split and combine, flash with grouped KV heads or
a sliding window, softmax, layernorm and rmsnorm) and the counts the H200 run recorded for its
validation points (triton 3.6, never fitted to). Needs no compiler. docs/resources.md has the full
comparison (``python benchmarks/record_resources.py --compare``)."""
import json
from pathlib import Path

import pytest

from gpusim import kernels
from gpusim.compiler import layouts, registers
from gpusim.dsl import ir

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "tests" / "data" / "compiled_resources_sm90.json"
H200 = ROOT / "data" / "h200" / "micro" / "compiled_resources_h200.json"
MAX_REGS = 255      # ptxas's per-thread cap on sm_90: an estimate above it means "spills"


def _rows(path):
    doc = json.loads(path.read_text())
    out = []
    for r in doc.get("launches", doc.get("rows", [])):
        if "error" in r:
            continue
        launch = next(ln for ln in kernels.build(r["kernel"], r["params"]).launches if ln.name == r["launch"])
        reg = r.get("registers_per_thread", r.get("n_regs"))
        spills = bool(r.get("spill_store_bytes", r.get("n_spills", 0)))
        out.append((r, reg, spills, registers.estimate(launch.program, 90)))
        r["group"] = f"{r.get('space', r['kernel'])}/{r['launch']}"
    return out


def _stats(rows):
    errs = sorted(abs(est - reg) for _, reg, sp, est in rows if not sp)
    missed = [(r["params"], reg, est) for r, reg, sp, est in rows if sp and est <= MAX_REGS]
    false = [(r["params"], reg, est) for r, reg, sp, est in rows if not sp and est > MAX_REGS]
    within = sum(e <= 8 for e in errs) / max(1, len(errs))
    return errs, within, missed, false


@pytest.fixture(scope="module")
def ours():
    return _rows(TABLE)


def test_table_covers_the_tile_spaces(ours):
    groups = {r["group"] for r, *_ in ours}
    assert groups >= {"attention_flash/flash", "matmul/matmul", "elementwise_fused/fused", "attention_naive/pv"}
    assert groups >= set(NEW)
    assert len(ours) >= 450
    assert sum(sp for _, _, sp, _ in ours) >= 100          # spilling configs are in it


# Thresholds: what the estimate reaches today (``python benchmarks/record_resources.py --compare``,
# docs/resources.md), so it cannot silently get worse. The goal is every config within 8 registers
# and every spill flagged; it is NOT reached: 63% (214) of the 339 non-spilling sm_90 launches are
# within 8 (median error 6; max 132: layernorm BLOCK 256 over a 5120-column row on 1 warp, 1 stage,
# where LLVM unrolls the 20-trip loops), 139 of the 150 spilling launches are flagged, 9
# non-spilling ones are flagged falsely. Before per-element temporaries (softmax's loop): 212, 10
# false alarms. Before masks of index values stopped counting the centred
# row's masked-off elements (layernorm's one-tile path): 62% (210), median 6, max 438 (layernorm
# BLOCK 16384 over 5120 columns on 1 warp: 692 estimated, now 340, 254 compiled), 139 flagged, 10
# false. Before decode's combine was
# analysed (masked rows, unpipelined loads held whole): 60% (204), median 7, 137 flagged, 10 false.
# The estimate before that: 40% within 8, median 13, max 802; 138 of 150 flagged, 19 false alarms
# (on the first 246 launches alone: 56%, median 6).
WITHIN8_SM90, MEDIAN_SM90, MAX_SM90, MISSED_SM90, FALSE_SM90 = 0.63, 6, 132, 11, 9
# The H200's triton 3.6 counts (a different compiler version, never fitted to): 72% within 8,
# median 5; all 25 spilling launches flagged, 2 false alarms (flash 128x128 d64 on 4 warps: 234 and
# 243 compiled, 305 estimated). Previous estimate: 68%, median 6, the same 2 false alarms.
WITHIN8_H200, MEDIAN_H200, MISSED_H200, FALSE_H200 = 0.71, 5, 0, 2
# Per launch of the built-ins added after the first table: (non-spilling launches within 8 at least,
# median error at most, spilling launches flagged at least, false spill alarms at most). Previous
# estimate in brackets.
NEW = {"attention_flash_bwd/bwd_preprocess": (8, 6, 0, 0),      # (3/13, median 65, 4 false)
       "attention_flash_bwd/bwd_dkdv": (5, 15, 18, 1),          # (2/14, median 35, 18/18, 4 false)
       "attention_flash_bwd/bwd_dq": (6, 11, 12, 1),            # (7/19, median 27, 12/13, 3 false)
       "attention_decode/decode_split": (15, 5, 9, 2),          # (9/23, median 12, 9/9, 1 false)
       "attention_decode/decode_combine": (12, 8, 8, 0),        # (6/23, median 17, 6/8; before: 1/23, 22)
       "attention_flash_gqa/flash": (12, 7, 12, 1),             # (6/18, median 22, 13/14, 1 false)
       "softmax/softmax": (10, 6, 6, 0),                        # (8/17, median 12, 6/6, 1 false; before: 2/17, 28)
       "layernorm/layernorm": (13, 8, 2, 1),                    # (11/22, median 11; before: 2/22, 19)
       "rmsnorm/rmsnorm": (12, 7, 4, 1)}                        # (7/20, median 12, 4/4, 1 false)


def test_estimate_vs_compiled_sm90(ours):
    errs, within, missed, false = _stats(ours)
    assert within >= WITHIN8_SM90, (within, errs[-10:])
    assert errs[len(errs) // 2] <= MEDIAN_SM90
    assert errs[-1] <= MAX_SM90
    assert len(missed) <= MISSED_SM90, missed
    assert len(false) <= FALSE_SM90, false


@pytest.mark.parametrize("group", sorted(NEW))
def test_estimate_vs_compiled_new_kernels(ours, group):
    rows = [t for t in ours if t[0]["group"] == group]
    errs, _, missed, false = _stats(rows)
    within, median, flagged, false_max = NEW[group]
    assert sum(e <= 8 for e in errs) >= within, errs
    assert errs[len(errs) // 2] <= median, errs
    assert sum(sp for _, _, sp, _ in rows) - len(missed) >= flagged, missed
    assert len(false) <= false_max, false


def test_estimate_vs_compiled_on_the_h200():
    errs, within, missed, false = _stats(_rows(H200))
    assert within >= WITHIN8_H200, (within, errs[-10:])
    assert errs[len(errs) // 2] <= MEDIAN_H200
    assert len(missed) <= MISSED_H200, missed
    assert len(false) <= FALSE_H200, false


def test_warps_per_tile_follows_triton():
    # matmul-like (not chained) wgmma: warpgroups along M first while M has rows for them
    assert layouts.warps_per_tile(128, 128, 8, "v3", chained=False) == (8, 1)
    assert layouts.warps_per_tile(64, 128, 8, "v3", chained=False) == (4, 2)
    # chained dots (flash) keep every warp along M when M has 16 rows per warp
    assert layouts.warps_per_tile(128, 64, 8, "v3", chained=True) == (8, 1)
    # a 128x128 fp32 accumulator over 4 warps: 128 registers per thread
    assert layouts.mma_tile_regs(128, 128, 4, 1) == 128
    # a tile smaller than the warps' coverage is replicated: 16 rows over 4 warps along M
    assert layouts.mma_tile_regs(16, 64, 4, 1) == layouts.mma_tile_regs(16, 64, 1, 1)
    # chained wgmma: all warps along M even when M is too short for them (replicated)
    assert layouts.warps_per_tile(64, 64, 8, "v3", chained=True) == (8, 1)
    # chained mma.sync: all warps along the longer side
    assert layouts.warps_per_tile(32, 256, 8, "v2", chained=True) == (1, 8)


def _dot_warps(kernel, launch, **p):
    ln = next(x for x in kernels.build(kernel, p).launches if x.name == launch)
    g = layouts.Graph(ln.program)
    lay = layouts.dot_layouts(g, 90)
    return [lay[id(o)] for o in ir.walk(ln.program.body) if isinstance(o, ir.Dot)]


def test_dot_layouts_match_tritons_ttgir():
    # What triton 3.9's TTGIR shows for these launches (#mma warpsPerCTA of each dot, in program order).
    # flash 64x64 d256 on 8 warps: S = Q K^T flows into P V: [8, 1]; P V: [4, 2]
    assert _dot_warps("attention_flash", "flash", BLOCK_M=64, BLOCK_N=64, head_dim=256, num_warps=8) == \
        [("v3", 8, 1), ("v3", 4, 2)]
    # flash 32x256 d64 on 8 warps (mma.sync): P V (32 x 64) is converted first, warps along N; S copies it
    assert _dot_warps("attention_flash", "flash", BLOCK_M=32, BLOCK_N=256, head_dim=64, num_warps=8) == \
        [("v2", 1, 8)] * 2
    # flash 64x16 d128 on 2 warps: the last dot decides (64 x 128: along N), not S (64 x 16)
    assert _dot_warps("attention_flash", "flash", BLOCK_M=64, BLOCK_N=16, head_dim=128, num_warps=2) == \
        [("v2", 1, 2)] * 2
    # the backward's dK/dV launch at BLOCK_M 128, BLOCK_N 32, d 64 on 4 warps: four mma.sync dots, [1, 4]
    assert _dot_warps("attention_flash_bwd", "bwd_dkdv", BLOCK_M=128, BLOCK_N=32, head_dim=64, num_warps=4) == \
        [("v2", 1, 4)] * 4


def test_estimate_of_the_backward_dkdv_at_128x32():
    # 217 registers compiled (triton 3.9). The first estimate said 366 (a spill); this one says 163:
    # still 54 short (the transposed Q^T and dO^T operands, which Triton loads whole into registers,
    # are counted one 16-wide K slice at a time, as ptxas streams them elsewhere; docs/resources.md)
    ln = next(x for x in kernels.build("attention_flash_bwd", dict(BLOCK_M=128, BLOCK_N=32, head_dim=64,
                                                                   num_warps=4)).launches if x.name == "bwd_dkdv")
    assert 217 - 56 <= registers.estimate(ln.program, 90) <= 255


def _estimate(kernel, launch, **p):
    ln = next(x for x in kernels.build(kernel, p).launches if x.name == launch)
    return registers.estimate(ln.program, 90)


def test_decode_combine_counts_the_rows_it_stores_and_holds_its_loads():
    # decode's combine on 1 warp, d 128, 16 splits: a 16-row tile of packed query rows. With 16 rows
    # (kv_heads 8, q_len 4) ptxas holds the fp32 accumulator (64 per thread) and the loaded partial
    # output o_s whole (the combine loop is not pipelined): 159 compiled. With 8 rows (q_len 2) the
    # rows past the tensor's end are always masked (program ids are >= 0) and never stored: 92.
    p = dict(BLOCK_N=64, head_dim=128, kv_heads=8, num_splits=16, num_warps=1, causal=False)
    full = _estimate("attention_decode", "decode_combine", q_len=4, num_stages=3, **p)
    half = _estimate("attention_decode", "decode_combine", q_len=2, num_stages=2, **p)
    assert abs(full - 159) <= 8 and abs(half - 92) <= 8, (full, half)
    assert full - half >= 48        # half the accumulator and half the loaded tile


def test_index_masks_do_not_make_masked_off_elements_live():
    # layernorm's one-tile path over a row shorter than the tile: xc = where(arange < n, t - mean, 0)
    # is 0 past the row's end (t there is the load's constant other, the mask is an index value),
    # so it holds the row's 5120 elements (20 per thread on 8 warps), not the tile's 8192 (32).
    # ptxas: 52 registers (triton 3.9); the estimate counted the whole tile: 72.
    p = dict(BLOCK=8192, cols=5120, num_stages=3, num_warps=8)
    ln = next(x for x in kernels.build("layernorm", p).launches if x.name == "layernorm")
    g = layouts.Graph(ln.program)
    static = registers.static_elements(g)
    where = next(o for o in ir.walk(ln.program.body) if isinstance(o, registers.ir.Where))
    assert static.get(where.out.id) == 5120
    assert abs(registers.estimate(ln.program, 90) - 52) <= 8


def test_elementwise_chains_are_computed_element_by_element(monkeypatch):
    # softmax's streamed online-max loop (BLOCK 2048 on 2 warps, 3 stages) is elementwise from the
    # loaded chunk to the new (m, l): ptxas holds m, l, the new m and the chunk as loaded, not the
    # chunk's fp32 copy and each intermediate tile in turn. 126 registers compiled (triton 3.9).
    p = dict(BLOCK=2048, cols=5120, num_stages=3, num_warps=2)
    assert abs(_estimate("softmax", "softmax", **p) - 126) <= 8
    monkeypatch.setattr(registers, "ELEMENTWISE_TEMPS", False)
    assert _estimate("softmax", "softmax", **p) - 126 > 16      # every tile held whole: 148
    # a tile used again after a reduction of it is held: rmsnorm's one-tile t (t * t summed, then
    # t * rstd * w) stays an fp32 row; 254 compiled at BLOCK 16384 over 5120 columns on 1 warp
    monkeypatch.setattr(registers, "ELEMENTWISE_TEMPS", True)
    assert abs(_estimate("rmsnorm", "rmsnorm", BLOCK=16384, cols=5120, num_stages=2, num_warps=1) - 254) <= 8
