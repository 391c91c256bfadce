"""The sampled output check of large problems: attention rows (honouring GQA and the sliding window),
attention_flash_bwd rows of dQ and dK/dV, attention_decode (batch, KV head) pairs; each the same
float64 numbers as the full reference."""
import os

import numpy as np
import pytest

DEVICE = os.environ.get("GPUSIM_TRITON_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"     # must be set before triton is imported

from gpusim.backends import numpy_exec  # noqa: E402
from gpusim.hw.validate.measure import check_outputs, sampled_reference, tolerance  # noqa: E402
from gpusim.kernels import build  # noqa: E402


def test_sampled_check_matches_gqa_window_flash():
    wl = build("attention_flash", dict(batch=1, heads=4, kv_heads=2, seq_len=256, head_dim=32, causal=True,
                                       window=64, BLOCK_M=64, BLOCK_N=32))
    inputs = numpy_exec.random_inputs(wl, 1)
    out = numpy_exec.execute(wl, inputs)
    refs, how = sampled_reference(wl, inputs, force_sample=True)
    assert how == "sampled"
    for name, (idx, ref) in refs.items():
        assert numpy_exec.max_rel_err(np.asarray(out[name])[idx], ref) < 2e-3


def test_other_kernels_use_their_own_reference():
    wl = build("attention_decode", dict(batch=1, heads=4, kv_heads=2, kv_len=256, head_dim=32, num_splits=2))
    refs, how = sampled_reference(wl, numpy_exec.random_inputs(wl, 1))      # small: the full reference
    assert how == "full"


def _matches_full(wl, inputs, rows=16):
    full = numpy_exec.reference(wl, inputs)
    refs, how = sampled_reference(wl, inputs, rows=rows, force_sample=True)
    assert how == "sampled" and set(refs) == set(wl.outputs)
    for name, (idx, ref) in refs.items():
        np.testing.assert_allclose(full[name][idx], ref, rtol=1e-9, atol=1e-12)
    return refs


@pytest.mark.parametrize("causal", [False, True])
def test_sampled_flash_bwd_rows_match_the_full_reference(causal):
    """Rows of dQ from rows of P, rows of dK/dV from columns of P: the same float64 numbers as the
    full reference, on the kernel's generated inputs (O and L of the forward)."""
    wl = build("attention_flash_bwd", dict(batch=2, heads=3, seq_len=96, head_dim=32, BLOCK_M=32, BLOCK_N=16,
                                           causal=causal))
    inputs = numpy_exec.random_inputs(wl, 1)
    refs = _matches_full(wl, inputs)
    heads = refs["dq"][0][0].ravel().tolist()
    assert heads[0] == 0 and heads[-1] == 5 and len(heads) == 4
    out = numpy_exec.execute(wl, inputs)
    err, how = check_outputs(wl, out, inputs)
    assert how == "full" and err < 2e-3


def test_sampled_decode_pairs_match_the_full_reference():
    wl = build("attention_decode", dict(batch=2, heads=8, kv_heads=2, q_len=4, kv_len=300, head_dim=32, num_splits=3))
    inputs = numpy_exec.random_inputs(wl, 1)
    refs = _matches_full(wl, inputs)
    assert refs["o"][0][0].ravel().tolist() == [0, 1, 2, 3]
    out = numpy_exec.execute(wl, inputs)
    refs, _ = sampled_reference(wl, inputs, force_sample=True)
    idx, ref = refs["o"]
    assert numpy_exec.max_rel_err(out["o"][idx], ref) < 2e-3


@pytest.mark.parametrize("kv_heads", [2, 1])
def test_gqa_window_check_in_triton_interpreter(kv_heads):
    """The harness check (full and row-sampled) of attention_flash with 8 query heads over 2 or 1
    KV heads (groups of 4, as 32 over 8, and all heads on one) and a sliding window passes on the
    Triton interpreter's output, and catches an error."""
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    from gpusim.backends.triton import run as tb

    wl = build("attention_flash", dict(batch=1, heads=8, kv_heads=kv_heads, seq_len=128, head_dim=32, causal=True,
                                       window=48, BLOCK_M=32, BLOCK_N=16))
    inputs = numpy_exec.random_inputs(wl, 1)
    out = tb.run_workload(wl, inputs, device=DEVICE)
    err, how = check_outputs(wl, out, inputs)
    assert how == "full" and err <= tolerance(wl.params)
    refs, how = sampled_reference(wl, inputs, rows=32, force_sample=True)
    for name, (idx, ref) in refs.items():
        assert numpy_exec.max_rel_err(np.asarray(out[name])[idx], ref) <= tolerance(wl.params)
    bad = np.array(out["o"], copy=True)
    bad[-1, 100] = bad[-2, 100]            # the last head's row 100 from its neighbour
    assert check_outputs(wl, {"o": bad}, inputs)[0] > tolerance(wl.params)


def test_point_inputs_reused_only_for_identical_plain_inputs():
    from gpusim.hw.validate import measure

    measure._INPUT_CACHE.clear()
    a = build("attention_decode", dict(batch=1, heads=4, kv_heads=2, kv_len=256, head_dim=32, num_splits=2))
    b = build("attention_decode", dict(batch=1, heads=4, kv_heads=2, kv_len=256, head_dim=32, num_splits=4))
    c = build("attention_decode", dict(batch=1, heads=4, kv_heads=1, kv_len=256, head_dim=32, num_splits=4))
    x = measure.point_inputs(a, 1)
    assert measure.point_inputs(b, 1) is x and measure.point_inputs(a, 2) is not x
    y = measure.point_inputs(c, 1)
    assert y is not x and y["k"].shape != x["k"].shape
    for n in a.inputs:
        assert np.array_equal(x[n], numpy_exec.random_inputs(a, 1)[n])
    f = build("attention_flash_bwd", dict(batch=1, heads=1, seq_len=32, head_dim=16, BLOCK_M=16, BLOCK_N=16))
    assert measure.point_inputs(f, 1) is not measure.point_inputs(f, 1)       # a kernel's generator: never reused
    measure._INPUT_CACHE.clear()
