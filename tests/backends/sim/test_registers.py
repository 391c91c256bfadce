"""The analytic register estimate (the fallback when triton cannot compile) against the registers
ptxas gave the built-in kernels' tile spaces: our sm_90 table (triton 3.9, recorded here without a
GPU by benchmarks/record_resources.py) and the counts the H200 run recorded for its validation
points (triton 3.6). Needs no compiler. docs/resources.md has the full comparison."""
import json
from pathlib import Path

import pytest

from gpusim import kernels
from gpusim.backends.sim import registers

ROOT = Path(__file__).resolve().parents[3]
TABLE = ROOT / "tests" / "data" / "compiled_resources_sm90.json"
H200 = ROOT / "docs" / "validation" / "h200" / "micro" / "compiled_resources_h200.json"
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
    return out


def _stats(rows):
    errs = sorted(abs(est - reg) for _, reg, sp, est in rows if not sp)
    missed = [(r["params"], reg, est) for r, reg, sp, est in rows if sp and est <= MAX_REGS]
    false = [(r["params"], reg, est) for r, reg, sp, est in rows if not sp and est > MAX_REGS]
    within = sum(e <= 8 for e in errs) / len(errs)
    return errs, within, missed, false


@pytest.fixture(scope="module")
def ours():
    return _rows(TABLE)


def test_table_covers_the_tile_spaces(ours):
    kinds = {r["kernel"] for r, *_ in ours}
    assert kinds >= {"attention_flash", "matmul", "elementwise_fused", "attention_naive"}
    assert len(ours) >= 200
    assert sum(sp for _, _, sp, _ in ours) >= 20           # spilling configs are in it


# Thresholds: what the estimate reaches today (``python benchmarks/record_resources.py --compare``,
# docs/resources.md), so it cannot silently get worse. The goal was every config within 8 registers;
# it is NOT reached: 56% of the non-spilling sm_90 launches are within 8 (median error 6, max 130:
# flash 32x256 with 8 warps, where ptxas needs 126 and the layout model says 256). Of 76 spilling
# launches 69 are flagged; 3 of the 7 missed spill 4-16 bytes at 40-80 registers (not register
# pressure). The previous estimate: 32% within 8, median 17, 8 false spill alarms.
WITHIN8_SM90, MEDIAN_SM90, MAX_SM90, MISSED_SM90, FALSE_SM90 = 0.56, 6, 130, 7, 3
# The H200's triton 3.6 counts (a different compiler version, never fitted to): 68% within 8,
# median 6; all 25 spilling launches flagged, 2 false alarms (flash 128x128 d64, 234-243 registers).
WITHIN8_H200, MEDIAN_H200, MISSED_H200, FALSE_H200 = 0.67, 6, 0, 2


def test_estimate_vs_compiled_sm90(ours):
    errs, within, missed, false = _stats(ours)
    assert within >= WITHIN8_SM90, (within, errs[-10:])
    assert errs[len(errs) // 2] <= MEDIAN_SM90
    assert errs[-1] <= MAX_SM90
    assert len(missed) <= MISSED_SM90, missed
    assert len(false) <= FALSE_SM90, false


def test_estimate_vs_compiled_on_the_h200():
    errs, within, missed, false = _stats(_rows(H200))
    assert within >= WITHIN8_H200, (within, errs[-10:])
    assert errs[len(errs) // 2] <= MEDIAN_H200
    assert len(missed) <= MISSED_H200, missed
    assert len(false) <= FALSE_H200, false


def test_warps_per_tile_follows_triton():
    # matmul-like (not chained) wgmma: warpgroups along M first while M has rows for them
    assert registers.warps_per_tile(128, 128, 8, "v3", chained=False) == (8, 1)
    assert registers.warps_per_tile(64, 128, 8, "v3", chained=False) == (4, 2)
    # chained dots (flash) keep every warp along M when M has 16 rows per warp
    assert registers.warps_per_tile(128, 64, 8, "v3", chained=True) == (8, 1)
    # a 128x128 fp32 accumulator over 4 warps: 128 registers per thread
    assert registers.mma_tile_regs(128, 128, 4, 1) == 128
    # a tile smaller than the warps' coverage is replicated: 16 rows over 4 warps along M
    assert registers.mma_tile_regs(16, 64, 4, 1) == registers.mma_tile_regs(16, 64, 1, 1)
