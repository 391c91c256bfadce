"""``gpusim.sweep(kernel, gpu=..., jobs=..., **params_or_lists)``: a sweep from a notebook, as a
pandas DataFrame with the columns of results.csv (nothing is written to disk)."""
from __future__ import annotations

from .point import run_point


def _pandas():
    try:
        import pandas
    except ImportError:
        raise ImportError("gpusim.sweep() returns a pandas DataFrame and needs pandas: "
                          "pip install 'gpusim[pandas]'") from None
    return pandas


def sweep(kernel, gpu="h100", jobs: int = 1, check="auto", fidelity: str = "fast", **params):
    """Simulate every combination of the given values and return one DataFrame row per point.

    A list is swept (``seq_len=[512, 1024]``); anything else is fixed. ``kernel`` and ``gpu`` may
    be lists too; GPU what-ifs are keyword arguments named ``gpu.<field>``, e.g.
    ``**{"gpu.l2_bytes": [25e6, 50e6]}``; each becomes a ``gpu.<field>`` column. ``zip={...}`` sweeps
    coupled fields together, as a scenario's ``sweep: {zip: ...}`` does: ``zip={"gpu.sram_bytes_per_sm":
    [131072, 233472], "gpu.sram_bytes_per_cta_max": [101376, 232448]}`` is two points, not four.
    Inputs are validated as a scenario file is, and a bad one raises ``ScenarioError`` with the same
    one-line message. ``jobs`` > 1 uses processes."""
    pd = _pandas()
    from .runner import cap_jobs, collect, result_columns
    from .executors import run_pool
    from .scenario import load_scenario

    data = {"check": check, "fidelity": fidelity, "params": {}, "sweep": {}, "gpu_overrides": {}}
    for name, v in (("kernel", kernel), ("gpu", gpu)):
        if isinstance(v, (list, tuple)):
            data["sweep"][name] = list(v)
        else:
            data[name] = v
    for k, v in params.items():
        if k == "zip":
            data["sweep"]["zip"] = {n: list(x) if isinstance(x, tuple) else x for n, x in v.items()} \
                if isinstance(v, dict) else v
        elif isinstance(v, (list, tuple)):
            data["sweep"][k] = list(v)
        elif k.startswith("gpu."):
            data["gpu_overrides"][k[4:]] = v
        else:
            data["params"][k] = v
    sc = load_scenario("gpusim.sweep()", data=data)
    results = [None] * len(sc.points)

    def done(i, res):
        results[i] = res

    jobs, _ = cap_jobs(jobs)
    if jobs <= 1 or len(sc.points) <= 1:
        for i, pt in enumerate(sc.points):
            done(i, run_point(pt))
    else:
        run_pool(sc.points, jobs, done)
    records = {i: {"row": r[0], "kernels": []} for i, r in enumerate(results) if r is not None}
    rows, _ = collect(sc, records, list(range(len(sc.points))))
    return pd.DataFrame(rows, columns=result_columns(sc))
