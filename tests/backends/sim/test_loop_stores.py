"""A coarsened loop (fast fidelity merges iterations) still writes every tile it stores."""
import gpusim


def test_stores_in_a_merged_loop_are_all_counted():
    p = dict(rows=264, cols=65536, BLOCK=1024, check=False)
    fast = gpusim.simulate("softmax", gpu="h200", fidelity="fast", **p)
    full = gpusim.simulate("softmax", gpu="h200", fidelity="full", **p)
    assert fast.kernels[0].loop_group > 1          # the fast run did merge iterations
    written = 264 * 65536 * 2                      # the whole fp16 output, once
    assert fast.kernels[0].dram_write_bytes == full.kernels[0].dram_write_bytes == written
