"""The engine's event loop (``engine.run_processes``, on a SimPy environment) wakes processes in the order a
SimPy environment does: by time, then FIFO in the order the wake-ups were scheduled."""
import random

import pytest
import simpy

from gpusim.backends.sim.engine import run_processes


class Clock:
    now = 0.0


def _procs(seed, log, sim):
    rng = random.Random(seed)

    def proc(k, delays):
        for d in delays:
            log.append((sim.now, k))
            yield d
        log.append((sim.now, k, "end"))

    # delays on a coarse grid (many ties, zeros included) and a few fine ones
    return [proc(k, [rng.choice([0.0, 1.0, 2.0, 0.5, rng.random()]) for _ in range(rng.randint(0, 30))])
            for k in range(12)]


def _simpy_reference(sim, procs):
    env = simpy.Environment()

    def wrap(gen):
        while True:
            sim.now = env.now
            try:
                delay = next(gen)
            except StopIteration:
                return
            yield env.timeout(delay)

    for p in procs:
        env.process(wrap(p))
    env.run()


@pytest.mark.parametrize("seed", range(5))
def test_heap_wakes_processes_in_simpy_order(seed):
    ours, ref = [], []
    a, b = Clock(), Clock()
    run_processes(a, _procs(seed, ours, a))
    _simpy_reference(b, _procs(seed, ref, b))
    assert ours == ref and len(ours) > 12
