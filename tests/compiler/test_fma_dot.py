"""Lowering and timing agree on how every dot runs: the unit the timing model charges (tensor cores
at the dtype's rate, or FFMA on the FP32 pipe) is the one the generated Triton source asks for
(``input_precision="ieee"`` means FFMA: no TF32), for every operand dtype pairing and operand
layout the lowering can emit; and (slow) the compiled SASS runs it there."""
import itertools
import re

import pytest

from gpusim.backends.sim import cost
from gpusim.toolchain.lower import lower
from gpusim.compiler.layouts import Graph, dot_layouts
from gpusim.dsl import dot, load, loop, program_id, store, trace, trans, zeros
from gpusim.dsl import ir
from gpusim.dsl.dtypes import dot_mode
from gpusim.hardware import load_gpu

CFG = load_gpu("h100")
DTYPES = ("fp16", "bf16", "fp32")
LAYOUTS = ("nn", "nt", "computed_a", "chained")
_DOT = re.compile(r"^\s*(v\d+) = tl\.dot\((.*)\)$")
_TL = {"tl.float16": "fp16", "tl.bfloat16": "bf16", "tl.float32": "fp32"}


def program(a_dt: str, b_dt: str, layout: str, m: int = 64, n: int = 64, k: int = 32, warps: int = 4):
    """A one-loop GEMM tile with A in ``a_dt`` and B in ``b_dt``: B loaded [K, N] (nn) or [N, K] and
    transposed (nt); A computed from the loaded tile (computed_a: scaled, cast back to its dtype);
    or a chain (chained: the first dot's result, cast to A's dtype, is the A operand of a second)."""
    a = ir.TensorArg("a", (m, k), a_dt)
    b = ir.TensorArg("b", (n, k) if layout == "nt" else (k, n), b_dt)
    b2 = ir.TensorArg("b2", (n, n), b_dt)
    c = ir.TensorArg("c", (m, n), "fp32")

    def body(a, b, b2, c):
        pm = program_id(0)

        def step(kk, acc):
            at = load(a, (pm * m, kk), (m, k))
            if layout == "computed_a":
                at = (at * 0.5).to(a_dt)
            bt = trans(load(b, (0, kk), (n, k))) if layout == "nt" else load(b, (kk, 0), (k, n))
            s = dot(at, bt)
            if layout == "chained":
                s = dot(s.to(a_dt), load(b2, (0, 0), (n, n)))
            return (acc + s,)

        (acc,) = loop(0, k, k, (zeros((m, n)),), step, stages=2)
        store(c, (pm * m, 0), acc)

    return trace(body, f"pair_{a_dt}_{b_dt}_{layout}", [a, b, b2, c], num_warps=warps)


def emitted_dots(src: str) -> list:
    """(input precision or None, operand dtypes the source converts to) of each tl.dot, in order."""
    out = []
    for line in src.splitlines():
        mt = _DOT.match(line)
        if mt:
            prec = re.search(r'input_precision="(\w+)"', mt.group(2))
            conv = [_TL[t] for t in re.findall(r"\.to\((tl\.\w+)\)", mt.group(2).split(", ")[0] + mt.group(2).split(", ")[1])]
            out.append((prec.group(1) if prec else None, conv))
    return out


PAIRS = list(itertools.product(DTYPES, DTYPES, LAYOUTS, (4, 8), (16, 64)))   # m 16: mma.sync; 64: wgmma


@pytest.mark.parametrize("a_dt,b_dt,layout,warps,m", PAIRS, ids=["-".join(map(str, p)) for p in PAIRS])
def test_every_dot_pairing_is_timed_on_the_unit_its_lowering_runs(a_dt, b_dt, layout, warps, m):
    prog = program(a_dt, b_dt, layout, m=m, warps=warps)
    dots = [op for op in ir.walk(prog.body) if isinstance(op, ir.Dot)]
    emitted = emitted_dots(lower(prog, (1,)))
    assert len(emitted) == len(dots)
    kinds = dot_layouts(Graph(prog), 90)
    for op, (prec, conv) in zip(dots, emitted):
        c = cost.op_cost(op, CFG, warps)
        mm, kk = op.a.shape
        flops = 2.0 * mm * kk * op.b.shape[1]
        if prec == "ieee":       # FFMA on the FP32 pipe: no tensor time, its FLOPs are vector FLOPs
            assert c.tensor_cycles == 0 and c.tensor_flops == 0 and c.simt_cycles > 0
            assert cost.vector_flops(op) == flops
            assert kinds[id(op)][0] == "fma"
            assert dot_mode(op.a.dtype, op.b.dtype) == ("fp32", "fma", "ieee")
        else:                    # tensor cores at the rate of the dtype the operands are in
            assert prec is None
            dt = {op.a.dtype, op.b.dtype}
            assert len(dt) == 1 and not conv, "a tensor-core dot converts no operand"
            dt = dt.pop()
            rate = CFG.tensor_flops_per_clk_per_sm(dt) * CFG.tile_efficiency(mm, op.b.shape[1], kk, warps)
            assert c.tensor_cycles == pytest.approx(flops / rate) and c.simt_cycles == 0
            assert kinds[id(op)][0] in ("v2", "v3")


def test_fp32_gemm_is_timed_at_the_fp32_rate_not_tf32():
    """An fp32 GEMM runs at most at the FP32 pipe's measured rate (63.7 TFLOP/s on the h100
    config), not at the TF32 tensor rate (482 TFLOP/s) it was charged before."""
    import gpusim

    r = gpusim.simulate("matmul", "h100", check=False, M=2048, N=2048, K=2048, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32,
                        dtype="fp32")
    tflops = 2 * 2048 ** 3 / (r.time_us * 1e-6) / 1e12
    assert 30 < tflops < CFG.fp32_flops_per_s / 1e12
    assert r.tensor_flops == 0


@pytest.mark.slow
@pytest.mark.parametrize("a_dt,b_dt,layout", [("fp16", "fp16", "nn"), ("bf16", "bf16", "nt"), ("fp32", "fp32", "nn"),
                                              ("fp16", "bf16", "nn"), ("fp16", "fp16", "chained")])
def test_compiled_sass_runs_each_dot_where_it_is_timed(a_dt, b_dt, layout):
    """sm_90 SASS of the lowered kernel: tensor instructions exactly when the timing model charges
    the tensor cores; otherwise at least one FFMA per multiply-add per thread."""
    from gpusim.toolchain import compile as tc

    if not tc.available():
        pytest.skip("triton is not installed")
    prog = program(a_dt, b_dt, layout)
    r = tc.compile_program(prog, (1,), 90)
    dots = [op for op in ir.walk(prog.body) if isinstance(op, ir.Dot)]
    tensor = [cost.op_cost(op, CFG, 4).tensor_cycles > 0 for op in dots]
    mma = r.sass_count("HGMMA") + r.sass_count("HMMA")
    if all(tensor):
        assert mma > 0
    else:
        assert not any(tensor) and mma == 0
        fma = sum(op.a.shape[0] * op.a.shape[1] * op.b.shape[1] for op in dots) / 128
        assert r.sass_count("FFMA") >= fma


@pytest.mark.slow
def test_fma_dot_issue_and_registers_against_the_compiled_loop():
    """The estimate's instructions per FFMA and registers of an fp32 GEMM tile, against ptxas."""
    import gpusim
    from gpusim.toolchain import compile as tc
    from gpusim.compiler import registers
    from gpusim.compiler.sass_mix import fma_dot_issue

    if not tc.available():
        pytest.skip("triton is not installed")
    k = gpusim.KERNELS["matmul"]
    for bm, bn, bk, w in ((64, 64, 32, 4), (128, 64, 32, 4)):
        wl = k.build(k.resolve(dict(M=1024, N=1024, K=1024, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=w,
                                    num_stages=2, dtype="fp32")))
        prog = wl.launches[0].program
        r = tc.compile_program(prog, wl.launches[0].grid, 90)
        body = r.loop_bodies[0]
        ffma = sum(1 for i in body if i.startswith("FFMA"))
        assert ffma == bm * bn * bk // (32 * w)
        assert len(body) / ffma == pytest.approx(fma_dot_issue(bm * bn / (32 * w)), rel=0.05)
        assert abs(registers.estimate(prog, 90) - r.registers_per_thread) <= 10
