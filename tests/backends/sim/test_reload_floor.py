"""A compiled loop of tensor steps only (a split-K GEMV's K loop) keeps its warps' dependent-chain
floor when the loop reloads spilled registers; without reloads, or when its tensor steps take
longer than the chain, the body is unchanged."""
import pytest

from gpusim.backends.sim.compiled_steps import _scaled_body
from gpusim.backends.sim.steps import SimtStep, TensorStep

BODY = (TensorStep(cycles=1000.0, flops=1.0),)


def test_a_reloading_tensor_loop_takes_at_least_its_chain():
    out = _scaled_body(BODY, 1.0, (50.0, 0.0), 1, latency=5000.0, reloads=True)
    extra = [b for b in out if isinstance(b, SimtStep)]
    assert len(extra) == 1 and extra[0].vector_cycles == 0 and extra[0].sfu_cycles == 0
    assert extra[0].min_cycles == pytest.approx(4000.0)      # the chain beyond the tensor steps


def test_the_floor_is_per_iteration_of_an_unrolled_body():
    out = _scaled_body(BODY, 1.0, (50.0, 0.0), 2, latency=5000.0, reloads=True)
    assert [b.min_cycles for b in out if isinstance(b, SimtStep)] == [pytest.approx(1500.0)]


@pytest.mark.parametrize("latency,reloads", [(5000.0, False), (800.0, True), (0.0, True)])
def test_no_floor_without_reloads_or_below_the_tensor_time(latency, reloads):
    assert _scaled_body(BODY, 1.0, (50.0, 0.0), 1, latency=latency, reloads=reloads) == BODY
