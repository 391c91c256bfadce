"""The Triton backend against the numpy executor (the specification).

By default every kernel runs in the Triton interpreter on CPU (TRITON_INTERPRET=1), where
the generated code reproduces numpy_exec bit for bit for fp16 and fp32. On a CUDA machine,
``GPUSIM_TRITON_TEST_DEVICE=cuda python -m pytest tests/test_triton_backend.py`` runs the same
checks compiled, plus the timing smoke test.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

DEVICE = os.environ.get("GPUSIM_TRITON_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"     # must be set before triton is imported

pytest.importorskip("triton", reason="the Triton backend needs the triton package")
pytest.importorskip("torch", reason="the Triton backend allocates tensors with torch")

from gpusim import kernels  # noqa: E402
from gpusim.backends import numpy_exec  # noqa: E402
from gpusim.backends.triton import run as tb  # noqa: E402
from gpusim.toolchain import lower as _lower  # noqa: E402
from gpusim.dsl import builder as dsl  # noqa: E402
from gpusim.dsl import ir  # noqa: E402

if DEVICE == "cuda":
    import torch

    if not torch.cuda.is_available():
        pytest.skip("GPUSIM_TRITON_TEST_DEVICE=cuda but no CUDA device", allow_module_level=True)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# max_rel_err allowed per storage dtype; bf16 allows two bf16 ulps (the interpreter truncates
# fp32 -> bf16 where numpy rounds to nearest even).
TOL = {"fp32": 1e-4, "fp16": 2e-3, "bf16": 1.6e-2}


def _compare(workload, names=None, tol=None, seed=0):
    inputs = numpy_exec.random_inputs(workload, seed)
    ref = numpy_exec.execute(workload, inputs)
    out = tb.run_workload(workload, inputs, device=DEVICE)
    dtype = workload.params.get("dtype", "fp16")
    for name in names or [n for n in workload.tensors if n not in workload.inputs]:
        assert out[name].shape == ref[name].shape
        assert out[name].dtype == ref[name].dtype, name
        err = numpy_exec.max_rel_err(out[name], ref[name].astype(np.float64))
        assert err <= (tol or TOL[dtype]), f"{workload.name}.{name} ({dtype}): max_rel_err {err:.3g}"
    return out, ref


ATTN = dict(batch=1, heads=2, seq_len=100, head_dim=32)


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_attention_naive_with_intermediates(dtype):
    wl = kernels.build("attention_naive", dict(ATTN, dtype=dtype))
    _compare(wl, ["s", "s2", "p", "o"])


@pytest.mark.parametrize("causal,dtype,block_n", [(True, "fp16", 32), (False, "fp16", 16), (True, "bf16", 32),
                                                  (False, "fp32", 32)])
def test_attention_flash(causal, dtype, block_n):
    wl = kernels.build("attention_flash", dict(ATTN, causal=causal, dtype=dtype, BLOCK_M=32, BLOCK_N=block_n))
    out, _ = _compare(wl)
    ref64 = numpy_exec.reference(wl, numpy_exec.random_inputs(wl))["o"]
    assert numpy_exec.max_rel_err(out["o"], ref64) < {"fp16": 5e-3, "bf16": 3e-2, "fp32": 1e-5}[dtype]


def test_attention_flash_head_dim_padded():
    """head_dim 40 is loaded as a 64-wide tile: the padding columns are masked."""
    wl = kernels.build("attention_flash", dict(ATTN, head_dim=40, causal=True, BLOCK_M=16, BLOCK_N=16))
    _compare(wl)


@pytest.mark.parametrize("kernel,dtype", [("elementwise_chain", "fp16"), ("elementwise_fused", "fp16"),
                                          ("elementwise_fused", "bf16"), ("elementwise_chain", "fp32")])
def test_elementwise(kernel, dtype):
    _compare(kernels.build(kernel, dict(n=1000, BLOCK=128, dtype=dtype)))


@pytest.mark.parametrize("mnk,dtype", [((100, 70, 90), "fp16"), ((100, 70, 90), "fp32"), ((64, 64, 64), "bf16"),
                                       ((64, 96, 128), "fp16")])
def test_matmul(mnk, dtype):
    m, n, k = mnk
    _compare(kernels.build("matmul", dict(M=m, N=n, K=k, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, dtype=dtype)))


# --------------------------------------------------------------------------- every op, every dtype rule
def _all_ops_body(x, w, y, z, *, BR, BC):
    """Exercises each IR op and Binary/Unary kind that the built-ins do not."""
    r = dsl.program_id(0)
    n_rows, n_cols = x.shape
    t = dsl.load(x, (r * BR, 0), (BR, BC), other=1.0)
    a = dsl._unary("abs", t)
    b = dsl._unary("log2", a + 0.5)
    c = dsl.log(a + 1.0)
    d = dsl.sqrt(a)
    e = dsl._unary("rsqrt", a + 1.0)
    f = dsl.exp(-t)
    g = dsl.minimum(b, c) - d / e
    cols = dsl.arange(0, BC, (BR, BC), axis=1)
    rows = dsl.arange(r * BR, BR)
    m = (cols < n_cols) & ((rows[:, None] < n_rows) | (cols > 100))
    m2 = dsl._binary("eq", cols, 1) | (dsl._binary("ne", cols, 2) & (cols <= 5)) | (rows[:, None] >= 30)
    h = dsl.where(m, g, 0.0)
    k = dsl.where(m2, 1.0, 2.0) + m.to("fp32") + ((cols * 2 + 1) / 2).to("fp32")
    lo = dsl._reduce("min", h, 1)
    col_sum = dsl.tsum(h, 0)
    prev = dsl.load(w, (r - 1, r * BR, 0), (BR, BC), other=-2.0)      # leading dim out of range for r == 0

    def body(i, acc):
        part = dsl.load(x, (r * BR, i), (BR, 8)).to("fp32")
        return (dsl.maximum(acc, dsl.tmax(part, 1)),)

    (run_max,) = dsl.loop(0, ir.emin(n_cols, ir.emax(r * 8, 16)), 8, (dsl.full((BR,), -1e30),), body, stages=1)
    out = h + col_sum[None, :] + lo[:, None] * f + k + prev.to("fp32") + run_max[:, None]
    dsl.store(y, (r * BR, 0), out)
    tt = t.to("fp16") if t.dtype == "fp32" else t
    dsl.store(z, (r * BR, 0), dsl.dot(tt, dsl.trans(tt)))


def _all_ops_workload(dtype):
    t = {"x": ir.TensorArg("x", (40, 20), dtype), "w": ir.TensorArg("w", (3, 40, 20), dtype),
         "y": ir.TensorArg("y", (40, 20), "fp32"), "z": ir.TensorArg("z", (40, 16), dtype)}
    prog = dsl.trace(_all_ops_body, "all_ops", [t["x"], t["w"], t["y"], t["z"]], BR=16, BC=32)
    launch = ir.Launch("all_ops", prog, (3,), {n: n for n in t})
    return ir.Workload("all_ops", t, ("x", "w"), ("y", "z"), (launch,), {"dtype": dtype})


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_every_op_matches_numpy(dtype):
    wl = _all_ops_workload(dtype)
    kinds = {type(op) for op in ir.walk(wl.launches[0].program.body)}
    assert kinds == set(ir.OPS)
    _compare(wl, tol={"fp32": 1e-4, "fp16": 2e-3, "bf16": 2e-2}[dtype])


# --------------------------------------------------------------------------- source properties
def test_lower_flash_source_is_deterministic():
    wl = kernels.build("attention_flash", dict(ATTN, causal=True, BLOCK_M=32, BLOCK_N=32))
    prog, grid = wl.launches[0].program, wl.launches[0].grid
    src = _lower.lower(prog, grid)
    assert "@triton.jit" in src and "tl.dot(" in src and "tl.range(" in src and "num_stages=" in src
    assert "attention_flash" in src.splitlines()[0] and "BLOCK_M=32" in src
    assert src == _lower.lower(prog, grid)
    rebuilt = kernels.build("attention_flash", dict(ATTN, causal=True, BLOCK_M=32, BLOCK_N=32)).launches[0]
    assert _lower.lower(rebuilt.program, rebuilt.grid) == src
    compile(src, "<generated>", "exec")


def test_masks_only_where_needed():
    even = kernels.build("matmul", dict(M=64, N=64, K=64, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)).launches[0]
    assert "mask=" not in _lower.lower(even.program, even.grid)
    assert "mask=" in _lower.lower(even.program)            # without a grid, program ids are unbounded
    ragged = kernels.build("matmul", dict(M=100, N=64, K=64, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)).launches[0]
    src = _lower.lower(ragged.program, ragged.grid)
    assert "< 100)" in src and "< 64)" not in src


def test_fp32_dot_uses_ieee():
    wl = kernels.build("matmul", dict(M=64, N=64, K=64, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, dtype="fp32"))
    assert 'input_precision="ieee"' in _lower.lower(wl.launches[0].program)


def test_non_power_of_two_tile_is_rejected():
    x, y = ir.TensorArg("x", (300,), "fp16"), ir.TensorArg("y", (300,), "fp16")
    prog = dsl.trace(kernels.elementwise_body, "odd", [x, y], BLOCK=100, ops=(("mul", 2.0),))
    with pytest.raises(_lower.LoweringError, match="power-of-two"):
        _lower.lower(prog)


def test_workload_source_lists_every_launch():
    from gpusim.kernels import build

    src = _lower.workload_source(build("attention_naive", dict(ATTN)))
    for name in ("qk", "scale", "softmax", "pv"):
        assert f"# ===== launch {name}: grid=" in src
    assert src.count("@triton.jit") == 4


def test_import_is_lazy():
    code = ("import sys, gpusim, gpusim.kernels, gpusim.backends.triton.run; "
            "bad = [m for m in ('triton', 'torch') if m in sys.modules]; "
            "print(','.join(bad)); sys.exit(1 if bad else 0)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert res.returncode == 0, f"imported at module import time: {res.stdout} {res.stderr}"


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="timing needs CUDA (GPUSIM_TRITON_TEST_DEVICE=cuda)")
def test_time_workload_cuda():
    wl = kernels.build("attention_naive", dict(ATTN))
    res = tb.time_workload(wl, numpy_exec.random_inputs(wl), reps_ms=20, warmup_ms=5)
    assert set(res["per_launch_us"]) == {"qk", "scale", "softmax", "pv"}
    assert res["total_us"] > 0 and all(v > 0 for v in res["per_launch_us"].values())
