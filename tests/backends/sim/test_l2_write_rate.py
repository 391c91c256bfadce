"""The L2's write rate (GPUConfig.l2_write_bandwidth_bytes_per_s, measured by benchmarks/l2_write.py
on the H200, docs/validation.md round 16): unset it changes nothing; set, a written byte and a
spill's STL hold the L2 path longer than a read byte, and a spilling kernel takes longer."""
import pytest

from gpusim import simulate
from gpusim.backends.sim.memory import MemoryPath
from gpusim.hardware import load_gpu

SPILL = "benchmarks/kernels/spill_live.py:spill_live"


@pytest.fixture(scope="module")
def h200():
    return load_gpu("configs/h200.yaml")


def test_unset_writes_cost_what_reads_cost(h200):
    assert h200.l2_write_bandwidth_bytes_per_s is None
    assert h200.l2_write_cost == 1.0
    same = h200.model_copy(update={"l2_write_bandwidth_bytes_per_s": h200.l2_bandwidth_bytes_per_s})
    assert same.l2_write_cost == pytest.approx(1.0)
    a = simulate(SPILL, h200, ctas=132, per_thread=384, iters=16)
    b = simulate(SPILL, same, ctas=132, per_thread=384, iters=16)
    assert a.time_us == pytest.approx(b.time_us, rel=1e-9)


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
    assert end(h200, 500.0) == pytest.approx(1000.0 / rate)
    assert end(cfg, 0.0) == pytest.approx(1000.0 / rate)            # reloads only: the read rate
    assert end(cfg, 500.0) == pytest.approx(1500.0 / rate)          # half stores, each twice a read


def test_a_spilling_kernel_takes_longer_at_a_lower_write_rate(h200):
    cfg = h200.model_copy(update={"l2_write_bandwidth_bytes_per_s": 4.28e12})
    a = simulate(SPILL, h200, ctas=132, per_thread=384, iters=16)
    b = simulate(SPILL, cfg, ctas=132, per_thread=384, iters=16)
    assert b.time_us > 1.2 * a.time_us
