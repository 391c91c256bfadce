"""Every simulated point is physical: random feasible points of every kernel family on the a100,
h100 and h200 break no rule of ``gpusim.physics`` (roofline bounds, utilisations, DRAM traffic at
least the compulsory bytes, the clock only lowered at the power limit).

Shapes are drawn over the range users run, tiles and pipelining depths over what the kernels
take; a draw the kernel refuses, that cannot run on the GPU, or that would take long to simulate
(``precheck.estimate_work`` above ``WORK_BUDGET``) is drawn again. The 500-point sweep is slow;
the default run checks a few points that simulate in well under a second each, among them
sampled launches (more than 8 waves of CTAs: their middle is extrapolated, ``sampling.py``)."""
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpusim import physics, precheck, simulate
from gpusim.hardware import load_gpu
from gpusim.kernels import KERNELS
from gpusim.overrides import with_overrides

GPUS = ("a100", "h100", "h200")
# the same GPUs with fewer SMs (a what-if): a launch of more than 8 waves is sampled, its middle
# extrapolated (sampling.py), and with few SMs that takes few CTAs, so it is cheap to simulate
FEW_SMS = (0, 0, 4, 8, 16)        # 0: the GPU as named
WORK_BUDGET = 2.5e4        # work units (about 15 us each on a 2-core machine): about 0.4 s a point
POW2 = lambda lo, hi: st.sampled_from([1 << i for i in range(lo, hi + 1)])    # noqa: E731
DTYPE = st.sampled_from(["fp16", "bf16", "fp16", "fp32"])
WARPS = st.sampled_from([4, 8, 4, 2])
STAGES = st.integers(1, 4)


def _attention(draw, kernel: str) -> dict:
    heads = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
    p = dict(batch=draw(st.integers(1, 8)), heads=heads, seq_len=draw(st.integers(1, 16) | POW2(6, 14)),
             head_dim=draw(st.sampled_from([32, 64, 128, 64, 80])), dtype=draw(DTYPE), num_warps=draw(WARPS))
    if kernel == "attention_naive":
        return p
    p.update(causal=draw(st.booleans()), BLOCK_M=draw(POW2(4, 7)), BLOCK_N=draw(POW2(4, 7)),
             num_stages=draw(STAGES))
    if kernel == "attention_flash":
        p.update(kv_heads=draw(st.sampled_from([0, 0, 1, max(1, heads // 4), max(1, heads // 8)])),
                 window=draw(st.sampled_from([0, 0, 0, 64, 256, 1000])))
    return p


@st.composite
def points(draw):
    """(kernel, gpu, params) of a random point; it may still be infeasible."""
    gpu = (draw(st.sampled_from(GPUS)), draw(st.sampled_from(FEW_SMS)))
    kernel = draw(st.sampled_from(FAMILIES))
    common = dict(dtype=draw(DTYPE), num_warps=draw(WARPS))
    if kernel.startswith("attention_") and kernel != "attention_decode":
        return kernel, gpu, _attention(draw, kernel)
    if kernel == "matmul":
        p = dict(M=draw(st.integers(1, 300) | POW2(6, 14)), N=draw(st.integers(1, 300) | POW2(6, 14)),
                 K=draw(st.integers(1, 300) | POW2(6, 14)), BLOCK_M=draw(POW2(4, 8)), BLOCK_N=draw(POW2(4, 8)),
                 BLOCK_K=draw(POW2(4, 7)), num_stages=draw(STAGES))
    elif kernel == "attention_decode":
        heads = draw(st.sampled_from([8, 16, 32, 64]))
        kv_len = draw(st.integers(16, 5000) | POW2(8, 17))
        p = dict(batch=draw(st.integers(1, 64)), heads=heads, kv_heads=draw(st.sampled_from([0, 1, heads // 8])),
                 q_len=draw(st.integers(1, 4)), kv_len=kv_len, head_dim=draw(st.sampled_from([64, 128])),
                 causal=draw(st.booleans()), num_splits=draw(st.sampled_from([1, 2, 4, 16, 32])),
                 BLOCK_N=draw(POW2(4, 7)), num_stages=draw(STAGES))
    elif kernel == "gemv_splitk":
        p = dict(M=draw(st.integers(1, 32)), N=draw(st.integers(16, 3000) | POW2(10, 15)),
                 K=draw(st.integers(16, 3000) | POW2(10, 15)), BLOCK_M=draw(POW2(4, 5)), BLOCK_N=draw(POW2(4, 7)),
                 BLOCK_K=draw(POW2(5, 8)), SPLIT_K=draw(st.sampled_from([1, 2, 4, 8])), num_stages=draw(STAGES))
    elif kernel.startswith("elementwise"):
        p = dict(n=draw(st.integers(1, 10 ** 5) | POW2(10, 26)), BLOCK=draw(POW2(7, 12)))
    else:       # softmax, layernorm, rmsnorm
        p = dict(rows=draw(st.integers(1, 300) | POW2(6, 15)), cols=draw(st.integers(1, 5000) | POW2(6, 15)),
                 BLOCK=draw(st.sampled_from([0, 0, 256, 1024, 4096])), num_stages=draw(STAGES))
    return kernel, gpu, {**p, **common}


FAMILIES = ("matmul", "attention_flash", "attention_naive", "attention_flash_bwd", "attention_decode", "gemv_splitk",
            "elementwise_fused", "elementwise_chain", "softmax", "layernorm", "rmsnorm")


@lru_cache(maxsize=None)
def _gpu(gpu):
    """The config of ``gpu``: a name, or (name, SM count; 0 for the named count)."""
    name, sms = (gpu, 0) if isinstance(gpu, str) else gpu
    cfg = load_gpu(name)
    return with_overrides(cfg, {"sm_count": sms}, "gpu_overrides")[0] if sms else cfg


def _workload(kernel: str, gpu, params: dict, budget: float | None = WORK_BUDGET):
    """The workload of a feasible point (no costlier than ``budget`` work units), or None."""
    cfg = _gpu(gpu)
    try:
        wl = KERNELS[kernel].build(**params)
    except ValueError:
        return None
    if precheck.infeasible_reason(wl, cfg) or (budget and precheck.estimate_work(wl, cfg).units > budget):
        return None
    return wl


def check_physical(kernel: str, gpu, params: dict, budget: float | None = WORK_BUDGET) -> bool:
    """Simulate the point when it is feasible and cheap and assert it is physical; whether it ran."""
    wl = _workload(kernel, gpu, params, budget)
    if wl is None:
        return False
    cfg = _gpu(gpu)
    r = simulate(kernel, cfg, check=False, **params)
    if r.status == "infeasible":        # registers, SRAM or CTA limits found when compiled
        return False
    assert r.status == "ok", (kernel, gpu, params, r.status, r.reason)
    assert physics.violations(r, wl, cfg) == [], (kernel, gpu, params)
    return True


@pytest.mark.slow
@settings(max_examples=500, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(points())
def test_random_feasible_points_are_physical(point):
    assume(check_physical(*point))


# sampled launches (on fewer SMs: more than 8 waves) whose first touches come in bursts, one per
# K/V head or panel, and points of other families; each simulates in under a second
FAST = [
    pytest.param("attention_flash", ("h100", 16), dict(batch=1, heads=32, kv_heads=4, seq_len=1024, head_dim=64,
                                                       causal=True, BLOCK_M=32, BLOCK_N=64), marks=pytest.mark.slow),
    pytest.param("matmul", ("h200", 8), dict(M=1024, N=512, K=256, BLOCK_M=64, BLOCK_N=32, BLOCK_K=64),
                 marks=pytest.mark.slow),
    ("elementwise_fused", "h200", dict(n=(1 << 20) + 7, BLOCK=512)),
    ("rmsnorm", ("a100", 16), dict(rows=1024, cols=768)),
    ("attention_decode", ("h100", 8), dict(batch=4, heads=32, kv_heads=8, kv_len=777, num_splits=4)),
]


@pytest.mark.parametrize("kernel,gpu,params", FAST)
def test_a_few_points_are_physical(kernel, gpu, params):
    assert check_physical(kernel, gpu, params, budget=None)
