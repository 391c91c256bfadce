"""A float multiply read only by an add (or sub) of its shape is one fused multiply-add, as ptxas
compiles it (one FFMA per element, measured in micro/val_fma_rate): the pair costs the multiply's
issue time, the add issues nothing, and the FLOPs still count both. A multiply with a second
reader, a broadcast one, or integer arithmetic stays two ops."""
import pytest

from gpusim import dsl, simulate
from gpusim.backends.sim import steps as st
from gpusim.dsl import analysis, ir
from gpusim.hardware import load_gpu

N = 1024


@pytest.fixture(scope="module")
def h200():
    return load_gpu("configs/h200.yaml")


def _prog(body, dtype="fp32", shape=(N,)):
    x = ir.TensorArg("x", shape, dtype)
    y = ir.TensorArg("y", shape, dtype)
    return dsl.trace(body, "p", [x, y], num_warps=4)


def _fma(x, y):
    store_shape = x.shape
    t = dsl.load(x, (0,) * len(store_shape), store_shape)
    dsl.store(y, (0,) * len(store_shape), t * 1.5 + 0.25)


def _mul_read_twice(x, y):
    t = dsl.load(x, (0,), (N,))
    m = t * 1.5
    dsl.store(y, (0,), (m + 0.25) * m)


def _sub_of_mul(x, y):
    t = dsl.load(x, (0,), (N,))
    dsl.store(y, (0,), 0.25 - t * t)


def _int_mul_add(x, y):
    i = dsl.arange(0, N)
    t = dsl.load(x, (0,), (N,))
    dsl.store(y, (0,), t + (i * 3 + 1))


def _broadcast_mul(x, y):
    t = dsl.load(x, (0, 0), (32, 32))
    r = dsl.load(x, (0, 0), (32, 32))
    s = dsl.tsum(r, 1) * 2.0                      # (32,): a per-row multiply, broadcast into the add
    dsl.store(y, (0, 0), t + dsl.expand_dims(s, 1))


def _adds(p):
    return [op for op in ir.walk(p.body) if isinstance(op, ir.Binary) and op.op in ("add", "sub")]


def test_a_multiply_feeding_only_an_add_is_contracted():
    p = _prog(_fma)
    (add,) = _adds(p)
    assert analysis.fma_contractions(p) == {add.out.id}
    (sub,) = _adds(_prog(_sub_of_mul))
    assert analysis.fma_contractions(_prog(_sub_of_mul)) == {sub.out.id}
    assert len(analysis.fma_contractions(_prog(_fma, "fp16"))) == 1        # HFMA2


@pytest.mark.parametrize("body,shape", [(_mul_read_twice, (N,)), (_int_mul_add, (N,)), (_broadcast_mul, (32, 32))])
def test_not_contracted(body, shape):
    assert analysis.fma_contractions(_prog(body, shape=shape)) == frozenset()


def test_the_pair_costs_the_multiply_and_counts_both_flops(h200):
    p = _prog(_fma)
    raw = st.lower(p.body, analysis.feeds_dot(p), [])
    fused = st.attach_costs(raw, h200, 4, fused=analysis.fma_contractions(p))
    apart = st.attach_costs(raw, h200, 4)
    (f,) = [s for s in fused if isinstance(s, st.SimtStep)]
    (a,) = [s for s in apart if isinstance(s, st.SimtStep)]
    mul = N / h200.simt_lane_ops_per_clk_per_sm["mul"]
    add = N / h200.simt_lane_ops_per_clk_per_sm["add"]
    assert f.vector_cycles == pytest.approx(mul)
    assert a.vector_cycles == pytest.approx(mul + add)
    assert f.flops == a.flops == 2 * N


def test_an_ffma_loop_runs_at_the_multiply_rate(h200):
    # micro/val_fma_rate: 16 values per thread, 4 warps, 4224 CTAs, 1024 iterations of x*a+b measured
    # 277.8 us on the H200 (122 FFMA lanes per clock per SM); two separate ops would predict ~2x that
    r = simulate("benchmarks/kernels/spill_live.py:spill_live", h200,
                 ctas=4224, per_thread=16, iters=1024, num_warps=4)
    assert 250 < r.time_us < 330
