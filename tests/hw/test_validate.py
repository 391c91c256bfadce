"""Validation without a GPU: analysis on synthetic rows, the report files, the sampled float64
reference, ncu output parsing and mapping, and a whole run with a stand-in GPU backend."""
import json
import os
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("GPUSIM_TRITON_TEST_DEVICE", "cpu") == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"     # before triton is imported

from gpusim import kernels
from gpusim.cli import main as cli_main
from gpusim.hw.validate import analysis, measure, ncu, predict, report, run  # noqa: E402
from gpusim.hw.validate import rows as vrows  # noqa: E402
from gpusim.backends import numpy_exec  # noqa: E402
from gpusim.hardware import load_gpu  # noqa: E402
from gpusim.sweep.scenario import load_scenario  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- statistics
def test_rankdata_average_ties():
    assert analysis.rankdata([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]


def test_spearman_against_hand_computed_values():
    # no ties: rho = 1 - 6 sum d^2 / (n (n^2 - 1)) = 1 - 6*2/60
    assert analysis.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # ties: ranks of y are 1, 2, 3.5, 5, 3.5; Pearson of ranks = 8 / sqrt(10 * 9.5)
    assert analysis.spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(8 / np.sqrt(95))
    assert analysis.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert analysis.spearman([1, 2, 3], [4, 4, 4]) is None
    assert analysis.spearman([1], [2]) is None


def test_error_stats_median_p90():
    s = analysis.error_stats([10, -20, 30, -40, 50, None])
    assert s["n"] == 5 and s["median_abs_pct"] == 30 and s["max_abs_pct"] == 50
    assert s["p90_abs_pct"] == pytest.approx(46.0)      # numpy linear: 40 + 0.6 * 10
    assert s["mean_signed_pct"] == pytest.approx(6.0)
    assert analysis.error_stats([])["median_abs_pct"] is None


def _row(point, meas, pred, bm, kernel="attention_flash", status="ok", group="g1", scope="point", launch=""):
    return {"point": point, "scope": scope, "launch": launch, "kernel": kernel, "gpu": "h200-measured",
            "BLOCK_M": bm, "BLOCK_N": 64, "seq_len": 4096, "group": group, "measured_us": meas,
            "measured_spread_pct": 1.0, "predicted_us": pred,
            "error_pct": (pred - meas) / meas * 100 if status == "ok" else None,
            "measured_dram_read_bytes": 100.0, "measured_dram_write_bytes": 50.0,
            "predicted_dram_read_bytes": 110.0, "predicted_dram_write_bytes": 50.0,
            "dram_error_pct": 10 / 150 * 100, "status": status, "reason": ""}


def _synthetic_rows():
    return [
        _row(0, 100.0, 110.0, 16),        # +10%
        _row(1, 80.0, 72.0, 32),          # -10%
        _row(2, 60.0, 75.0, 64),          # +25%   simulator ranks: p2 75, p1 72, p0 110 -> pick p1
        _row(3, 50.0, 90.0, 128, status="wrong-result"),
        _row(4, 200.0, 200.0, 64, group="g2", kernel="attention_naive"),
        _row(0, 100.0, 110.0, 16, scope="launch", launch="flash"),
        _row(4, 150.0, 120.0, 64, group="g2", kernel="attention_naive", scope="launch", launch="qk"),
    ]


def test_analyze_synthetic_rows():
    s = analysis.analyze(_synthetic_rows())
    assert s["counts"]["points"] == 5 and s["counts"]["by_status"] == {"ok": 4, "wrong-result": 1}
    assert s["counts"]["compared_points"] == 4
    tp = s["time_error"]["point"]
    assert tp["n"] == 4 and tp["median_abs_pct"] == pytest.approx(10.0)
    assert tp["p90_abs_pct"] == pytest.approx(np.percentile([10, 10, 25, 0], 90))
    assert s["time_error"]["launch"]["n"] == 2
    assert set(s["time_error"]["point_by_kernel"]) == {"attention_flash", "attention_naive"}
    assert "attention_naive/qk" in s["time_error"]["launch_by_kernel"]
    (g,) = s["tile_groups"]                       # g2 has one point: no group
    assert g["group"] == "g1" and g["n"] == 3
    # measured order p2 < p1 < p0, predicted order p1 < p2 < p0: rho = 1 - 6*2/24 = 0.5
    assert g["spearman"] == pytest.approx(0.5)
    assert g["measured_best_point"] == 2 and g["sim_best_point"] == 1
    assert not g["sim_pick_is_best"] and not g["sim_pick_within_5pct"]
    assert g["sim_pick_loss_pct"] == pytest.approx((80 / 60 - 1) * 100)
    assert "BLOCK_M=32" in g["sim_best_tile"]
    assert s["tile_summary"]["mean_spearman"] == pytest.approx(0.5)
    assert s["dram"]["point"]["median_abs_pct"] == pytest.approx(10 / 150 * 100)
    assert s["dram"]["point"]["read"]["median_abs_pct"] == pytest.approx(10.0)
    assert s["problems"] == [{"point": 3, "kernel": "attention_flash", "status": "wrong-result", "reason": ""}]


def test_best_config_within_5pct():
    rows = [_row(0, 100.0, 50.0, 16), _row(1, 98.0, 60.0, 32), _row(2, 150.0, 70.0, 64)]
    (g,) = analysis.analyze(rows)["tile_groups"]
    assert g["sim_best_point"] == 0 and g["measured_best_point"] == 1
    assert not g["sim_pick_is_best"] and g["sim_pick_within_5pct"]


def test_write_report_files_and_csv_roundtrip(tmp_path):
    rows = _synthetic_rows()
    summary = analysis.analyze(rows)
    written = report.write_report(tmp_path, rows, summary, {"scenario_name": "synthetic", "gpu": "h200-measured"})
    names = {p.name for p in written}
    assert {"validation.csv", "summary.md", "summary.json", "scatter.png", "error_by_point.png"} <= names
    for p in written:
        assert p.stat().st_size > 0
    md = (tmp_path / "summary.md").read_text()
    assert "Spearman" in md and "wrong-result" in md and "| per point | 4 |" in md
    back = vrows.load_rows(tmp_path / "validation.csv")
    assert len(back) == len(rows)
    assert back[0]["scope"] == "point" and back[0]["measured_us"] == 100.0
    again = analysis.analyze(back)
    assert again["time_error"] == summary["time_error"]
    assert again["tile_groups"][0]["spearman"] == pytest.approx(0.5)


# --------------------------------------------------------------------------- references
@pytest.mark.parametrize("causal", [False, True])
def test_sampled_attention_reference_matches_full(causal):
    wl = kernels.build("attention_flash", dict(batch=2, heads=3, seq_len=96, head_dim=32, causal=causal))
    inputs = numpy_exec.random_inputs(wl, 5)
    full = numpy_exec.reference(wl, inputs)["o"]
    refs, how = measure.sampled_reference(wl, inputs, rows=16, force_sample=True)
    assert how == "sampled"
    idx, ref = refs["o"]
    assert ref.shape == (2, 16, 32)
    np.testing.assert_allclose(full[idx], ref, rtol=1e-12, atol=1e-12)
    refs, how = measure.sampled_reference(wl, inputs)           # small: the full reference
    assert how == "full" and np.array_equal(refs["o"][1], full)


def test_sampled_matmul_reference_and_large_switch(monkeypatch):
    wl = kernels.build("matmul", dict(M=64, N=48, K=32, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16))
    inputs = numpy_exec.random_inputs(wl, 1)
    full = numpy_exec.reference(wl, inputs)["c"]
    monkeypatch.setattr(measure, "BIG_MATMUL", 1000)
    refs, how = measure.sampled_reference(wl, inputs, rows=8)
    assert how == "sampled"
    idx, ref = refs["c"]
    np.testing.assert_allclose(full[idx], ref, rtol=1e-12)
    err, how = measure.check_outputs(wl, {"c": full.astype(np.float16)}, inputs)
    assert how == "sampled" and err < 1e-3


# --------------------------------------------------------------------------- a whole run, stand-in GPU
class FakeBackend:
    """The numpy executor as the 'GPU'; times are a fixed function of the tile sizes."""

    name = "fake"

    def __init__(self, corrupt=False):
        self.corrupt = corrupt
        self.timed = 0

    def run(self, workload, inputs):
        mem = numpy_exec.execute(workload, inputs)
        if self.corrupt:
            for n in workload.outputs:
                mem[n] = mem[n] * 1.1
        return mem

    def time(self, workload, inputs):
        self.timed += 1
        p = workload.params
        per = {}
        for i, la in enumerate(workload.launches):
            per[la.name] = 10.0 + p.get("BLOCK_M", 64) / 8 + i + 0.1 * self.timed
        return {"total_us": sum(per.values()) + 2.0, "per_launch_us": per}

    def torch_attention(self, params):
        return {"eager_us": 123.0, "sdpa_us": 45.0}

    def environment(self):
        return {"backend": "fake", "device": "numpy"}


SCENARIO = """
name: tiny-validate
gpu: h200
kernel: attention_flash
params: {batch: 1, heads: 2, seq_len: 64, head_dim: 32, dtype: fp16, BLOCK_N: 32, num_stages: 2}
sweep:
  BLOCK_M: [16, 32, 64]
"""


def test_run_validation_end_to_end_and_resimulate(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    sc = load_scenario(path)
    cfg = load_gpu("h200")
    out = tmp_path / "val"
    records, meta = run.run_validation(sc, cfg, out, FakeBackend(), ncu=False, reference=True, jobs=1)
    assert [r["status"] for r in records] == ["ok"] * 3
    assert all(r["check"] == "full" and r["max_rel_err"] < 5e-3 for r in records)
    assert records[0]["measured"]["total_us"] == [pytest.approx(10 + 2 + 2 + 0.1), pytest.approx(10 + 2 + 2 + 0.2)]
    assert records[0]["reference"] == {"eager_us": 123.0, "sdpa_us": 45.0}
    assert all(r["predicted"]["status"] == "ok" for r in records)
    saved = json.loads((out / "validation.json").read_text())
    assert saved["gpu"] == "h200" and saved["gpu_config_hash"] == cfg.config_hash()
    assert len(saved["points"]) == 3 and saved["points"][1]["params"]["BLOCK_M"] == 32

    rows = vrows.build_rows(records, cfg.name, list(sc.param_names))
    assert [r["scope"] for r in rows] == ["point", "launch"] * 3
    assert rows[0]["reference_sdpa_us"] == 45.0 and rows[0]["measured_spread_pct"] > 0
    summary = analysis.analyze(rows)
    assert summary["counts"]["compared_points"] == 3 and len(summary["tile_groups"]) == 1
    report.write_report(out, rows, summary, meta)
    assert (out / "summary.md").exists() and (out / "scatter.png").exists()

    assert vrows.rows_from_json(out) == rows
    again = predict.resimulate(out / "validation.json", "h100")
    assert len(again) == len(rows)
    assert [r["measured_us"] for r in again] == [r["measured_us"] for r in rows]
    assert again[0]["predicted_us"] != rows[0]["predicted_us"] and again[0]["gpu"] == "h100"
    same = predict.resimulate(out, cfg)
    assert [r["predicted_us"] for r in same] == pytest.approx([r["predicted_us"] for r in rows])

    assert cli_main(["validate", "--reanalyze", str(out), "--out", str(tmp_path / "re")]) == 0
    assert (tmp_path / "re" / "validation.csv").read_text() == (out / "validation.csv").read_text()


def test_wrong_result_is_not_timed():
    be = FakeBackend(corrupt=True)
    rec = measure.measure_point("attention_flash", kernels.resolve_params(
        "attention_flash", dict(batch=1, heads=1, seq_len=32, head_dim=16, BLOCK_M=16, BLOCK_N=16)), be)
    assert rec["status"] == "wrong-result" and rec["measured"] is None and be.timed == 0
    assert rec["max_rel_err"] > 0.05


def test_deadline_skips_points(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    records, _ = run.run_validation(load_scenario(path), load_gpu("h200"), tmp_path / "v", FakeBackend(), ncu=False,
                                    deadline=0.0, jobs=1)
    assert {r["status"] for r in records} == {"skipped"}
    rows = vrows.build_rows(records, "h200")
    assert analysis.analyze(rows)["counts"]["by_status"] == {"skipped": 3}


def test_a_kernel_file_is_found_relative_to_its_scenario(tmp_path, monkeypatch):
    """``kernel: file.py:name`` in a validation scenario resolves against the scenario's folder when
    measuring, predicting and re-analysing (it was looked up in the working directory)."""
    import shutil

    sub = tmp_path / "micro"
    sub.mkdir()
    shutil.copy(ROOT / "benchmarks" / "kernels" / "chain_dot.py", sub / "chain_dot.py")
    (sub / "s.yaml").write_text("name: chain\ngpu: h200\nkernel: chain_dot.py:chain_dot\n"
                                "params: {ctas: 2, trips: 2, BLOCK_M: 64, BLOCK_N: 16, D: 16}\n"
                                "sweep:\n  num_warps: [4, 8]\ncheck: true\n")
    monkeypatch.chdir(tmp_path)
    records, _ = run.run_validation(load_scenario("micro/s.yaml"), load_gpu("h200"), tmp_path / "v", FakeBackend(),
                                    ncu=False, jobs=1)
    assert [r["kernel"] for r in records] == ["micro/chain_dot.py:chain_dot"] * 2
    assert {r["status"] for r in records} == {"ok"} and all(r["predicted"]["status"] == "ok" for r in records)
    rows = predict.resimulate(tmp_path / "v" / "validation.json", "h200")
    assert {r["status"] for r in rows if r["scope"] == "point"} == {"ok"}


def test_status_combination():
    ok_pred = {"status": "ok", "total_us": 1.0}
    assert vrows.combined_status({"status": "ok", "predicted": ok_pred}) == ("ok", "")
    assert vrows.combined_status({"status": "ok", "predicted": {"status": "infeasible", "reason": "sram"}}) == \
        ("sim-infeasible", "sram")
    st, _ = vrows.combined_status({"status": "gpu-error", "reason": "run: OutOfResources: shared memory",
                                   "predicted": {"status": "infeasible", "reason": "sram"}})
    assert st == "infeasible"
    assert vrows.combined_status({"status": "gpu-error", "reason": "run: boom", "predicted": ok_pred})[0] == "gpu-error"


# --------------------------------------------------------------------------- ncu
NCU_HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
              '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def _ncu_row(kid, name, metric, value, unit="byte"):
    return (f'"{kid}","1","python3","h","{name}","1","7","(128, 1, 1)","(8, 2, 1)","0","9.0","Command line '
            f'profiler metrics","{metric}","{unit}","{value}"')


def test_parse_ncu_csv_and_assign():
    lines = ["==PROF== Connected to process 1", "some program output", NCU_HEADER]
    lines += [_ncu_row(0, "void at::native::vectorized_elementwise_kernel<4>(int)", "dram__bytes_read.sum", "0")]
    for kid, name, r in ((1, "qk_kernel", "1,048,576"), (2, "flash_kernel", "2,000"), (3, "flash_kernel", "3")):
        lines.append(_ncu_row(kid, name, "dram__bytes_read.sum", r))
        lines.append(_ncu_row(kid, name, "dram__bytes_write.sum", "1", unit="Kbyte"))
        lines.append(_ncu_row(kid, name, "lts__t_bytes.sum", "n/a"))
    ks = ncu.parse_ncu_csv("\n".join(lines))
    assert [k["kernel"] for k in ks] == ["void at::native::vectorized_elementwise_kernel<4>", "qk_kernel",
                                         "flash_kernel", "flash_kernel"]
    assert ks[1]["metrics"]["dram__bytes_read.sum"] == 1048576.0
    assert ks[1]["metrics"]["dram__bytes_write.sum"] == 1000.0
    assert ks[1]["metrics"]["lts__t_bytes.sum"] is None
    ok = {"status": "ok", "launched": 1}
    got = ncu.assign_ncu(ks, [(4, ["qk_kernel"]), (7, ["flash_kernel"]), (9, ["flash_kernel"])],
                         {4: ok, 7: ok, 9: ok})
    assert got[4]["launches"][0]["dram_read_bytes"] == 1048576.0
    assert got[9]["launches"][0]["dram_read_bytes"] == 3.0
    # a failed point that launched nothing is skipped over; a mismatch breaks the rest
    got = ncu.assign_ncu(ks, [(4, ["qk_kernel"]), (5, ["matmul_kernel"]), (7, ["flash_kernel"])],
                         {4: ok, 5: {"status": "error", "reason": "x", "launched": 0}, 7: ok})
    assert "launches" in got[4] and "error" in got[5] and "launches" in got[7]
    got = ncu.assign_ncu(ks, [(4, ["flash_kernel"]), (7, ["qk_kernel"])], {4: ok, 7: ok})
    assert "mismatch" in got[4]["error"] and "error" in got[7]
    assert ncu.parse_ncu_csv("no csv here") == []


def test_select_ncu_points_cap():
    recs = [{"index": i, "status": "ok", "measured": {"total_us": [1.0]}} for i in range(10)]
    recs[3]["status"] = "wrong-result"
    sel, skipped = ncu.select_ncu_points(recs, 4)
    assert len(sel) == 4 and sel[0] == 0 and sel[-1] == 9 and 3 not in sel
    assert sorted(sel + skipped) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert ncu.select_ncu_points(recs, 24) == ([0, 1, 2, 4, 5, 6, 7, 8, 9], [])


FAKE_NCU = r'''#!{python}
import json, sys
from gpusim.kernels import build
from gpusim.toolchain.lower import kernel_name
spec = json.load(open(sys.argv[-1]))
assert sys.argv[1:3] == ["--clock-control", "none"], sys.argv
assert sys.argv[-5:-1] == ["-m", "gpusim", "validate", "--ncu-points"], sys.argv
print("==PROF== Connected to process 1")
print({header!r})
kid = 0
def row(name, metric, value):
    global kid
    print('"%d","1","p","h","%s","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","s","%s","byte","%s"' % (kid, name, metric, value))
for p in spec["points"]:
    row("void at::native::fill_kernel(int)", "dram__bytes_read.sum", "5")
    kid += 1
    launches = build(p["kernel"], p["params"]).launches
    for la in launches:
        for m in ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum"):
            row(kernel_name(la.program), m, "{{:,}}".format(1000 * (p["index"] + 1)))
        kid += 1
    sys.stderr.write("GPUSIM_NCU_POINT " + json.dumps({{"index": p["index"], "status": "ok", "launched": len(launches)}}) + "\n")
'''


def test_run_ncu_with_a_stand_in_ncu(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable, header=NCU_HEADER))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    p_naive = kernels.resolve_params("attention_naive", dict(batch=1, heads=1, seq_len=64, head_dim=32))
    p_flash = kernels.resolve_params("attention_flash", dict(batch=1, heads=1, seq_len=64, head_dim=32))
    recs = [{"index": 0, "kernel": "attention_naive", "params": p_naive, "status": "ok"},
            {"index": 1, "kernel": "attention_flash", "params": p_flash, "status": "ok"}]
    meta = ncu.run_ncu(recs, [0, 1], tmp_path)
    assert meta["disabled"] is None and meta["batches"][0]["kernels_profiled"] == 7   # 2 fills + 4 + 1
    assert [x["dram_read_bytes"] for x in recs[0]["ncu"]["launches"]] == [1000.0] * 4
    assert recs[1]["ncu"]["launches"][0]["dram_write_bytes"] == 2000.0
    recs[0]["predicted"] = {"status": "ok", "total_us": 1.0, "dram_read_bytes": 3000.0, "dram_write_bytes": 1000.0,
                            "launches": []}
    recs[0]["measured"] = {"total_us": [1.0], "per_launch_us": {}, "launch_names": []}
    rows = vrows.build_rows(recs[:1], "h200")
    assert rows[0]["measured_dram_read_bytes"] == 4000.0 and rows[0]["dram_error_pct"] == pytest.approx(-50.0)


def test_ncu_unavailable_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(ncu.shutil, "which", lambda name: None)
    recs = [{"index": 0, "kernel": "matmul", "params": {}, "status": "ok"}]
    assert ncu.run_ncu(recs, [0], tmp_path)["disabled"] == "ncu not on PATH"


def test_ncu_point_entry_runs_launches_on_the_interpreter(capfd):
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs the Triton interpreter (TRITON_INTERPRET=1 before triton is imported)")
    p = kernels.resolve_params("elementwise_chain", dict(n=256, BLOCK=128))
    spec = json.dumps({"device": "cpu", "points": [{"index": 3, "kernel": "elementwise_chain", "params": p}]})
    assert ncu.ncu_points_entry(spec) == 0
    err = capfd.readouterr().err
    st = json.loads(err.split(ncu.POINT_TAG, 1)[1].splitlines()[0])
    assert st["index"] == 3 and st["status"] == "ok" and st["launched"] == 3
    assert st["kernels"] == ["mul_kernel", "bias_kernel", "relu_kernel"]


def test_main_args_shape():
    from gpusim.cli import build_parser

    a = build_parser().parse_args(["validate", "s.yaml", "--out", "d"])
    assert a.gpu is None and a.no_ncu is False and a.reference is False and a.reanalyze is None
    assert run.ncu_max_of(a) == ncu.NCU_MAX_DEFAULT


def test_compiler_mismatch_names_both_versions(monkeypatch):
    """Re-predicting with compiled resources says when this machine's Triton is not the one that
    built the measured kernels, and says nothing when they agree or nothing is compiled."""
    triton = pytest.importorskip("triton")
    from gpusim.hw.validate.predict import compiler_mismatch

    monkeypatch.setenv("GPUSIM_RESOURCES", "compiled")
    other = {"environment": {"triton": "0.0.1"}}
    note = compiler_mismatch(other)
    assert note is not None and "triton 0.0.1" in note and f"triton {triton.__version__}" in note
    assert compiler_mismatch({"environment": {"triton": triton.__version__}}) is None
    assert compiler_mismatch({}) is None
    monkeypatch.setenv("GPUSIM_RESOURCES", "estimated")
    assert compiler_mismatch(other) is None
