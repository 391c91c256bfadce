"""The scoreboard's dependent latencies are the ones measured on the H200 (round 15), and with them
the scoreboard predicts the recorded dependent-chain microbenchmarks.

Both read recorded data only (data/h200/micro/): the latency microbenchmark's output,
and the loop bodies triton 3.6 compiled for the chain kernels (so no ptxas is needed here)."""
import json
import os
import sys
from pathlib import Path

import pytest

from gpusim.hardware import load_gpu

ROOT = Path(__file__).resolve().parents[3]
MICRO = ROOT / "data" / "h200" / "micro"


def _steps() -> dict:
    return json.loads((MICRO / "micro_latency_chains.json").read_text())["step_cycles"]


def test_shipped_latencies_are_the_measured_steps():
    lat = load_gpu("h200").dependent_latency_cycles
    step = _steps()
    assert lat["fp32"] == pytest.approx(step["fadd"], abs=0.1)
    assert lat["shfl"] == pytest.approx(step["shfl"], abs=0.15)
    assert lat["shared"] == pytest.approx(step["lds"], abs=0.1)
    assert lat["barrier"] == pytest.approx(step["bar"], abs=0.1)
    # a store's visibility: the exchange less its barrier and its load
    assert lat["shared_store"] == pytest.approx(step["exchange"] - step["bar"] - step["lds"], abs=0.5)
    # the H100 has the H200's SM: the same latencies
    assert load_gpu("h100").dependent_latency_cycles == lat


def test_the_recorded_steps_are_consistent():
    step = _steps()
    # a shuffle feeding an ALU op feeding the next shuffle costs the two latencies, within 2 cycles
    assert step["shfl_fadd"] == pytest.approx(step["shfl"] + step["fadd"], abs=3.0)
    # 4 warps on 4 schedulers do not slow each other's chains
    assert step["hmma4"] == pytest.approx(step["hmma"], rel=0.03)
    assert step["shfl_max4"] == pytest.approx(step["shfl_max"], rel=0.03)


def test_scoreboard_with_measured_latencies_predicts_the_recorded_chains(monkeypatch):
    # fit_latency drops TRITON_INTERPRET (it compiles for sm_90); the other tests need it back
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "1"))
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import fit_latency as F

    F.BODIES.update(json.loads((MICRO / "bodies_h200_triton36.json").read_text())["bodies"])
    rows = F.cases(str(MICRO)) + F.held_out(str(MICRO / "micro_chains.json"))
    assert len(rows) == 72
    errs = sorted(abs(e) for e in F.errors(rows, load_gpu("h200").dependent_latency_cycles))
    assert errs[len(errs) // 2] < 0.10
    assert errs[int(0.9 * len(errs))] < 0.15
    # round 4's fitted values do much worse on the same bodies (p90 above 30%)
    old = {"fp32": 4, "int": 4, "mufu": 20, "shfl": 0, "shared": 4, "shared_store": 165, "barrier": 20, "branch": 0}
    old_errs = sorted(abs(e) for e in F.errors(rows, old))
    assert old_errs[int(0.9 * len(old_errs))] > 0.30
