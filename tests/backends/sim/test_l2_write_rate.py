"""The L2's write rate (GPUConfig.l2_write_bandwidth_bytes_per_s, 4.28 TB/s measured by
benchmarks/l2_write.py on the H200): a spill's STL holds the L2 path longer than a read byte, so
a spilling kernel takes longer at a lower write rate; output stores are charged at the read rate,
and without the field spills are too."""
import pytest

from gpusim import simulate
from gpusim.backends.sim.memory import MemoryPath
from gpusim.hardware import load_gpu

SPILL = "benchmarks/kernels/spill_live.py:spill_live"


@pytest.fixture(scope="module")
def h200():
    return load_gpu("configs/h200.yaml")


def _unset(cfg):
    return cfg.model_copy(update={"l2_write_bandwidth_bytes_per_s": None})


def test_the_h200_writes_at_its_measured_rate_and_unset_costs_a_read(h200):
    assert h200.l2_write_bandwidth_bytes_per_s == pytest.approx(4.28e12)
    assert h200.l2_write_cost == pytest.approx(9.07e12 / 4.28e12, rel=1e-3)
    assert _unset(h200).l2_write_cost == 1.0


def test_a_spill_charges_its_stores_at_the_write_rate(h200):
    cfg = h200.model_copy(update={"l2_write_bandwidth_bytes_per_s": h200.l2_bandwidth_bytes_per_s / 2})
    assert cfg.l2_write_cost == pytest.approx(2.0)
    from gpusim.backends.sim.l2 import L2Cache
    from gpusim.backends.sim.stats import Tally

    def end(c, store):
        mem = MemoryPath(c, L2Cache(c.l2_bytes), {}, {}, 4, Tally())
        mem.spill(1000.0, 0.0, mem.sms[0], store)
        return mem.l2ch.free_at       # the shared L2 path (one SM's own port is slower still)

    rate = h200.l2_bandwidth_bytes_per_s / h200.clock_hz
    assert end(_unset(h200), 500.0) == pytest.approx(1000.0 / rate)
    assert end(cfg, 0.0) == pytest.approx(1000.0 / rate)            # reloads only: the read rate
    assert end(cfg, 500.0) == pytest.approx(1500.0 / rate)          # half stores, each twice a read


def test_a_spilling_kernel_takes_longer_at_the_write_rate(h200):
    a = simulate(SPILL, _unset(h200), ctas=132, per_thread=384, iters=16)
    b = simulate(SPILL, h200, ctas=132, per_thread=384, iters=16)
    assert b.time_us > 1.2 * a.time_us


def test_output_stores_are_charged_at_the_read_rate(h200):
    # an elementwise kernel stores as many bytes as it reads and spills nothing: the write rate
    # leaves it alone
    a = simulate("elementwise_fused", _unset(h200), check=False, n=1 << 22)
    b = simulate("elementwise_fused", h200, check=False, n=1 << 22)
    assert b.time_us == pytest.approx(a.time_us, rel=1e-9)
