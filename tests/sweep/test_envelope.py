"""sweep/envelope.py: within one what-if sweep, a GPU at least as good as another point's in every
field takes the faster of the two times, and says whose schedule it is."""
import pytest

from gpusim.hardware import load_gpu
from gpusim.output.tables import run_table
from gpusim.sweep.envelope import monotone
from gpusim.sweep.gpus import with_overrides
from gpusim.sweep.point import Point

L2 = "l2_bandwidth_bytes_per_s"


def _point(cfg, x: float, field: str = L2, **params):
    over = {} if x == 1.0 else {field: getattr(cfg, field) * x}
    c = with_overrides(cfg, over, "gpu_overrides")[0] if over else cfg
    return Point(gpu="h200", kernel="matmul", params=params or {"M": 2048}, check=False, fidelity="fast",
                 config=c, config_hash=c.config_hash(), gpu_overrides=over)


def _row(t: float, status: str = "ok") -> dict:
    return {"gpu": "h200", "kernel": "matmul", "status": status, "reason": "", "time_us": 1.05 * t,
            "time_us_sim": t, "bound": "power", "clock_mhz": 1844, "dram_read_bytes": 1.0}


@pytest.fixture(scope="module")
def h200():
    return load_gpu("h200")


def test_a_better_gpu_takes_a_weaker_ones_faster_schedule(h200):
    pts = [_point(h200, x) for x in (1.0, 1.1, 1.25)]
    rows = monotone(pts, [_row(28.58), _row(26.72), _row(27.85)], [L2])
    assert [r["time_us_sim"] for r in rows] == [28.58, 26.72, 26.72]
    assert rows[2]["time_us"] == pytest.approx(1.05 * 26.72) and rows[2]["clock_mhz"] == 1844
    assert rows[2]["reason"].startswith("the schedule of gpu.l2_bandwidth_bytes_per_s=") and "27.85" in rows[2]["reason"]
    assert rows[0]["reason"] == rows[1]["reason"] == ""       # nothing faster below them
    assert "1 of 3 points: the time of a weaker GPU's schedule" in run_table(rows, [])


def test_only_a_gpu_at_least_as_good_everywhere_and_the_same_point(h200):
    over = {L2: h200.l2_bandwidth_bytes_per_s * 1.25, "hbm_read_bandwidth_bytes_per_s": h200.hbm_read_bandwidth_bytes_per_s * 0.9}
    c = with_overrides(h200, over, "gpu_overrides")[0]
    mixed = Point(gpu="h200", kernel="matmul", params={"M": 2048}, check=False, fidelity="fast", config=c,
                  config_hash=c.config_hash(), gpu_overrides=over)       # better L2, worse HBM: neither is better
    assert [r["time_us_sim"] for r in monotone([_point(h200, 1.0), mixed], [_row(30.0), _row(20.0)], [L2])] == [30.0, 20.0]
    assert [r["time_us_sim"] for r in monotone([_point(h200, 1.0), mixed], [_row(20.0), _row(30.0)], [L2])] == [20.0, 30.0]
    weaker = _point(h200, 0.9, "hbm_read_bandwidth_bytes_per_s")      # the named GPU improves on it
    assert monotone([_point(h200, 1.0), weaker], [_row(30.0), _row(20.0)], [L2])[0]["time_us_sim"] == 20.0
    other_shape = _point(h200, 1.25, M=4096)
    assert monotone([_point(h200, 1.0), other_shape], [_row(20.0), _row(30.0)], [L2])[1]["time_us_sim"] == 30.0
    failed = monotone([_point(h200, 1.0), _point(h200, 1.1)], [_row(20.0, "error"), _row(30.0)], [L2])
    assert failed[1]["time_us_sim"] == 30.0
    assert monotone([_point(h200, 1.0), _point(h200, 1.1)], [_row(20.0), _row(30.0)], [])[1]["time_us_sim"] == 30.0
