"""No stale results: every saved point and manifest says which code and config computed it; a
changed model or GPU config recomputes instead of serving cached numbers; an --out holding
another scenario's results is refused unless --force, which says what it removed."""
import csv
import json
import subprocess
from pathlib import Path

import gpusim
from gpusim import provenance
from gpusim.cli import main
from gpusim.sweep import runner
from gpusim.sweep.runner import run_scenario
from gpusim.sweep.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
_real_run_point = runner.run_point


def _write(tmp_path, text, name="s.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _times(out):
    return [r["time_us"] for r in csv.DictReader(open(Path(out) / "results.csv"))]


def test_code_hash_covers_the_package_source():
    h = provenance.code_hash()
    assert len(h) == 16 and h == provenance.code_hash()
    provenance.code_hash.cache_clear()
    assert provenance.code_hash() == h                     # deterministic


def test_points_and_manifest_record_provenance(tmp_path):
    p = _write(tmp_path, "name: prov\nkernel: elementwise_fused\nsweep: {n: [1024, 2048]}\n")
    out = tmp_path / "out"
    run_scenario(load_scenario(p), out, jobs=1)
    m = json.loads((out / "manifest.json").read_text())
    assert m["code_hash"] == provenance.code_hash() and m["scenario_name"] == "prov"
    assert m["git_dirty"] in (True, False, None) and m["gpusim_version"] == gpusim.__version__
    git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    if git.returncode == 0:
        assert m["git_revision"] == git.stdout.strip() and m["git_dirty"] in (True, False)
    for f in (out / "points").glob("*.json"):
        d = json.loads(f.read_text())
        assert d["provenance"] == {"code_hash": m["code_hash"], "git_revision": m["git_revision"],
                                   "git_dirty": m["git_dirty"], "gpusim_version": gpusim.__version__}
        assert d["config_hash"] == gpusim.load_gpu("h100").config_hash() and d["scenario"] == "prov"


def _slower(pt, timeline=False):
    """A "changed model": the same point, 10x the time (the rates derived from it follow, or the
    re-run's physics check on saved points would recompute it)."""
    row, krows, r = _real_run_point(pt, timeline)
    return dict(row, time_us=row["time_us"] * 10, tflops=row["tflops"] / 10, dram_gbps=row["dram_gbps"] / 10), krows, r


def test_changed_model_is_recomputed_on_resume(tmp_path, monkeypatch):
    p = _write(tmp_path, "kernel: elementwise_fused\nsweep: {n: [1024, 2048, 4096]}\n")
    out = tmp_path / "out"
    run_scenario(load_scenario(p), out, jobs=1)
    before = _times(out)
    # the cost function changes ...
    monkeypatch.setattr(runner, "run_point", _slower)
    # ... and so does the code it lives in: the resumed run recomputes every point
    monkeypatch.setattr(provenance, "code_hash", lambda: "a-changed-model")
    run_scenario(load_scenario(p), out, jobs=1)
    after = _times(out)
    assert json.loads((out / "manifest.json").read_text())["computed"] == 3
    assert [float(a) for a in after] == [10 * float(b) for b in before]
    # the same code again: everything comes from the saved points
    run_scenario(load_scenario(p), out, jobs=1)
    assert json.loads((out / "manifest.json").read_text())["computed"] == 0 and _times(out) == after


def test_saved_point_from_other_code_is_not_reused_even_under_its_key(tmp_path, monkeypatch):
    """A point file whose recorded code hash differs is recomputed, whatever its file name."""
    p = _write(tmp_path, "kernel: elementwise_fused\nparams: {n: 1024}\n")
    out = tmp_path / "out"
    run_scenario(load_scenario(p), out, jobs=1)
    f = next((out / "points").glob("*.json"))
    d = json.loads(f.read_text())
    d["provenance"]["code_hash"] = "0" * 16
    f.write_text(json.dumps(d))
    run_scenario(load_scenario(p), out, jobs=1)
    assert json.loads((out / "manifest.json").read_text())["computed"] == 1


def test_changed_gpu_override_is_recomputed(tmp_path):
    p = _write(tmp_path, "kernel: elementwise_fused\nparams: {n: 1048576}\ncheck: false\n")
    out = tmp_path / "out"
    run_scenario(load_scenario(p, ["gpu.hbm_read_bandwidth_bytes_per_s=4e12"]), out, jobs=1)
    fast = _times(out)
    run_scenario(load_scenario(p, ["gpu.hbm_read_bandwidth_bytes_per_s=1e12"]), out, jobs=1)
    assert json.loads((out / "manifest.json").read_text())["computed"] == 1
    assert float(_times(out)[0]) > float(fast[0])


def test_out_of_another_scenario_is_refused_then_replaced_with_force(tmp_path, capsys):
    a = _write(tmp_path, "name: first\nkernel: elementwise_fused\nsweep: {n: [1024, 2048]}\n", "a.yaml")
    b = _write(tmp_path, "name: second\nkernel: elementwise_fused\nparams: {n: 4096}\n", "b.yaml")
    out = tmp_path / "out"
    assert main(["run", str(a), "--out", str(out), "--jobs", "1"]) == 0
    plots = [f.name for f in out.glob("*.png")]
    assert plots
    (out / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main(["run", str(b), "--out", str(out), "--jobs", "1", "--no-plots"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "holds the results of scenario 'first'" in err and "--force" in err
    assert len(list((out / "points").glob("*.json"))) == 2            # nothing was touched
    assert main(["run", str(b), "--out", str(out), "--jobs", "1", "--no-plots", "--force"]) == 0
    err = capsys.readouterr().err
    assert "--force: removed 2 saved point(s), results.csv, kernels.csv, manifest.json" in err
    for name in plots:
        assert name in err and not (out / name).exists()
    assert (out / "notes.txt").read_text() == "mine"                  # not gpusim's: kept
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert [r["n"] for r in rows] == ["4096"] and len(list((out / "points").glob("*.json"))) == 1
    assert json.loads((out / "manifest.json").read_text())["scenario_name"] == "second"


def test_same_scenario_longer_sweep_reuses_its_out(tmp_path, capsys):
    a = _write(tmp_path, "name: ew\nkernel: elementwise_fused\nsweep: {n: [1024]}\n", "a.yaml")
    b = _write(tmp_path, "name: ew\nkernel: elementwise_fused\nsweep: {n: [1024, 2048]}\n", "b.yaml")
    out = tmp_path / "out"
    assert main(["run", str(a), "--out", str(out), "--jobs", "1", "--no-plots"]) == 0
    assert main(["run", str(b), "--out", str(out), "--jobs", "1", "--no-plots"]) == 0
    assert json.loads((out / "manifest.json").read_text())["computed"] == 1
