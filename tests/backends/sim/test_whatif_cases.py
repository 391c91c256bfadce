"""What-ifs that broke physics (issue: raising a rate made a kernel slower or faster than its
peak), each at the shape it was found on, and the refusal of configs no GPU could have."""
import pytest
from pydantic_core import PydanticCustomError

import gpusim
from gpusim.backends.sim import power
from gpusim.hardware import GPUConfig, load_gpu, derived_overrides
from gpusim.sweep.gpus import with_overrides


def _with(gpu, **fields) -> GPUConfig:
    base = load_gpu(gpu) if isinstance(gpu, str) else gpu
    return GPUConfig.model_validate({**base.model_dump(), **fields})


def _run(cfg, kernel, **params):
    r = gpusim.simulate(kernel, gpu=cfg, check=False, **params)
    assert r.status == "ok", r.reason
    return r


def test_faster_hbm_writes_do_not_lower_the_clock():
    # the timing loop's L2 flush at 3e13 B/s would draw ~2.3 kW of memory power alone; the SM
    # clock fell to 960 MHz (15.7 -> 27.7 us) though the kernel drew 89 W
    times, clocks = [], []
    for w in (1e13, 3e13):
        r = _run(_with("h100", hbm_write_bandwidth_bytes_per_s=w), "attention_flash", batch=1, heads=2, seq_len=512)
        times.append(r.time_us)
        clocks.append(r.kernels[0].clock_hz)
    assert clocks == [1.98e9, 1.98e9]
    assert times[1] <= times[0] * 1.01


def test_flush_never_draws_over_the_power_limit():
    for w in (3.2e12, 3e13, 1e15):
        cfg = _with("h100", hbm_write_bandwidth_bytes_per_s=w)
        joules, seconds = power.flush_energy(cfg)
        assert cfg.idle_power_w + joules / seconds <= cfg.power_limit_w * (1 + 1e-12)
    # the h100's own flush fits (248 W of memory power), so its rate is the write bandwidth
    h = load_gpu("h100")
    assert power.flush_energy(h)[1] == pytest.approx(power.TIMING_LOOP_FLUSH_BYTES / h.hbm_write_bandwidth_bytes_per_s)


@pytest.mark.parametrize("ratio", [1.5, 1.99999, 2.00001])
def test_copy_rate_never_makes_writes_beat_the_write_rate(ratio):
    h = load_gpu("h100")
    cfg = _with(h, hbm_copy_bandwidth_bytes_per_s=ratio * h.hbm_read_bandwidth_bytes_per_s)
    assert cfg.hbm_mixed_write_bandwidth_bytes_per_s <= cfg.hbm_write_bandwidth_bytes_per_s
    assert cfg.hbm_write_cost >= h.hbm_read_bandwidth_bytes_per_s / h.hbm_write_bandwidth_bytes_per_s


def test_copy_rate_past_twice_the_reads_is_continuous_and_below_peak():
    # copy = 1.99999 x read gave DRAM 3.55 TB/s over the 3.14 TB/s read peak; 2.00001 x jumped 18.9 -> 25.5 us
    h = load_gpu("h100")
    R, W = h.hbm_read_bandwidth_bytes_per_s, h.hbm_write_bandwidth_bytes_per_s
    out = [_run(_with(h, hbm_copy_bandwidth_bytes_per_s=x * R), "elementwise_fused", n=1 << 22)
           for x in (1.99999, 2.00001)]
    assert out[0].time_us == pytest.approx(out[1].time_us, rel=1e-3)
    for r in out:
        k = r.kernels[0]
        channel_s = k.dram_read_bytes / R + k.dram_write_bytes / W      # each byte at its own peak
        assert k.time_us * 1e-6 >= channel_s


def test_named_copy_rates_keep_their_write_cost():
    # the bound only acts away from the named configs' own values
    for g in ("h200", "h100", "a100", "a100-80gb"):
        c = load_gpu(g)
        per_byte = 2 / c.hbm_copy_bandwidth_bytes_per_s - 1 / c.hbm_read_bandwidth_bytes_per_s
        assert c.hbm_mixed_write_bandwidth_bytes_per_s == pytest.approx(1 / per_byte)


def test_more_sms_keep_each_sms_rate():
    # sm_count x4 spread the GPU-wide peaks over 4x the SMs: a 64-CTA matmul went 15.2 -> 26.3 us
    h = load_gpu("h100")
    base = _run(h, "matmul", M=1024, N=1024, K=1024).time_us
    cfg, vals = with_overrides(h, {"sm_count": 4 * h.sm_count}, "gpu_overrides")
    assert vals == {"sm_count": 528}
    assert cfg.tensor_flops_per_clk_per_sm("fp16") == pytest.approx(h.tensor_flops_per_clk_per_sm("fp16"))
    assert cfg.vector_ops_per_clk_per_sm == pytest.approx(h.vector_ops_per_clk_per_sm)
    assert _run(cfg, "matmul", M=1024, N=1024, K=1024).time_us <= base * 1.01


def test_sm_count_override_keeps_peaks_set_alongside():
    h = load_gpu("h100")
    ov = derived_overrides(h, {"sm_count": 264, "fp32_flops_per_s": 1e14})
    assert ov["fp32_flops_per_s"] == 1e14
    assert ov["tensor_flops_per_s"]["fp16"] == pytest.approx(2 * h.tensor_flops_per_s["fp16"])
    assert derived_overrides(h, {"l2_bytes": 1 << 26}) == {"l2_bytes": 1 << 26}


@pytest.mark.parametrize("kernel,params", [("elementwise_fused", dict(n=1 << 22)),
                                           ("matmul", dict(M=1024, N=1024, K=1024))])
def test_faster_hbm_reads_never_slow_a_kernel(kernel, params):
    # with the copy rate held, reads x4 lengthened each written byte (2/copy - 1/read):
    # elementwise 10.32 -> 10.69 us, matmul 15.17 -> 15.32 us
    h = load_gpu("h100")
    times = []
    for x in (1.0, 1.5, 4.0):
        cfg, _ = with_overrides(h, {"hbm_read_bandwidth_bytes_per_s": x * h.hbm_read_bandwidth_bytes_per_s}, "g")
        times.append(_run(cfg, kernel, **params).time_us)
    assert times[1] <= times[0] and times[2] <= times[1], times


def test_read_or_write_what_if_keeps_the_bus_turnaround():
    h = load_gpu("h100")

    def turnaround(c):
        return 2 / c.hbm_copy_bandwidth_bytes_per_s - 1 / c.hbm_read_bandwidth_bytes_per_s - 1 / c.hbm_write_bandwidth_bytes_per_s
    for over in ({"hbm_read_bandwidth_bytes_per_s": 1e13}, {"hbm_write_bandwidth_bytes_per_s": 2e12},
                 {"hbm_read_bandwidth_bytes_per_s": 5e12, "hbm_write_bandwidth_bytes_per_s": 6e12}):
        cfg, vals = with_overrides(h, over, "g")
        assert vals == over                                   # the derived copy rate is not a user field
        assert turnaround(cfg) == pytest.approx(turnaround(h), rel=1e-9)
        # a written byte costs its write time plus the same turnaround
        assert 1 / cfg.hbm_mixed_write_bandwidth_bytes_per_s == pytest.approx(
            1 / cfg.hbm_write_bandwidth_bytes_per_s + turnaround(h), rel=1e-9)
    # a copy rate given alongside is kept as given
    cfg, _ = with_overrides(h, {"hbm_read_bandwidth_bytes_per_s": 1e13, "hbm_copy_bandwidth_bytes_per_s": 3e12}, "g")
    assert cfg.hbm_copy_bandwidth_bytes_per_s == 3e12


@pytest.mark.parametrize("field,value,words", [
    ("hbm_copy_bandwidth_bytes_per_s", 1e13, ["hbm_copy_bandwidth_bytes_per_s", "at most hbm_read + hbm_write"]),
    ("l2_line_bytes", 96, ["l2_line_bytes = 96", "power of two"]),
    ("l2_line_bytes", 16, ["l2_line_bytes = 16", "plausible range 32 .. 256"]),
    ("idle_power_w", 800, ["idle_power_w = 800", "below power_limit_w = 700"]),
    ("max_registers_per_thread", 4000, ["max_registers_per_thread = 4000", "at most 2048"]),
    ("l2_bytes", 1 << 16, ["l2_bytes = 65536", "at least one set"]),
])
def test_impossible_gpus_are_refused_in_one_line(field, value, words):
    h = load_gpu("h100")
    over = {field: value}
    if field == "l2_bytes":
        over["l2_ways"] = 1024      # 128 KiB sets: a 64 KiB L2 holds none
    with pytest.raises(PydanticCustomError) as e:
        with_overrides(h, over, "gpu_overrides")
    msg = str(e.value)
    assert "\n" not in msg and e.value.context["field"].startswith("gpu_overrides")
    for w in words:
        assert w in msg, msg
