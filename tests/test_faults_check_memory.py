"""The exact check's memory is estimated and bounded like the simulation's work: a point whose
numpy check would hold more than the limit is refused before anything is allocated (a
``WorkLimitError`` in the API, an ``error`` row with the reason in a run), never a MemoryError
after gigabytes of RSS."""
import csv
import resource
import time

import pytest

from gpusim import precheck, simulate
from gpusim.cli import main
from gpusim.kernels import KERNELS

HUGE = 1 << 30      # elementwise_fused n = 2^30 with check: true reached 4.4 GB of RSS before


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_huge_exact_check_is_refused_in_the_api_before_allocating():
    before, t0 = _rss_mb(), time.monotonic()
    with pytest.raises(precheck.WorkLimitError, match="exact check .* would hold about .* GB") as e:
        simulate("elementwise_fused", "h100", check=True, n=HUGE)
    assert time.monotonic() - t0 < 2 and _rss_mb() - before < 200
    assert len(str(e.value).splitlines()) == 1 and "check: false" in str(e.value)


def test_the_same_point_without_the_check_is_not_refused_for_memory():
    wl = KERNELS["elementwise_fused"].build(n=HUGE)
    precheck.check_memory(wl, check=False)
    precheck.check_memory(wl, check="auto")      # the auto check runs only on small problems (api._auto_ok)


def test_small_budget_refuses_a_small_check(monkeypatch):
    """With a 1 MB budget a 2^18-element check (about 12 MB of arrays) is refused; nothing is run."""
    monkeypatch.setattr(precheck, "MAX_CHECK_BYTES", 1e6)
    monkeypatch.setattr("gpusim.backends.numpy_exec.check", lambda *a, **k: pytest.fail("the check ran"))
    with pytest.raises(precheck.WorkLimitError, match="exact check"):
        simulate("elementwise_fused", "h100", check=True, n=1 << 18)
    assert simulate("elementwise_fused", "h100", check=False, n=1 << 18).status == "ok"
    # raising max_work raises the limit with it (x100: 100 MB)
    monkeypatch.setattr("gpusim.backends.numpy_exec.check", lambda *a, **k: 0.0)
    r = simulate("elementwise_fused", "h100", check=True, n=1 << 18, max_work=100 * precheck.DEFAULT_MAX_WORK)
    assert r.status == "ok" and r.max_rel_err == 0.0


@pytest.mark.parametrize("name,params", [
    ("elementwise_fused", dict(n=1 << 16)), ("elementwise_chain", dict(n=1 << 16)),
    ("matmul", dict(M=128, N=128, K=128)), ("attention_flash", dict(batch=1, heads=2, seq_len=256)),
    ("attention_naive", dict(batch=1, heads=1, seq_len=256)), ("softmax", dict(rows=128, cols=512))])
def test_estimate_is_an_upper_bound_of_what_the_check_allocates(name, params):
    import tracemalloc

    from gpusim.backends import numpy_exec

    wl = KERNELS[name].build(params)
    tracemalloc.start()
    try:
        numpy_exec.check(wl, 0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    est = precheck.check_bytes(wl)
    assert peak <= est <= 4 * peak, (peak, est)


def test_huge_exact_check_in_a_run_is_one_error_row(tmp_path, capsys):
    s = tmp_path / "big.yaml"
    s.write_text(f"kernel: elementwise_fused\nparams: {{n: {HUGE}}}\ncheck: true\n")
    out = tmp_path / "out"
    before, t0 = _rss_mb(), time.monotonic()
    assert main(["run", str(s), "--out", str(out), "--no-plots", "--jobs", "1"]) == 1
    assert time.monotonic() - t0 < 5 and _rss_mb() - before < 200
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    row = next(csv.DictReader((out / "results.csv").open()))
    assert row["status"] == "error" and "exact check" in row["reason"] and "\n" not in row["reason"]
