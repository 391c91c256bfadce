"""Physics on every result: a result faster than its roofline, with a utilisation above 1 or a
non-finite number is unphysical, never ok."""
from dataclasses import replace

import pytest

from gpusim import physics, simulate


def _ok():
    return simulate("matmul", "h100", check=False, M=512, N=512, K=512)


def test_a_real_result_is_physical():
    r = _ok()
    assert r.status == "ok" and physics.violations(r) == [] and physics.judge(r) is r


def test_faster_than_the_compute_bound_is_unphysical():
    r = _ok()
    fast = replace(r, time_us=r.flops / r.peak_flops_per_s * 1e6 * 0.5)
    j = physics.judge(fast)
    assert j.status == "unphysical" and "below the compute bound" in j.reason
    assert "utilisation" in j.reason     # the pipe was busy more than the whole (halved) time


def test_non_finite_is_unphysical():
    for bad in (float("nan"), float("inf"), -1.0):
        j = physics.judge(replace(_ok(), time_us=bad))
        assert j.status == "unphysical" and "time_us" in j.reason


def test_dram_above_peak_is_unphysical():
    r = _ok()
    j = physics.judge(replace(r, hbm_bandwidth_bytes_per_s=r.dram_bytes / (r.time_us * 1e-6) / 2))
    assert j.status == "unphysical" and "dram utilisation 2" in j.reason


def test_not_simulated_is_left_alone():
    r = replace(_ok(), status="infeasible", time_us=None)
    assert physics.judge(r) is r


def test_copy_bandwidth_above_read_plus_write_is_caught():
    """The what-if of issue 32: copy bandwidth at 1.99999x read ran DRAM at 1.13x its peak, reported ok."""
    from gpusim.hardware import load_gpu

    cfg = load_gpu("h100")
    cfg = cfg.model_copy(update={"hbm_copy_bandwidth_bytes_per_s": 1.99999 * cfg.hbm_read_bandwidth_bytes_per_s})
    r = simulate("elementwise_fused", cfg, check=False)
    assert r.status in ("ok", "unphysical")
    if r.status == "ok":     # the model was fixed at its cause: then the result must be physical
        assert physics.violations(r) == []
    else:
        assert "dram utilisation" in r.reason


# --------------------------------------------------------------------------- compulsory bytes, throttling
def _matmul_workload():
    from gpusim.kernels import KERNELS

    return KERNELS["matmul"].build(M=512, N=512, K=512)


def test_compulsory_bytes_are_inputs_read_once_and_outputs_written_once():
    reads, writes = physics.compulsory_bytes(_matmul_workload())
    assert (reads, writes) == (2 * 512 * 512 * 2, 512 * 512 * 2)      # A and B in fp16; C in fp16


def test_compulsory_bytes_leave_out_tensors_between_launches():
    """elementwise_chain writes two intermediates it reads back: only x read and the output written count."""
    from gpusim.kernels import KERNELS

    wl = KERNELS["elementwise_chain"].build(n=4096)
    assert physics.compulsory_bytes(wl) == (4096 * 2, 4096 * 2)


def test_a_real_result_meets_its_compulsory_bytes_and_clock():
    from gpusim.hardware import load_gpu

    r = _ok()
    assert physics.violations(r, _matmul_workload(), load_gpu("h100")) == []


def test_dram_reads_below_the_compulsory_bytes_are_unphysical():
    r = _ok()
    less = tuple(replace(k, dram_read_bytes=k.dram_read_bytes * 0.5) for k in r.kernels)
    j = physics.judge(replace(r, kernels=less), _matmul_workload())
    assert j.status == "unphysical" and "DRAM read bytes" in j.reason and "compulsory" in j.reason


def test_dram_writes_below_the_output_bytes_are_unphysical():
    r = _ok()
    less = tuple(replace(k, dram_write_bytes=0.0) for k in r.kernels)
    j = physics.judge(replace(r, kernels=less), _matmul_workload())
    assert j.status == "unphysical" and "DRAM write bytes" in j.reason


def test_clock_below_the_maximum_under_the_power_limit_is_unphysical():
    """Issue 32's what-if: 925 MHz at 88.7 W against a 700 W limit was reported ok."""
    from gpusim.hardware import load_gpu

    cfg = load_gpu("h100")
    r = _ok()
    slow = tuple(replace(k, clock_hz=925e6, power_w=88.7) for k in r.kernels)
    j = physics.judge(replace(r, kernels=slow), cfg=cfg)
    assert j.status == "unphysical" and "925 MHz" in j.reason and "700 W limit" in j.reason
    # at the limit (within the tolerance) a lowered clock is what the limiter does
    limited = tuple(replace(k, clock_hz=1500e6, power_w=cfg.power_limit_w * 0.995) for k in r.kernels)
    assert physics.violations(replace(r, kernels=limited), cfg=cfg) == []


def test_flash_with_a_faster_write_channel_keeps_its_clock():
    """The case of issue 32 (h100, flash B1 H2 N512, HBM writes 1e13 -> 3e13 B/s) is physical."""
    from gpusim.hardware import load_gpu

    cfg = load_gpu("h100")
    cfg = cfg.model_copy(update={"hbm_write_bandwidth_bytes_per_s": 3e13})
    r = simulate("attention_flash", cfg, check=False, batch=1, heads=2, seq_len=512)
    assert r.status == "ok" and all(k.clock_hz == cfg.clock_hz for k in r.kernels)


def _saved(r):
    import json

    return json.loads(json.dumps(r.row(list(r.params)))), json.loads(json.dumps([k.row(0) for k in r.kernels]))


def test_saved_row_of_a_real_result_is_physical():
    from gpusim.hardware import load_gpu

    row, krows = _saved(_ok())
    assert physics.row_violations(row, krows, load_gpu("h100"), {"dtype": "fp16"}, _matmul_workload()) == []


@pytest.mark.parametrize("field,value,what", [
    ("time_us", 0.001, "below the compute bound"), ("dram_read_bytes", -5, "dram_read_bytes is -5"),
    ("tflops", 999999, "tflops"), ("dram_gbps", 1e9, "dram_gbps"), ("flops", float("nan"), "flops is nan"),
    ("dram_write_bytes", 0, "not the sum over its launches")])
def test_saved_row_edited_by_hand_is_unphysical(field, value, what):
    from gpusim.hardware import load_gpu

    row, krows = _saved(_ok())
    row[field] = value
    v = physics.row_violations(row, krows, load_gpu("h100"), {"dtype": "fp16"}, _matmul_workload())
    assert any(what in x for x in v), v


def test_saved_row_throttled_below_the_limit_is_unphysical():
    from gpusim.hardware import load_gpu

    row, krows = _saved(_ok())
    for k in krows:
        k["clock_mhz"], k["power_w"] = 925, 88.7
    assert any("925 MHz" in x for x in physics.row_violations(row, krows, load_gpu("h100")))


@pytest.mark.slow
def test_shipped_scenario_points_pass_every_check():
    """The cheapest point of each kernel family in the shipped scenarios (fast fidelity, as run)
    breaks no physics: compulsory bytes and clocks included, on the result and on its saved rows."""
    from pathlib import Path

    from gpusim import precheck
    from gpusim.frontends.triton_trace.errors import TritonTraceError
    from gpusim.kernels import resolve_kernel
    from gpusim.models import scenario as model_scenario
    from gpusim.sweep.scenario import load_scenario

    repo = Path(__file__).resolve().parents[1]
    cheapest = {}
    for p in sorted((repo / "scenarios").rglob("*.yaml")):
        if model_scenario.is_model_scenario(p):
            continue
        for pt in load_scenario(p).points:
            try:
                wl = resolve_kernel(pt.kernel_ref or pt.kernel).build(pt.params)
            except TritonTraceError:      # a vendored public kernel the front end refuses (docs/triton-kernels.md)
                continue
            if precheck.infeasible_reason(wl, pt.config):
                continue
            w = precheck.estimate_work(wl, pt.config, pt.fidelity).units
            if pt.kernel not in cheapest or w < cheapest[pt.kernel][0]:
                cheapest[pt.kernel] = (w, pt, wl)
    assert len(cheapest) >= 10
    for _, pt, wl in cheapest.values():
        r = simulate(pt.kernel_ref or pt.kernel, pt.config, check=False, fidelity=pt.fidelity, **pt.params)
        assert r.status == "ok", (pt.kernel, r.reason)
        assert physics.violations(r, wl, pt.config) == [], pt.kernel
        row, krows = _saved(r)
        assert physics.row_violations(row, krows, pt.config, pt.params, wl) == [], pt.kernel


@pytest.mark.parametrize("field,value,what", [
    ("l2_hit_rate", 1.5, "not a fraction"), ("clock_mhz", 5000, "above the maximum"),
    ("max_rel_err", "0.5", "does not follow from max_rel_err")])
def test_saved_row_inconsistent_with_itself_is_caught(field, value, what):
    """A re-sealed edit that no run could write: a hit rate above 1, a clock above the config's
    maximum, an ok status with an exact-check error above the tolerance (a mismatch turned ok)."""
    from gpusim.hardware import load_gpu

    row, krows = _saved(_ok())
    row[field] = value
    v = physics.row_violations(row, krows, load_gpu("h100"), {"dtype": "fp16"})
    assert any(what in x for x in v), v
