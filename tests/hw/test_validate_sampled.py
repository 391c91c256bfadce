"""The row-sampled output check of large attention honours GQA and the sliding window, and is used
for the built-in attention kernels only (other kernels are checked against their own reference)."""
import numpy as np

from gpusim.backends import numpy_exec
from gpusim.hw.validate.measure import sampled_reference
from gpusim.kernels import build


def test_sampled_check_matches_gqa_window_flash():
    wl = build("attention_flash", dict(batch=1, heads=4, kv_heads=2, seq_len=256, head_dim=32, causal=True,
                                       window=64, BLOCK_M=64, BLOCK_N=32))
    inputs = numpy_exec.random_inputs(wl, 1)
    out = numpy_exec.execute(wl, inputs)
    refs, how = sampled_reference(wl, inputs, force_sample=True)
    assert how == "sampled"
    for name, (idx, ref) in refs.items():
        assert numpy_exec.max_rel_err(np.asarray(out[name])[idx], ref) < 2e-3


def test_other_attention_kernels_use_their_own_reference():
    wl = build("attention_decode", dict(batch=1, heads=4, kv_heads=2, kv_len=256, head_dim=32, num_splits=2))
    refs, how = sampled_reference(wl, numpy_exec.random_inputs(wl, 1), force_sample=True)
    assert how == "full"
