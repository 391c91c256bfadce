"""The new built-ins through the Triton lowering, in the Triton interpreter on CPU (TRITON_INTERPRET=1):
each matches the numpy executor and float64 (``GPUSIM_TRITON_TEST_DEVICE=cuda`` runs them compiled)."""
import os

import numpy as np
import pytest

DEVICE = os.environ.get("GPUSIM_TRITON_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"     # must be set before triton is imported

pytest.importorskip("triton", reason="the Triton backend needs the triton package")
pytest.importorskip("torch", reason="the Triton backend allocates tensors with torch")

from gpusim.backends import numpy_exec as ne  # noqa: E402
from gpusim.backends.triton import run as tb  # noqa: E402
from gpusim.toolchain import lower as _lower  # noqa: E402
from gpusim.kernels import build  # noqa: E402
from gpusim.kernels.backward import flash_bwd_inputs, flash_bwd_reference  # noqa: E402

if DEVICE == "cuda":
    import torch

    if not torch.cuda.is_available():
        pytest.skip("GPUSIM_TRITON_TEST_DEVICE=cuda but no CUDA device", allow_module_level=True)

TOL = {"fp16": 2e-3, "bf16": 1.6e-2, "fp32": 1e-5}


def _check(w, inputs, ref):
    out = tb.run_workload(w, inputs, device=DEVICE)
    mine = ne.execute(w, inputs)
    dtype = w.params["dtype"]
    for n in w.outputs:
        assert ne.max_rel_err(out[n], ref[n]) <= TOL[dtype], n
        # the interpreter agrees with the numpy executor to fp32 summation order (bf16: a few bf16 ulps)
        assert ne.max_rel_err(out[n], mine[n].astype(np.float64)) <= (2e-4 if dtype != "bf16" else 1e-2), n


@pytest.mark.parametrize("kernel", ["softmax", "layernorm", "rmsnorm"])
@pytest.mark.parametrize("cols,block,dtype", [(100, 0, "fp16"), (300, 64, "fp16"), (300, 64, "bf16")])
def test_row_kernels(kernel, cols, block, dtype):
    w = build(kernel, dict(rows=5, cols=cols, BLOCK=block, dtype=dtype))
    x = ne.random_inputs(w, 1)
    _check(w, x, ne.reference(w, x))


@pytest.mark.parametrize("p", [dict(batch=2, heads=4, kv_heads=2, q_len=1, kv_len=300, head_dim=64, num_splits=4),
                               dict(batch=1, heads=4, kv_heads=1, q_len=3, kv_len=200, head_dim=32, num_splits=3),
                               dict(batch=1, heads=2, kv_heads=0, q_len=16, kv_len=40, head_dim=40, num_splits=8)],
                         ids=["gqa-q1", "mqa-q3", "mha-q16-masked-split"])
def test_decode(p):
    w = build("attention_decode", dict(p, BLOCK_N=32))
    x = ne.random_inputs(w, 2)
    _check(w, x, ne.reference(w, x))


@pytest.mark.parametrize("p", [dict(seq_len=100, head_dim=32, BLOCK_M=32, BLOCK_N=16, causal=True),
                               dict(seq_len=77, head_dim=40, BLOCK_M=16, BLOCK_N=32, causal=False)],
                         ids=["causal", "ragged-d40"])
def test_flash_bwd(p):
    w = build("attention_flash_bwd", dict(p, batch=1, heads=2))
    x = flash_bwd_inputs(w, 3)
    _check(w, x, flash_bwd_reference({k: v.astype(np.float64) for k, v in x.items()}, w.params))


@pytest.mark.parametrize("p", [dict(kv_heads=2, window=0, causal=True), dict(kv_heads=1, window=24, causal=True),
                               dict(kv_heads=4, window=40, causal=False)], ids=["gqa", "mqa-local", "window-both-sides"])
def test_flash_gqa_window(p):
    w = build("attention_flash", dict(p, batch=1, heads=4, seq_len=100, head_dim=32, BLOCK_M=32, BLOCK_N=16))
    x = ne.random_inputs(w, 5)
    _check(w, x, ne.reference(w, x))


def test_largest_tiles_lower_and_compile():
    """The validation scenarios' largest tiles produce Triton source that Python compiles."""
    for kernel, p in [("attention_decode", dict(kv_len=131072, num_splits=64, heads=64, kv_heads=8, q_len=16,
                                                BLOCK_N=128)),
                      ("attention_flash_bwd", dict(seq_len=8192, head_dim=128, BLOCK_M=128, BLOCK_N=128, causal=True)),
                      ("attention_flash", dict(seq_len=16384, head_dim=128, heads=32, kv_heads=8, window=4096,
                                               causal=True, BLOCK_M=128, BLOCK_N=64)),
                      ("softmax", dict(rows=8192, cols=65536, num_warps=8)),
                      ("layernorm", dict(rows=8192, cols=65536, num_warps=8)),
                      ("rmsnorm", dict(rows=8192, cols=16384, num_warps=8)),
                      ("gemv_splitk", dict(M=16, N=128256, K=4096, BLOCK_N=128, BLOCK_K=128, SPLIT_K=1, num_stages=4)),
                      ("gemv_splitk", dict(M=1, N=4096, K=14336, BLOCK_N=32, BLOCK_K=256, SPLIT_K=4, num_stages=4))]:
        w = build(kernel, p)
        for launch in w.launches:
            compile(_lower.lower(launch.program, launch.grid), f"<{kernel}:{launch.name}>", "exec")


@pytest.mark.parametrize("p", [dict(M=1, N=100, K=300, BLOCK_N=32, BLOCK_K=64, SPLIT_K=3, dtype="fp16"),
                               dict(M=5, N=64, K=256, BLOCK_N=16, BLOCK_K=32, SPLIT_K=1, dtype="bf16"),
                               dict(M=20, N=70, K=130, BLOCK_N=32, BLOCK_K=32, SPLIT_K=4, dtype="fp16")],
                         ids=["split3", "one-launch-bf16", "two-row-blocks"])
def test_gemv_splitk(p):
    w = build("gemv_splitk", p)
    x = ne.random_inputs(w, 6)
    _check(w, x, ne.reference(w, x))
