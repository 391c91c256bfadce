"""Refusals before simulating (HBM capacity, work limit) and the bound label."""
import pytest

import gpusim.api as api
from gpusim.backends.sim import under_load
from gpusim import precheck, simulate
from gpusim.hardware import load_gpu
from gpusim.kernels import build, resolve_params
from gpusim.result import BOUND_BUSY


class _NoSim:
    def __init__(self, *a, **k):
        raise AssertionError("the simulator was started")


@pytest.fixture
def no_sim(monkeypatch):
    """Fail the test if any launch reaches the SimPy engine."""
    monkeypatch.setattr(under_load, "LaunchSim", _NoSim)


def test_naive_attention_over_hbm_capacity(no_sim):
    r = simulate("attention_naive", "a100-80gb", batch=8, heads=32, seq_len=16384)
    assert r.status == "infeasible"
    need = 3 * 256 * 16384**2 * 2 + 4 * 256 * 16384 * 64 * 2
    assert r.reason == f"needs {need / 1e9:.0f} GB of HBM, a100-80gb has {load_gpu('a100-80gb').hbm_bytes / 1e9:.0f} GB"
    assert r.row()["time_us"] == "" and r.row()["bound"] == ""


@pytest.mark.parametrize("kernel", ["attention_flash", "attention_naive", "elementwise_fused", "matmul"])
def test_huge_sizes_never_reach_the_simulator(no_sim, kernel):
    big = {"attention_flash": dict(seq_len=10**9), "attention_naive": dict(seq_len=10**9),
           "elementwise_fused": dict(n=10**12), "matmul": dict(M=10**6, N=10**6, K=10**6)}[kernel]
    r = simulate(kernel, "h100", **big)
    assert r.status == "infeasible" and "GB of HBM, h100 has" in r.reason


def test_fits_exactly_at_capacity():
    cfg = load_gpu("h100")
    w = build("elementwise_fused", resolve_params("elementwise_fused", dict(n=1 << 20)))
    need = sum(t.nbytes for t in w.tensors.values())
    assert precheck.hbm_problem(w, cfg.model_copy(update={"hbm_bytes": need})) is None
    assert precheck.hbm_problem(w, cfg.model_copy(update={"hbm_bytes": need - 1})) is not None


def test_work_limit_refuses_with_estimate_and_override(no_sim):
    with pytest.raises(precheck.WorkLimitError) as e:
        simulate("attention_flash", "h200", seq_len=1 << 24, batch=1, heads=1)
    msg = str(e.value)
    assert "work units" in msg and "max_work=2e+07" in msg and "max_work=..." in msg
    assert "\n" not in msg


def test_max_work_argument_lowers_and_raises_the_limit():
    p = dict(seq_len=256, batch=1, heads=1, check=False)
    with pytest.raises(precheck.WorkLimitError):
        simulate("attention_flash", "h100", max_work=10, **p)
    assert simulate("attention_flash", "h100", max_work=1e9, **p).status == "ok"


def _estimate(kernel, fidelity="fast", check=False, gpu="h100", **params):
    cfg = load_gpu(gpu)
    w = build(kernel, resolve_params(kernel, params))
    return precheck.estimate_work(w, cfg, fidelity, check)


def test_estimate_grows_with_the_point():
    small = _estimate("attention_flash", seq_len=1024)
    large = _estimate("attention_flash", seq_len=8192)
    assert large.units > small.units > 0
    assert _estimate("attention_flash", "full", seq_len=8192).units > large.units
    assert _estimate("matmul", check=True).numpy_ops > 0 == _estimate("matmul").numpy_ops


def test_estimate_counts_what_a_full_simulation_runs():
    # fidelity full simulates every CTA and every iteration: 8 x 1 CTAs of 1024/64 = 16 iterations
    e = _estimate("attention_flash", "full", seq_len=1024, batch=1, heads=1)
    w = build("attention_flash", resolve_params("attention_flash", dict(seq_len=1024, batch=1, heads=1)))
    loop = next(op for op in w.launches[0].program.body if type(op).__name__ == "Loop")
    body = sum(1 for _ in api.ir.walk(loop.body))
    top = len(w.launches[0].program.body) - 1
    assert e.sim_steps == 8 * (top + 16 * body)
    assert e.scanned_ctas == 0


@pytest.mark.parametrize("opts,needle", [
    (dict(check="yes"), "check must be True, False or 'auto', got 'yes'"),
    (dict(fidelity="fastest"), "fidelity must be 'fast' or 'full', got 'fastest'"),
    (dict(max_work=-1), "max_work must be a positive number"),
])
def test_bad_options(no_sim, opts, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        simulate("attention_flash", "h100", **opts)


# --------------------------------------------------------------------------- the bound label
def test_small_grid_is_grid_bound_not_compute():
    r = simulate("attention_flash", "h100", seq_len=1024, batch=1, heads=2, check=False)
    u = r.utilisation()
    assert r.arithmetic_intensity > r.ridge_flop_per_byte       # the old roofline rule said compute
    assert u["pipe"] < BOUND_BUSY and u["sms"] < 0.5
    assert r.bound == "grid"                                  # was "occupancy"; kernels.csv keeps occupancy_limiter


def test_naive_attention_is_memory_bound():
    r = simulate("attention_naive", "a100-80gb", seq_len=2048, batch=2, heads=8, check=False)
    u = r.utilisation()
    assert u["dram"] >= BOUND_BUSY and u["dram"] > u["pipe"]
    assert r.bound == "memory" and r.row()["bound"] == "memory"


def test_large_flash_is_compute_bound():
    r = simulate("attention_flash", "a100-80gb", seq_len=1024, batch=8, heads=32, check=False)
    u = r.utilisation()
    assert u["pipe"] >= BOUND_BUSY and u["pipe"] > max(u["dram"], u["l2"])
    assert r.bound in ("tensor", "simt")                      # the SM pipe that is busiest


def test_launch_overhead_dominated_tiny_kernel_is_not_memory_bound():
    r = simulate("elementwise_fused", "h100", n=1 << 12)
    assert r.bound == "launch"
