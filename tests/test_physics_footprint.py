"""The first touches of a sampled launch's skipped CTAs (backends/sim/footprint.py): counted from
the tiles each CTA loads, checked against a brute-force walk over every CTA and iteration."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpusim.backends.sim import footprint
from gpusim.backends.sim.steps import compile_program
from gpusim.dsl import analysis, ir
from gpusim.hardware import load_gpu
from gpusim.kernels import KERNELS

SECTOR = 32


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 3), st.integers(0, 300), st.integers(1, 200)),
                min_size=1, max_size=6), st.sampled_from([64, 256, 96, 100]))
def test_covered_counts_the_sectors_of_the_union(rects, pitch):
    """Rectangles of rows ``pitch`` bytes apart: the sectors they cover, against a set of sectors."""
    rows = [(r, r + n, min(c, pitch - 1), min(c + w, pitch)) for r, n, c, w in rects]
    want = {(r * pitch + b) // SECTOR for r0, r1, c0, c1 in rows for r in range(r0, r1) for b in range(c0, c1)}
    assert footprint.covered(np.array(rows, dtype=np.int64), pitch) == len(want)


def _brute(wl, launch, cfg, ctas):
    """{tensor: set of sectors} the CTAs ``ctas`` load, walking every loop iteration."""
    steps, _ = compile_program(launch.program, cfg)
    tensors = {p.name: p for p in launch.program.params}
    grid = analysis.pad_grid(launch.grid)
    out = {}
    for c in ctas:
        pid = analysis.program_id(int(c), grid)
        for s in steps:
            loads = [(getattr(s, "load", None), {})] if hasattr(s, "load") and not isinstance(s.load, int) else []
            if hasattr(s, "loads"):
                start = ir.eval_expr(s.start, pid, {})
                loads = [(d, {s.var: start + i * s.step}) for i in range(analysis.loop_trips(s, pid)) for d in s.loads]
            for d, lv in loads:
                t = tensors[d.tensor]
                r = analysis.tile_bytes_in_bounds(t, [ir.eval_expr(e, pid, lv) for e in d.offsets], d.shape)
                if r:
                    rows, rb, first, pitch = r
                    out.setdefault(d.tensor, set()).update(
                        b // SECTOR for k in range(rows) for b in range(first + k * pitch, first + k * pitch + rb))
    return out, steps, tensors, grid


def test_skipped_ctas_first_touches_match_a_brute_force_walk():
    """GQA causal flash: 2 K/V heads, each shared by 4 query heads. The simulated CTAs are the
    first query head's and the last's; the skipped ones hold the second K/V head's first touches
    (a window of CTAs of the first K/V head extrapolated them as none)."""
    cfg = load_gpu("h100")
    wl = KERNELS["attention_flash"].build(batch=1, heads=8, kv_heads=2, seq_len=256, head_dim=64, causal=True,
                                          BLOCK_M=32, BLOCK_N=32)
    launch = wl.launches[0]
    n = launch.num_programs                      # 8 query blocks x 8 heads
    sim = np.r_[0:8, n - 8:n].astype(np.int64)
    mid = np.arange(8, n - 8, dtype=np.int64)
    seen, steps, tensors, grid = _brute(wl, launch, cfg, sim)
    mine, _, _, _ = _brute(wl, launch, cfg, mid)
    want = sum(len(mine[p] - seen.get(p, set())) for p in mine) * SECTOR
    reads, writes = footprint.skipped_traffic(steps, grid, tensors, sim, mid, {})
    assert reads == want
    assert want >= 2 * 256 * 64 * 2 * 0.5          # at least the half of the second K/V head's K and V not seen
    assert writes == len(mid) * 32 * 64 * 2         # each skipped CTA stores its 32 x 64 output tile once


def test_data_the_l2_held_at_the_start_is_not_a_first_touch():
    cfg = load_gpu("h100")
    wl = KERNELS["attention_flash"].build(batch=1, heads=4, seq_len=256, head_dim=64, BLOCK_M=64, BLOCK_N=64)
    launch = wl.launches[0]
    steps, _ = compile_program(launch.program, cfg)
    tensors = {p.name: p for p in launch.program.params}
    grid = analysis.pad_grid(launch.grid)
    sim, mid = np.arange(0, 4), np.arange(4, 16)
    cold, _ = footprint.skipped_traffic(steps, grid, tensors, sim, mid, {})
    held, _ = footprint.skipped_traffic(steps, grid, tensors, sim, mid, {"k": 1 << 30})
    assert cold == 3 * 3 * 256 * 64 * 2 and held == cold - 3 * 256 * 64 * 2      # heads 1-3: q, k, v; k held
