"""matmul and attention_flash in fp8: exact on numpy against float64 references of the quantized
values, the same on Triton (the interpreter on CPU, or a GPU with GPUSIM_TRITON_TEST_DEVICE=cuda),
timed at the config's FP8 tensor rate, and refused on a GPU without FP8 tensor cores.

Tolerances. Products of two fp8 values are exact in fp32 (at most 4 x 4 significant bits), so the
matmul's only roundings are the fp32 sums (relative ~K 2^-24) and the fp16 store of C (2^-11):
C is the float64 product rounded to fp16, to 1 fp16 ulp. Flash rounds P to fp8e4m3 for P V as
FP8 attention kernels do; with one key block P = exp(s - rowmax) exactly as a float64 reference
computes it, so against that reference (P rounded to e4m3 in float64) only the fp32 softmax and the
fp16 store remain (1e-3). Against the plain softmax reference, each P element carries e4m3's
rounding, relative at most 2^-4 (3 mantissa bits, the unit roundoff u): the output error is a
weighted mean of those, bounded by u; about 0.3 u to 0.4 u here (random signs)."""
import os

import numpy as np
import pytest

DEVICE = os.environ.get("GPUSIM_TRITON_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"     # must be set before triton is imported

from gpusim import precheck  # noqa: E402
from gpusim.backends import numpy_exec as ne  # noqa: E402
from gpusim.backends.sim.cost import dot_cost  # noqa: E402
from gpusim.dsl import ir  # noqa: E402
from gpusim.hardware import load_gpu  # noqa: E402
from gpusim.kernels import KERNELS  # noqa: E402
from gpusim.physics import check_status, check_tolerance  # noqa: E402

U_E4M3 = 2.0 ** -4
SMALL_MM = dict(M=64, N=64, K=256, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
SMALL_FLASH = dict(batch=1, heads=2, seq_len=128, head_dim=64, BLOCK_M=64, BLOCK_N=64)


@pytest.mark.parametrize("dt", ["fp8e4m3", "fp8e5m2"])
def test_matmul_is_the_float64_product_rounded_to_fp16(dt):
    wl = KERNELS["matmul"].build(dtype=dt, **SMALL_MM)
    assert wl.tensors["b"].shape == (64, 256) and wl.tensors["c"].dtype == "fp16"    # B as [N, K]
    x = ne.random_inputs(wl, 0)
    assert np.all(ne.to_dtype(x["a"], dt) == x["a"])            # the inputs are on the fp8 grid
    out = ne.execute(wl, x)["c"].astype(np.float64)
    ref = x["a"].astype(np.float64) @ x["b"].astype(np.float64).T
    ulp = np.spacing(np.abs(ref).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(out - ref) <= ulp)                     # within 1 fp16 ulp of the exact product
    assert np.mean(out == ref.astype(np.float16)) > 0.99       # and almost always the rounded product
    assert ne.check(wl) < 1e-3


def _flash_ref_quantized_p(x, p):
    """One key block: softmax with P = exp(s - rowmax) rounded to e4m3 for P V, in float64."""
    q, k, v = (x[n].astype(np.float64) for n in ("q", "k", "v"))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    pv = ne.round_fp8(e, "fp8e4m3").astype(np.float64) @ np.swapaxes(v, -1, -2)     # v is [bh, d, n]
    return pv / e.sum(axis=-1, keepdims=True)


def test_flash_one_key_block_matches_reference_with_p_in_fp8():
    wl = KERNELS["attention_flash"].build(dtype="fp8e4m3", **{**SMALL_FLASH, "seq_len": 64})
    assert wl.tensors["v"].shape == (2, 64, 64) and wl.tensors["o"].dtype == "fp16"
    x = ne.random_inputs(wl, 0)
    out = ne.execute(wl, x)["o"]
    assert ne.max_rel_err(out, _flash_ref_quantized_p(x, wl.params)) < 1e-3
    assert ne.max_rel_err(out, ne.reference(wl, x)["o"]) > 3e-3      # the P rounding is visible...


@pytest.mark.parametrize("extra", [{}, {"causal": True}, {"kv_heads": 1, "window": 40}])
def test_flash_within_e4m3_roundoff_of_softmax_reference(extra):
    wl = KERNELS["attention_flash"].build(dtype="fp8e4m3", **SMALL_FLASH, **extra)
    err = ne.check(wl)
    assert 0.1 * U_E4M3 < err < 0.5 * U_E4M3                    # ...and bounded by e4m3's unit roundoff
    assert check_status(wl.params, err)[0] == "ok" and check_tolerance(wl.params) == U_E4M3


@pytest.mark.parametrize("name,params", [("matmul", dict(dtype="fp8e4m3", **SMALL_MM)),
                                         ("matmul", dict(dtype="fp8e5m2", **SMALL_MM)),
                                         ("attention_flash", dict(dtype="fp8e4m3", causal=True, **SMALL_FLASH))])
def test_triton_matches_numpy(name, params):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from gpusim.backends.triton.run import run_workload

    wl = KERNELS[name].build(**params)
    x = ne.random_inputs(wl, 0)
    out = run_workload(wl, x, device=DEVICE)
    want = ne.execute(wl, x)
    for n in wl.outputs:
        if DEVICE == "cpu":
            np.testing.assert_array_equal(out[n], want[n])
        else:       # a GPU sums in another order (and FP8 wgmma with a narrower accumulator)
            assert ne.max_rel_err(out[n], want[n]) < 2e-3


def test_fp8_dot_runs_at_the_fp8_rate():
    """An fp8 tile costs the FLOPs / (the config's fp8 rate x the efficiency of the 16-bit tile of
    the same bytes, k / 2): half the cycles of that fp16 tile on h100 (1929 vs 964 TFLOP/s)."""
    cfg = load_gpu("h100")
    assert cfg.tensor_flops_per_s["fp8e4m3"] == cfg.tensor_flops_per_s["fp8e5m2"]
    assert cfg.tensor_flops_per_s["fp8e4m3"] / cfg.tensor_flops_per_s["fp16"] == pytest.approx(1979 / 989)

    def dot(dt, k):
        return ir.Dot(ir.Value(3, (128, 128), "fp32"), ir.Value(1, (128, k), dt), ir.Value(2, (k, 128), dt), None)

    fp8, fp16 = dot_cost(dot("fp8e4m3", 64), cfg, 4), dot_cost(dot("fp16", 32), cfg, 4)
    assert fp8.tensor_flops == 2 * fp16.tensor_flops
    assert fp8.tensor_cycles == pytest.approx(fp16.tensor_cycles * 2 * 989 / 1979)


def test_a100_refuses_fp8_in_one_line():
    wl = KERNELS["matmul"].build(dtype="fp8e4m3", **SMALL_MM)
    why = precheck.infeasible_reason(wl, load_gpu("a100"))
    assert why == ("fp8e4m3 on a100: this GPU has no FP8 tensor cores (its tensor_flops_per_s lists fp16, bf16, "
                   "fp32); FP8 needs a Hopper GPU such as h100 or h200")
    assert precheck.infeasible_reason(wl, load_gpu("h100")) is None
    assert precheck.infeasible_reason(KERNELS["matmul"].build(**SMALL_MM), load_gpu("a100")) is None


def test_a100_simulate_reports_infeasible():
    from gpusim.api import simulate

    r = simulate("matmul", "a100", dtype="fp8e4m3", check=False, calibration="off", **SMALL_MM)
    assert r.status == "infeasible" and r.reason.startswith("fp8e4m3 on a100:")


@pytest.mark.slow
def test_fp8_gemm_faster_than_fp16_on_h100():
    from gpusim.api import simulate

    t = {dt: simulate("matmul", "h100", dtype=dt, M=4096, N=4096, K=4096, check=False, calibration="off").time_us
         for dt in ("fp16", "fp8e4m3")}
    assert t["fp8e4m3"] < t["fp16"] / 1.4
