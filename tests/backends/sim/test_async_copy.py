"""Staged tiles that cp.async cannot copy (rows aligned to 2 bytes) are not run ahead by the
pipeliner (codegen.copies_async; benchmarks/kernels/stream_pad.yaml on the H200)."""
import pytest

from gpusim import simulate
from gpusim.backends.sim import codegen
from gpusim.dsl.ir import TensorArg
from gpusim.hardware import load_gpu

K = "benchmarks/kernels/stream_cols.py:stream_cols"


@pytest.fixture(scope="module")
def h200():
    return load_gpu("configs/h200.yaml")


@pytest.mark.parametrize("cols,dtype,expected", [
    (8192, "fp16", True), (8194, "fp16", True),      # 16- and 4-byte aligned rows
    (8193, "fp16", False), (8193, "fp32", True),     # an odd fp16 pitch: 2-byte copies
])
def test_copies_async_follows_the_row_alignment(h200, cols, dtype, expected):
    t = TensorArg("k", (512, cols), dtype)
    assert codegen.copies_async(t, (64, 64), h200) is expected
    assert codegen.copies_async(t, (64, 64), load_gpu("h200-ideal"))     # the ideal bound copies every tile


def _time(h200, pad, stages):
    return simulate(K, h200, ctas=132, cols=2048, BLOCK_K=64, pad=pad, num_stages=stages).time_us


def test_an_odd_pitch_loses_the_pipeline(h200):
    # pad 2 (4-byte aligned rows): cp.async, a third stage hides most of the latency
    assert _time(h200, 2, 3) < 0.8 * _time(h200, 2, 2)
    # pad 1 (2-byte aligned rows): LDG + STS, the third stage buys nothing (measured: 1630 and
    # 1634 cycles per iteration)
    assert _time(h200, 1, 3) == pytest.approx(_time(h200, 1, 2), rel=0.03)
