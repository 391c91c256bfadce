"""Merged loop steps (fast mode) against the full-fidelity loop they stand for.

The engine's loop at full fidelity issues the tile of iteration i + dist when iteration i starts and
computes iteration i once its tile is back. A merged step of k iterations computes them once all
their tiles are back; ``pipeline.merged_wait`` says how long after their issue those tiles must
count as ready for the merged loop to end when the full one does. These tests replay both
recurrences with a fixed round trip L and compute time D per iteration (no engine), and check the
memory path's per-iteration line count of merged tiles.
"""
import math

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from gpusim.backends.sim.memory import row_lines
from gpusim.backends.sim.pipeline import merged_wait


def full_loop(trips: int, dist: int, lat: float, work: float) -> float:
    start = [0.0]
    for i in range(trips):
        issued = start[max(0, i - dist)]
        start.append(max(start[i], issued + lat) + work)
    return start[-1]


def merged_loop(trips: int, dist: int, lat: float, work: float, group: int) -> float:
    ahead, steps = -(-dist // group), -(-trips // group)
    start = [0.0]
    for j in range(steps):
        k = min(group, trips - j * group)
        issued = start[max(0, j - ahead)]
        expose, credit = merged_wait(k, ahead, dist, work)     # as pipeline._issue_group: every step
        start.append(max(start[j], issued + lat * (1 + expose) + credit) + k * work)
    return start[-1]


@settings(max_examples=200, deadline=None)
@given(dist=st.integers(0, 4), group=st.sampled_from([2, 4, 8, 16]), steps=st.integers(16, 40),
       lat_over_work=st.floats(0.0, 50.0))
def test_a_merged_loop_ends_near_the_full_loop(dist, group, steps, lat_over_work):
    # the engine merges a loop into 16 steps; the merged wait follows the full loop's mean rate,
    # not its bunches of dist + 1 iterations, and the first steps wait as later ones: worst 5.9%
    # up to 4 stages (dist 2), 11.7% at 5 (a grid search over 16-40 steps, L / D up to 50)
    trips = steps * group
    full = full_loop(trips, dist, 100.0 * lat_over_work, 100.0)
    merged = merged_loop(trips, dist, 100.0 * lat_over_work, 100.0, group)
    assert merged == pytest.approx(full, rel=0.06 if dist <= 2 else 0.12)


def test_up_to_three_stages_the_steady_wait_is_k_over_dist_latencies():
    # the rule before the merged wait was derived (k / max(dist, 1) latencies) holds past a loop's
    # first steps for one or two tiles in flight, so those loops keep their predictions there
    for dist in (0, 1):
        for k in (1, 2, 4, 8, 16):
            ahead = -(-dist // k)
            assert merged_wait(k, ahead, dist, 140.0) == (max(0.0, k / max(dist, 1) - 1.0), 0.0)


def test_one_iteration_steps_wait_one_round_trip():
    # full fidelity (k = 1): every tile is ready one round trip after its issue
    for dist in range(5):
        for lead in range(dist + 1):
            assert merged_wait(1, lead, dist, 140.0) == (0.0, 0.0)


def test_deep_pipelines_wait_less_than_one_latency_per_dist_iterations():
    # four stages (dist 2), two iterations a step: the old rule (k / dist latencies) waited 1
    # round trip, 17-24% faster than full on the long-K GEMMs of benchmarks/bench_speed.py --compare
    expose, credit = merged_wait(2, 1, 2, 140.0)
    assert math.isclose(expose, 1 / 3) and math.isclose(credit, -2 / 3 * 140.0)


def test_lines_of_a_tile_count_each_row():
    # 128 rows of 64 bytes at an 8 KiB pitch: a line per row, as the L2 walk counts them
    assert row_lines(0, 128, 8192, 64, 7) == 128
    # rows across a line boundary touch two lines; back-to-back rows share lines
    assert row_lines(96, 2, 8192, 64, 7) == 4
    assert row_lines(0, 4, 32, 32, 7) == 4
    assert row_lines(0, 1, 512, 512, 7) == 4
