"""gpusim.dsl.analysis: grids, trip counts, tile bounds, views and dot operands."""
import numpy as np
import pytest

from gpusim import dsl
from gpusim.dsl import analysis, ir

F16 = "fp16"


def test_pad_grid_and_program_ids():
    assert analysis.pad_grid((5,)) == (5, 1, 1)
    assert analysis.pad_grid((5, 3)) == (5, 3, 1)
    assert analysis.last_program_id((5, 3)) == (4, 2, 0)
    ids = list(analysis.program_ids((3, 2, 2)))
    assert len(ids) == 12 and ids[:4] == [(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 0)]
    # program_id(cta) is the cta-th id of program_ids (x fastest)
    assert [analysis.program_id(c, (3, 2, 2)) for c in range(12)] == ids


@pytest.mark.parametrize("start,end,step", [(0, 10, 3), (0, 9, 3), (5, 5, 1), (7, 3, 2), (-4, 4, 4), (0, 1, 64)])
def test_trip_count_is_len_of_range(start, end, step):
    assert analysis.trip_count(start, end, step) == len(range(start, end, step))


def test_loop_trips_evaluates_bounds_at_the_program_id():
    class L:                       # anything with start/end Exprs and a step
        start = ir.const(0)
        end = (dsl.program_id(0) + 1) * 64
        step = 32
    assert analysis.loop_trips(L, (0, 0, 0)) == 2
    assert analysis.loop_trips(L, (3, 0, 0)) == 8


def test_tile_bounds_clip_to_the_tensor():
    t = ir.TensorArg("x", (4, 100, 64), F16)
    assert analysis.tile_bounds(t, (1, 96, 0), (8, 64)) == [(1, 2), (96, 100), (0, 64)]
    assert analysis.tile_bounds(t, (1, -3, 0), (8, 64)) == [(1, 2), (0, 5), (0, 64)]
    assert analysis.tile_bounds(t, (4, 0, 0), (8, 64)) is None           # leading index out of range
    assert analysis.tile_bounds(t, (0, 100, 0), (8, 64)) is None         # rows entirely past the end


def test_tile_bytes_in_bounds_closed_form():
    t = ir.TensorArg("x", (4, 100, 64), F16)
    # rows 96..99 of batch 1: 4 rows of 64 fp16 = 128 B; first byte (1*100 + 96) * 64 * 2; pitch 128 B
    assert analysis.tile_bytes_in_bounds(t, (1, 96, 0), (8, 64)) == (4, 128, (100 + 96) * 128, 128)
    # a 1-d tile is one row: elements 10..63 of row (2, 5), 54 * 2 B
    assert analysis.tile_bytes_in_bounds(t, (2, 5, 10), (64,)) == (1, 108, ((2 * 100 + 5) * 64 + 10) * 2, 128)
    assert analysis.tile_bytes_in_bounds(t, (0, 0, 64), (64,)) is None


@pytest.mark.parametrize("offs", [(1, 96, 0), (0, -3, -10), (3, 50, 32), (2, 0, 0)])
def test_tile_slices_agree_with_a_masked_numpy_load(offs):
    t = ir.TensorArg("x", (4, 100, 64), F16)
    x = np.arange(4 * 100 * 64).reshape(t.shape)
    src, dst = analysis.tile_slices(t, offs, (8, 64))
    tile = np.full((8, 64), -1)
    tile[dst] = x[src]
    b, r0, c0 = offs
    for i in range(8):
        for j in range(64):
            r, c = r0 + i, c0 + j
            expect = x[b, r, c] if 0 <= r < 100 and 0 <= c < 64 else -1
            assert tile[i, j] == expect
    assert analysis.tile_slices(t, (9, 0, 0), (8, 64)) == (None, None)


def _prog(fn, params, **kw):
    return dsl.trace(fn, "p", params, **kw)


def test_views_resolve_to_the_loaded_value_and_feed_dot():
    a = ir.TensorArg("a", (64, 32), F16)
    b = ir.TensorArg("b", (64, 32), F16)
    c = ir.TensorArg("c", (64, 64), "fp32")
    e = ir.TensorArg("e", (64,), F16)
    ids = {}

    def body(a, b, c, e):
        ta = dsl.load(a, (0, 0), (64, 32))
        tb = dsl.load(b, (0, 0), (64, 32))
        te = dsl.load(e, (0,), (64,))          # used elementwise only: not a dot operand
        ids.update(a=ta.v.id, b=tb.v.id, e=te.v.id)
        out = dsl.dot(ta, dsl.trans(tb)) + dsl.expand_dims(te, 0)
        dsl.store(c, (0, 0), out)

    p = _prog(body, [a, b, c, e])
    shared = analysis.feeds_dot(p)
    assert ids["a"] in shared and ids["b"] in shared and ids["e"] not in shared
    alias = {}
    for op in ir.walk(p.body):
        analysis.view_root(alias, op)
    trans = next(op for op in p.body if isinstance(op, ir.Trans))
    assert alias == {trans.out.id: ids["b"], next(op for op in p.body if isinstance(op, ir.ExpandDims)).out.id: ids["e"]}


def test_work_bound_counts_loops_at_the_last_program():
    x = ir.TensorArg("x", (1024, 64), F16)
    y = ir.TensorArg("y", (1024, 64), F16)

    def body(x, y):
        m = dsl.program_id(0)

        def step(i, acc):
            return (acc + dsl.load(x, (i, 0), (64, 64)),)

        (acc,) = dsl.loop(0, (m + 1) * 64, 64, [dsl.zeros((64, 64))], step)
        dsl.store(y, (m * 64, 0), acc)

    p = _prog(body, [x, y])
    launch = ir.Launch("l", p, (16,), {"x": "x", "y": "y"})
    # 16 programs x (1 + trips at the last program, (15 + 1) * 64 / 64 = 16)
    assert analysis.work_bound(launch) == 16 * 17


def test_uses_pid():
    x, i = dsl.program_id(0), ir.Expr("loopvar", (0,))
    assert analysis.uses_pid(ir.emin(x * 64, 100))
    assert not analysis.uses_pid(i * 64 + 3)
    assert not analysis.uses_pid(ir.const(5))
