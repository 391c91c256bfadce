"""The command line: every input mistake is one line on stderr naming the file, the field path,
the bad value and what is allowed, with exit code 2 and no traceback; run exit codes (0 ok or
infeasible, 1 when a point errored); --set; the progress bar staying quiet off a terminal."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpusim.sweep import executors
from gpusim.cli import main
from gpusim.hardware import CONFIG_DIR

REPO = Path(__file__).resolve().parent.parent
TINY = "params: {batch: 1, heads: 1, seq_len: 128, head_dim: 16}\ncheck: false\n"


def _write(tmp_path, text, name="bad.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _fails(capsys, argv, *needles):
    """Run the CLI, expect exit 2 and a single stderr line containing every needle."""
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


def _gpu_yaml(tmp_path, old, new, name="mygpu.yaml"):
    text = (CONFIG_DIR / "h100.yaml").read_text()
    assert old in text
    p = tmp_path / name
    p.write_text(text.replace(old, new))
    return p


BAD_SCENARIOS = [
    ("unknown top-level key", "kernel: attention_flash\nsweeps: {seq_len: [512]}\n",
     ["sweeps", "unknown key", "did you mean 'sweep'", "allowed: name, description, gpu, kernel"]),
    ("parameter at top level", "kernel: attention_flash\nhead_dim: 128\n",
     ["head_dim", "did you mean 'params.head_dim'"]),
    ("unknown param", "kernel: attention_flash\nparams: {seqlen: 1024}\n",
     ["params.seqlen", "unknown parameter", "did you mean 'seq_len'", "takes: batch, heads, seq_len"]),
    ("string for int", "kernel: attention_flash\nparams: {seq_len: abc}\n",
     ["params.seq_len", "'abc'", "must be an integer"]),
    ("float for int", "kernel: matmul\nparams: {M: 12.5}\n", ["params.M", "12.5", "integer"]),
    ("int for bool", "kernel: attention_flash\nparams: {causal: 1}\n",
     ["params.causal", "got 1", "true or false"]),
    ("int for check", "kernel: attention_flash\ncheck: 1\n", ["check", "got 1", "auto, true or false"]),
    ("bad fidelity", "kernel: attention_flash\nfidelity: exact\n", ["fidelity", "'exact'", "fast or full"]),
    ("negative size", "kernel: attention_flash\nparams: {head_dim: -64}\n",
     ["params.head_dim", "-64", "positive integer"]),
    ("zero size", "kernel: attention_flash\nparams: {batch: 0}\n", ["params.batch", "got 0", "positive integer"]),
    ("zero size in a sweep", "kernel: elementwise_fused\nsweep: {n: [1024, 0]}\n",
     ["sweep.n[1]", "got 0", "positive integer"]),
    ("no value", "kernel: attention_flash\nparams: {seq_len: }\n",
     ["params.seq_len", "no value", "positive integer"]),
    ("unknown kernel", "kernel: flash_attn\n",
     ["kernel", "'flash_attn'", "available: attention_naive, attention_flash"]),
    ("unknown kernel in a sweep", "sweep: {kernel: [attention_flash, matmull]}\n",
     ["sweep.kernel[1]", "'matmull'", "did you mean 'matmul'", "available:"]),
    ("missing kernel", "gpu: h100\n", ["kernel", "missing", "attention_flash"]),
    ("unknown GPU", "kernel: attention_flash\ngpu: h1000\n",
     ["gpu", "'h1000'", "did you mean 'h100'", "available: a100"]),
    ("GPU not a string", "kernel: attention_flash\nsweep: {gpu: [h100, 7]}\n", ["sweep.gpu[1]", "got 7"]),
    ("param the kernel does not take", "kernel: attention_flash\nparams: {M: 128}\n",
     ["params.M", "attention_flash does not take 'M'", "parameters: batch"]),
    ("swept param the kernel does not take", "kernel: attention_flash\nsweep: {BLOCK: [128, 256]}\n",
     ["sweep.BLOCK", "does not take 'BLOCK'", "parameters: batch"]),
    ("empty sweep list", "kernel: attention_flash\nsweep: {seq_len: []}\n",
     ["sweep.seq_len", "empty list", "at least one value"]),
    ("sweep value not a list", "kernel: attention_flash\nsweep: {seq_len: 512}\n",
     ["sweep.seq_len", "must be a list", "got 512"]),
    ("sweep not a mapping", "kernel: attention_flash\nsweep: [seq_len, 512]\n",
     ["sweep", "must be a mapping", "['seq_len', 512]"]),
    ("params not a mapping", "kernel: attention_flash\nparams: 4096\n", ["params", "must be a mapping", "4096"]),
    ("unknown sweep field", "kernel: attention_flash\nsweep: {seqlen: [1, 2]}\n",
     ["sweep.seqlen", "did you mean 'seq_len'", "sweepable: gpu, kernel"]),
    ("tile not a power of two", "kernel: attention_flash\nparams: {BLOCK_M: 48}\n",
     ["params.BLOCK_M", "got 48", "one of 16, 32, 64, 128, 256"]),
    ("swept tile not a power of two", "kernel: attention_flash\nsweep: {BLOCK_N: [16, 24]}\n",
     ["sweep.BLOCK_N[1]", "got 24", "one of 16, 32, 64, 128, 256"]),
    ("num_stages out of range", "kernel: matmul\nparams: {num_stages: 9}\n",
     ["params.num_stages", "got 9", "one of 1, 2, 3, 4, 5"]),
    ("bad dtype", "kernel: attention_flash\nparams: {dtype: fp8}\n",
     ["params.dtype", "'fp8'", "one of fp16, bf16, fp32"]),
    ("YAML syntax error", "kernel: attention_flash\nparams: {seq_len: 512\nsweep: x\n",
     ["YAML syntax error", "line 3"]),
    ("not a mapping", "- kernel: attention_flash\n", ["expected a mapping", "got a list"]),
    ("empty file", "", ["empty"]),
]


@pytest.mark.parametrize("text,needles", [c[1:] for c in BAD_SCENARIOS], ids=[c[0] for c in BAD_SCENARIOS])
def test_bad_scenario_is_one_line_exit_2(tmp_path, capsys, text, needles):
    p = _write(tmp_path, text)
    line = _fails(capsys, ["run", str(p), "--out", str(tmp_path / "out"), "--no-plots"], "bad.yaml", *needles)
    assert line.startswith("gpusim: error: ")
    assert not (tmp_path / "out").exists()          # nothing is started before the input is valid


def test_gpu_yaml_with_negative_field(tmp_path, capsys):
    g = _gpu_yaml(tmp_path, "sm_count: 132", "sm_count: -4")
    p = _write(tmp_path, f"kernel: attention_flash\ngpu: {g}\n")
    _fails(capsys, ["run", str(p), "--out", str(tmp_path / "o")],
           "bad.yaml", "gpu", "mygpu.yaml", "sm_count", "-4", "greater than 0")


def test_gpu_yaml_with_extra_field(tmp_path, capsys):
    g = _gpu_yaml(tmp_path, "sm_count: 132", "sm_count: 132\nsm_cnt: 3")
    p = _write(tmp_path, f"kernel: attention_flash\nsweep: {{gpu: [h100, {g}]}}\n")
    _fails(capsys, ["run", str(p), "--out", str(tmp_path / "o")],
           "bad.yaml", "sweep.gpu[1]", "mygpu.yaml", "unknown field 'sm_cnt'", "did you mean 'sm_count'",
           "GPU fields: name, description, sm_count")


def test_missing_file(tmp_path, capsys):
    _fails(capsys, ["run", str(tmp_path / "nope.yaml")], "nope.yaml", "file not found")


def test_directory_instead_of_file(tmp_path, capsys):
    _fails(capsys, ["run", str(tmp_path)], str(tmp_path), "is a directory")


def test_binary_file(tmp_path, capsys):
    p = tmp_path / "bin.yaml"
    p.write_bytes(b"\xff\xfe\x00\x01binary")
    _fails(capsys, ["run", str(p)], "bin.yaml", "not a text file")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file(tmp_path, capsys):
    p = _write(tmp_path, "kernel: attention_flash\n")
    p.chmod(0)
    _fails(capsys, ["run", str(p)], "bad.yaml", "cannot read", "Permission denied")


def test_out_under_a_regular_file(tmp_path, capsys):
    p = _write(tmp_path, "kernel: attention_flash\n" + TINY, "ok.yaml")
    f = tmp_path / "afile"
    f.write_text("x")
    _fails(capsys, ["run", str(p), "--out", str(f / "sub")], "--out", "afile/sub", "cannot write there")
    _fails(capsys, ["run", str(p), "--out", str(f)], "--out", "afile", "cannot write there")


@pytest.mark.parametrize("setting,needles", [
    ("params.head_dim", ["--set 'params.head_dim'", "expected KEY=VALUE", "params.head_dim=128"]),
    ("=128", ["--set '=128'", "empty field path"]),
    ("sweep.seq_len=[512,", ["sweep.seq_len", "'[512,'", "not valid YAML"]),
    ("params.seq_len.x=1", ["params.seq_len is 128", "not a mapping"]),
    ("params.seq_len=abc", ["ok.yaml", "params.seq_len (from --set params.seq_len=abc)", "'abc'", "integer"]),
    ("params.BLOCK_M=100", ["params.BLOCK_M (from --set params.BLOCK_M=100)", "got 100", "one of 16, 32"]),
    ("sweep.seq_len=512", ["sweep.seq_len (from --set sweep.seq_len=512)", "must be a list", "got 512"]),
    ("sweep.seq_len=[512,-1]", ["sweep.seq_len[1] (from --set sweep.seq_len=[512,-1])", "got -1"]),
    ("gpu=b200", ["gpu (from --set gpu=b200)", "'b200'", "available:"]),
    ("head_dim=128", ["head_dim (from --set head_dim=128)", "did you mean 'params.head_dim'"]),
])
def test_bad_set(tmp_path, capsys, setting, needles):
    p = _write(tmp_path, "kernel: attention_flash\n" + TINY, "ok.yaml")
    _fails(capsys, ["run", str(p), "--out", str(tmp_path / "o"), "--set", setting], *needles)


@pytest.mark.parametrize("args,needles", [
    (["--jobs", "0"], ["--jobs", "at least 1", "got 0"]),
    (["--jobs", "many"], ["--jobs", "'many'"]),
    (["--executor", "ray"], ["--executor", "'ray'", "'local', 'dask'"]),
    (["--executor", "dask"], ["--executor dask needs --scheduler"]),
    (["--executor", "local", "--scheduler", "tcp://h:1"], ["--scheduler", "only used with --executor dask"]),
])
def test_bad_options(tmp_path, capsys, args, needles):
    p = _write(tmp_path, "kernel: attention_flash\n" + TINY, "ok.yaml")
    with pytest.raises(SystemExit) as e:
        rc = main(["run", str(p), "--out", str(tmp_path / "o")] + args)
        raise SystemExit(rc)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    for n in needles:
        assert n in err


def test_unreachable_scheduler(tmp_path, capsys, monkeypatch):
    pytest.importorskip("distributed", reason="dask.distributed is not installed")
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT_S", 1)
    p = _write(tmp_path, "kernel: attention_flash\n" + TINY, "ok.yaml")
    _fails(capsys, ["run", str(p), "--out", str(tmp_path / "o"), "--scheduler", "tcp://127.0.0.1:1"],
           "--scheduler tcp://127.0.0.1:1", "cannot connect within 1 s")
    _fails(capsys, ["run", str(p), "--out", str(tmp_path / "o"), "--executor", "dask", "--scheduler", "nohost"],
           "--scheduler 'nohost'", "not a scheduler address", "tcp://HOST:8786")


def test_bad_input_in_a_real_process(tmp_path):
    """The installed entry point: exit status 2, one line, no traceback."""
    p = _write(tmp_path, "kernel: attention_flash\nparams: {BLOCK_M: 100}\n")
    r = subprocess.run([sys.executable, "-m", "gpusim", "run", str(p), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "params.BLOCK_M" in r.stderr and "100" in r.stderr and "one of 16, 32, 64, 128, 256" in r.stderr


# --------------------------------------------------------------------------- runs and exit codes
def _csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_set_overrides_fields(tmp_path, capsys):
    p = _write(tmp_path, "kernel: attention_flash\n" + TINY, "ok.yaml")
    out = tmp_path / "o"
    rc = main(["run", str(p), "--out", str(out), "--jobs", "1", "--no-plots", "--set", "params.head_dim=32",
               "--set", "gpu=a100", "--set", "sweep.seq_len=[64,128]"])
    assert rc == 0, capsys.readouterr().err
    rows = _csv(out / "results.csv")
    assert [(r["gpu"], r["head_dim"], r["seq_len"], r["status"]) for r in rows] == \
        [("a100", "32", "64", "ok"), ("a100", "32", "128", "ok")]


def test_infeasible_points_exit_0(tmp_path, capsys):
    p = _write(tmp_path, "kernel: attention_flash\nparams: {batch: 1, heads: 1, seq_len: 256, head_dim: 128}\n"
                         "sweep: {BLOCK_M: [16, 256], BLOCK_N: [256]}\ncheck: false\n", "tiles.yaml")
    out = tmp_path / "o"
    rc = main(["run", str(p), "--out", str(out), "--jobs", "1", "--no-plots"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    rows = _csv(out / "results.csv")
    assert [r["status"] for r in rows] == ["infeasible", "infeasible"]
    assert all("SRAM" in r["reason"] for r in rows)
    assert "infeasible" in captured.out and "KiB of SRAM" in captured.out


def test_error_point_exit_1_and_everything_written(tmp_path, capsys):
    """attention_naive cannot mask: causal=true makes its point an error row; the sweep goes on."""
    p = _write(tmp_path, "params: {batch: 1, heads: 1, seq_len: 128, head_dim: 16, causal: true}\n"
                         "sweep: {kernel: [attention_flash, attention_naive]}\ncheck: false\n", "mixed.yaml")
    out = tmp_path / "o"
    rc = main(["run", str(p), "--out", str(out), "--jobs", "1", "--no-plots"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "1 of 2 point(s) failed" in err
    rows = _csv(out / "results.csv")
    assert [r["status"] for r in rows] == ["ok", "error"]
    assert "causal" in rows[1]["reason"]
    assert (out / "manifest.json").exists() and len(list((out / "points").glob("*.json"))) == 2


def test_progress_lines_when_not_a_terminal(tmp_path):
    """Off a terminal the progress is plain lines (one per 10% of the points), never a redrawn bar."""
    p = _write(tmp_path, "kernel: elementwise_fused\nsweep: {n: [1024, 2048, 4096]}\n", "ew.yaml")
    r = subprocess.run([sys.executable, "-m", "gpusim", "run", str(p), "--out", str(tmp_path / "o"), "--jobs", "2",
                        "--no-plots"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "\r" not in r.stderr
    lines = [x for x in r.stderr.splitlines() if " points " in x]
    assert [x.split()[1] for x in lines] == ["1/3", "2/3", "3/3"], r.stderr
    out = r.stdout.splitlines()                     # header, rule, three rows, then the notes
    assert [x.split()[0] for x in out[2:5]] == ["h100"] * 3 and set(out[1]) <= {"-", " "}, r.stdout
    notes = [x.split(":")[0] for x in out[5:]]      # no progress line among them
    assert notes[0] == "bound" and notes[-1] == "compiler view", r.stdout
    assert set(notes) <= {"bound", "calibration", "compiler view"} and len(notes) == len(set(notes)), r.stdout
