"""The scenario model: YAML safety (duplicate keys, alias bombs, size), the published JSON Schema,
GPU paths relative to the scenario file, hardware what-ifs (``gpu.<field>``), the sweep-size
limit and the one ``--set`` parser."""
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpusim.cli import main
from gpusim.hardware import CONFIG_DIR, load_gpu
from gpusim import yamlio as low_yamlio
from gpusim.sweep import yamlio
from gpusim.sweep.errors import ScenarioError
from gpusim.sweep.scenario import MAX_POINTS, ScenarioFile, load_scenario
from gpusim.sweep.yamlio import parse_assignment

REPO = Path(__file__).resolve().parents[2]
TINY = "params: {batch: 1, heads: 1, seq_len: 128, head_dim: 16}\ncheck: false\n"
BOMB = "".join(f"{a}: &{a} [{', '.join([f'*{p}'] * 9 if p else ['x'] * 9)}]\n"
               for p, a in zip([None] + list("abcdefgh"), "abcdefghi"))   # 9**9 = 387M leaves


def _write(tmp_path, text, name="s.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _fails(capsys, argv, *needles):
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


# --------------------------------------------------------------------------- YAML safety
def test_duplicate_key_is_an_error(tmp_path, capsys):
    p = _write(tmp_path, "kernel: attention_flash\nparams: {seq_len: 128}\nkernel: matmul\n")
    _fails(capsys, ["run", str(p), "--out", str(tmp_path / "o")], "s.yaml", "line 3", "duplicate key 'kernel'",
           "first at line 1")
    p = _write(tmp_path, "kernel: attention_flash\nparams: {seq_len: 128, seq_len: 256}\n")
    _fails(capsys, ["run", str(p), "--out", str(tmp_path / "o")], "duplicate key 'seq_len'")


@pytest.mark.parametrize("sets", [[], ["params.head_dim=32"]], ids=["file", "with --set"])
def test_alias_bomb_is_refused_in_one_line(tmp_path, capsys, sets):
    """387 million values from a 330-byte file: refused before anything expands it."""
    p = _write(tmp_path, BOMB + "kernel: attention_flash\n" + TINY)
    assert p.stat().st_size < 500
    argv = ["run", str(p), "--out", str(tmp_path / "o")] + [x for s in sets for x in ("--set", s)]
    _fails(capsys, argv, "s.yaml", "aliases expand to more than", "alias bomb")
    assert not (tmp_path / "o").exists()


def test_small_aliases_are_fine_and_stay_shared(tmp_path):
    p = _write(tmp_path, "kernel: elementwise_fused\nsweep: {n: &ns [1024, 2048]}\ndescription: x\n")
    sc = load_scenario(p, ["params.BLOCK=256"])
    assert [pt.params["n"] for pt in sc.points] == [1024, 2048]


def test_recursive_alias_and_oversized_file(tmp_path, capsys, monkeypatch):
    p = _write(tmp_path, "kernel: attention_flash\ndescription: &d [*d]\n")
    _fails(capsys, ["run", str(p)], "s.yaml", "line 2", "refers to a node that contains it")
    monkeypatch.setattr(low_yamlio, "MAX_FILE_BYTES", 100)   # the bounded reader lives below sweep
    p = _write(tmp_path, "kernel: attention_flash\n" + "#" * 200 + "\n")
    _fails(capsys, ["run", str(p)], "s.yaml", "bytes", "at most 100 bytes")


def test_yaml_12_floats():
    assert yamlio.loads("a: 25e6\nb: 1.5e-3\nc: 12\nd: '1e3'") == {"a": 25e6, "b": 1.5e-3, "c": 12, "d": "1e3"}


def test_one_set_parser():
    assert parse_assignment("params.head_dim=128") == (["params", "head_dim"], 128)
    assert parse_assignment("gpu.l2_bytes=25e6") == (["gpu_overrides", "l2_bytes"], 25e6)
    assert parse_assignment("sweep.gpu.l2_bytes=[1e6, 2e6]") == (["sweep", "gpu.l2_bytes"], [1e6, 2e6])
    with pytest.raises(ScenarioError, match="expected KEY=VALUE"):
        parse_assignment("seq_len")
    with pytest.raises(ScenarioError, match="duplicate key"):
        parse_assignment("sweep={a: [1], a: [2]}")


# --------------------------------------------------------------------------- schema
def test_published_schema_is_the_generated_one(capsys):
    assert main(["schema"]) == 0
    printed = capsys.readouterr().out
    from gpusim.models.scenario import json_schema

    assert json.loads(printed) == json_schema(ScenarioFile.model_json_schema())   # kernel or model scenario
    published = (REPO / "docs" / "scenario.schema.json").read_text()
    assert json.loads(published) == json.loads(printed), "regenerate: python -m gpusim schema > docs/scenario.schema.json"


@pytest.mark.parametrize("path", sorted(str(p.relative_to(REPO)) for p in (REPO / "scenarios").rglob("*.yaml")))
def test_every_shipped_scenario_validates(path):
    from gpusim.models import scenario as model_scenario

    if path.startswith("scenarios/triton_public/"):       # @triton.jit kernels: triton and torch import them
        pytest.importorskip("torch")
        pytest.importorskip("triton")
    if model_scenario.is_model_scenario(REPO / path):      # model: and phase: instead of kernel:
        assert model_scenario.load(REPO / path).sweep
        return
    sc = load_scenario(REPO / path)
    assert sc.points
    ScenarioFile.model_validate(yamlio.read_yaml(REPO / path), context={"base_dir": (REPO / path).parent})


# --------------------------------------------------------------------------- GPU paths
def test_gpu_path_is_relative_to_the_scenario_file(tmp_path, monkeypatch):
    sub = tmp_path / "study"
    sub.mkdir()
    (sub / "mygpu.yaml").write_text((CONFIG_DIR / "h100.yaml").read_text().replace("sm_count: 132", "sm_count: 66"))
    p = _write(sub, "kernel: elementwise_fused\ngpu: mygpu.yaml\nparams: {n: 4096}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    sc = load_scenario(p)
    assert sc.points[0].config.sm_count == 66 and sc.points[0].gpu == "mygpu.yaml"


def test_missing_gpu_file_says_file_not_found(tmp_path, capsys):
    p = _write(tmp_path, "kernel: attention_flash\ngpu: gpus/nope.yaml\n")
    line = _fails(capsys, ["run", str(p), "--out", str(tmp_path / "o")], "s.yaml", "gpu", "gpus/nope.yaml",
                  "file not found")
    assert "unknown GPU" not in line


# --------------------------------------------------------------------------- hardware what-ifs
def test_sweep_over_a_gpu_field_records_the_overrides(tmp_path, capsys):
    p = _write(tmp_path, "kernel: elementwise_fused\nparams: {n: 65536}\ncheck: false\n"
                         "sweep: {gpu.l2_bytes: [25e6, 50e6]}\n")
    out = tmp_path / "o"
    assert main(["run", str(p), "--out", str(out), "--jobs", "1", "--no-plots",
                 "--set", "gpu.hbm_read_bandwidth_bytes_per_s=2e12"]) == 0, capsys.readouterr().err
    rows = list(csv.DictReader(open(out / "results.csv")))
    cols = list(rows[0])
    assert "gpu_overrides" not in cols
    # one column per GPU field, after the parameters and before the metrics
    assert cols[cols.index("BLOCK") + 1:cols.index("status")] == ["gpu.hbm_read_bandwidth_bytes_per_s", "gpu.l2_bytes"]
    assert [r["gpu.l2_bytes"] for r in rows] == ["25000000", "50000000"]
    assert {float(r["gpu.hbm_read_bandwidth_bytes_per_s"]) for r in rows} == {2e12}
    m = json.loads((out / "manifest.json").read_text())
    assert m["gpu_override_fields"] == ["hbm_read_bandwidth_bytes_per_s", "l2_bytes"]
    assert m["config_hashes"] == {"h100": load_gpu("h100").config_hash()}     # the named config
    sc = load_scenario(p, ["gpu.hbm_read_bandwidth_bytes_per_s=2e12"])
    assert [pt.config.l2_bytes for pt in sc.points] == [25_000_000, 50_000_000]
    assert len({pt.config_hash for pt in sc.points} | {load_gpu("h100").config_hash()}) == 3
    assert len({pt.key() for pt in sc.points}) == 2


def test_no_override_no_column(tmp_path):
    p = _write(tmp_path, "kernel: elementwise_fused\nparams: {n: 4096}\n")
    from gpusim.sweep.runner import result_columns

    assert not [c for c in result_columns(load_scenario(p)) if c.startswith("gpu.") or c == "gpu_overrides"]


@pytest.mark.parametrize("text,sets,needles", [
    ("sweep: {gpu.l2_bytes: [25e6, -1]}\n", [], ["sweep.gpu.l2_bytes[1]", "h100 with l2_bytes=-1", "greater than 0"]),
    ("sweep: {gpu.l2_byte: [1]}\n", [], ["sweep.gpu.l2_byte", "unknown GPU field", "did you mean 'l2_bytes'"]),
    ("", ["gpu.sram_bytes_per_sm=100000"], ["gpu_overrides (from --set gpu.sram_bytes_per_sm=100000)",
                                          "sram_bytes_per_cta_max cannot exceed sram_bytes_per_sm"]),
    ("", ["gpu.l2_bytes=lots"], ["gpu_overrides.l2_bytes (from --set gpu.l2_bytes=lots)", "l2_bytes", "'lots'"]),
    ("", ["gpu.sm_cnt=3"], ["gpu_overrides.sm_cnt (from --set gpu.sm_cnt=3)", "did you mean 'sm_count'"]),
])
def test_bad_gpu_override(tmp_path, capsys, text, sets, needles):
    p = _write(tmp_path, "kernel: attention_flash\n" + TINY + text)
    _fails(capsys, ["run", str(p), "--out", str(tmp_path / "o")] + [x for s in sets for x in ("--set", s)], *needles)


# --------------------------------------------------------------------------- size
def test_huge_sweep_is_refused_with_count_and_limit(tmp_path, capsys):
    """1.2 million points: one line with the count, the limit and the override, before any expansion."""
    p = _write(tmp_path, "kernel: elementwise_fused\n"
                         f"sweep: {{n: [{', '.join(str(1024 * (k + 1)) for k in range(1200))}], "
                         f"BLOCK: [{', '.join(['128', '256', '512', '1024'] * 250)}]}}\n")
    _fails(capsys, ["run", str(p), "--out", str(tmp_path / "o")], "s.yaml", "sweep", "1,200,000 points",
           f"limit of {MAX_POINTS:,}", "--max-points 1200000")
    with pytest.raises(ScenarioError, match="1,200,000 points"):
        load_scenario(p, max_points=1000)


def test_max_points_raises_the_limit(tmp_path, capsys):
    p = _write(tmp_path, "kernel: elementwise_fused\nsweep: {n: [1024, 2048, 4096]}\n")
    _fails(capsys, ["run", str(p), "--out", str(tmp_path / "o"), "--max-points", "2"], "3 points", "limit of 2")
    assert len(load_scenario(p, max_points=3).points) == 3


def test_schema_command_in_a_real_process():
    r = subprocess.run([sys.executable, "-m", "gpusim", "schema"], capture_output=True, text=True, cwd=REPO,
                       timeout=120)
    assert r.returncode == 0 and all(b["additionalProperties"] is False for b in json.loads(r.stdout)["anyOf"])


def test_large_expansion_shows_progress(tmp_path, capsys, monkeypatch):
    from gpusim.sweep import axes

    monkeypatch.setattr(axes, "SHOW_EXPANSION", 10)
    p = _write(tmp_path, "kernel: elementwise_fused\nsweep: {n: [1024, 2048, 4096, 8192, 16384], BLOCK: [128, 256]}\n")
    assert len(load_scenario(p).points) == 10
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 10 and lines[-1].startswith("gpusim expanding the sweep: 10/10 points (100%)")


def test_file_kernel_resolved_from_the_scenario_folder(tmp_path, capsys):
    """``kernel: path.py:name`` is relative to the scenario file; its own params are checked."""
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "rms.py").write_text((REPO / "scenarios" / "kernels" / "rmsnorm.py").read_text())
    p = tmp_path / "s.yaml"
    p.write_text("kernel: k/rms.py:rms_norm\nparams: {rows: 64, cols: 256}\ncheck: false\n")
    sc = load_scenario(p)
    assert [pt.kernel for pt in sc.points] == ["k/rms.py:rms_norm"]
    assert sc.points[0].kernel_ref == f"{(tmp_path / 'k' / 'rms.py').resolve()}:rms_norm"
    assert sc.points[0].kernel_hash
    p.write_text("kernel: k/rms.py:rms_norm\nparams: {rows: 64, seq_len: 256}\n")
    _fails(capsys, ["run", str(p), "--no-plots"], "params.seq_len", "k/rms.py:rms_norm", "rows, cols")
