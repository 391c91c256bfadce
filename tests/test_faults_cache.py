"""A cache that proves what it serves: a saved point file that is damaged, edited by hand, written
before checksums, or holds a result that breaks physics is recomputed on a re-run, with one line
saying so, and the results equal a clean run's."""
import json
import shutil

import pytest

from gpusim.cli import main
from gpusim.sweep.point import check_record, point_text

SCEN = "kernel: elementwise_fused\nsweep: {n: [4096, 8192]}\n"


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A finished run of a tiny scenario: (its folder, results.csv, the point files' bytes)."""
    d = tmp_path_factory.mktemp("clean")
    s = d / "s.yaml"
    s.write_text(SCEN)
    out = d / "out"
    assert main(["run", str(s), "--out", str(out), "--no-plots", "--jobs", "1"]) == 0
    return d, (out / "results.csv").read_text(), {p.name: p.read_bytes() for p in (out / "points").glob("*.json")}


def _copy(clean, tmp_path):
    d, _, _ = clean
    shutil.copytree(d, tmp_path / "run")
    return tmp_path / "run" / "s.yaml", tmp_path / "run" / "out"


def _reseal(rec):
    """A hand edit that also rewrites the checksum: only the physics checks can catch it."""
    return point_text(rec)


def _edit_row(field, value, reseal=True):
    def f(text):
        rec = json.loads(text)
        rec["row"][field] = value
        return _reseal(rec) if reseal else json.dumps(rec, sort_keys=True)
    return f


def _no_checksum(text):
    rec = json.loads(text)
    rec.pop("checksum")
    return json.dumps(rec, sort_keys=True)


def _kernel_dram(text):
    """DRAM bytes below what the kernel must read: the launch and the point both edited, consistently."""
    rec = json.loads(text)
    rec["row"]["dram_read_bytes"] = 64
    rec["kernels"][0]["dram_read_bytes"] = 64
    t = rec["row"]["time_us"]
    rec["row"]["dram_gbps"] = (64 + rec["row"]["dram_write_bytes"]) / (t * 1e-6) / 1e9
    return _reseal(rec)


TAMPER = {
    "time_us_unsealed": (_edit_row("time_us", 0.001, reseal=False), "checksum mismatch"),
    "time_us_0.001": (_edit_row("time_us", 0.001), "breaks physics"),
    "dram_read_bytes_-5": (_edit_row("dram_read_bytes", -5), "breaks physics"),
    "tflops_999999": (_edit_row("tflops", 999999), "breaks physics"),
    "status_unknown": (_edit_row("status", "great"), "unknown status"),
    "status_nan_time": (_edit_row("time_us", "NaN"), "breaks physics"),
    "below_compulsory": (_kernel_dram, "compulsory"),
    "no_checksum": (_no_checksum, "no checksum"),
    "truncated": (lambda t: t[: len(t) // 2], "cannot be parsed"),
    "not_json": (lambda t: "\x00garbage", "cannot be parsed"),
    "empty": (lambda t: "", "cannot be parsed"),
    "json_list": (lambda t: "[1, 2]", "cannot be parsed"),
    "nested_100000_deep": (lambda t: "[" * 100_000 + "]" * 100_000, "cannot be parsed"),
}


@pytest.mark.parametrize("kind", list(TAMPER))
def test_tampered_point_is_recomputed(clean, tmp_path, capsys, kind):
    _, csv, saved = clean
    s, out = _copy(clean, tmp_path)
    edit, why = TAMPER[kind]
    victim = sorted(saved)[0]
    f = out / "points" / victim
    f.write_text(edit(f.read_text()))
    assert main(["run", str(s), "--out", str(out), "--no-plots", "--jobs", "1"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if "recomputing" in ln]
    assert len(lines) == 1, err
    assert victim[:-5] in lines[0] and why in lines[0], lines[0]
    assert (out / "results.csv").read_text() == csv                 # equal to a clean run
    assert json.loads((out / "manifest.json").read_text())["computed"] == 1   # the other point was served
    again, why2 = check_record(f.read_text())                      # saved again, sealed
    assert why2 is None and _numbers(again) == _numbers(check_record(saved[victim].decode())[0])


def _numbers(rec):
    """A point record's result, less its wall time (which differs run to run)."""
    return {k: v for k, v in rec["row"].items() if k != "sim_wall_s"}, rec["kernels"]


def test_directory_in_place_of_a_point_file(clean, tmp_path, capsys):
    """A point path that is not a regular file is reported once; the run still finishes."""
    _, csv, saved = clean
    s, out = _copy(clean, tmp_path)
    victim = out / "points" / sorted(saved)[0]
    victim.unlink()
    victim.mkdir()
    rc = main(["run", str(s), "--out", str(out), "--no-plots", "--jobs", "1"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert [ln for ln in err.splitlines() if "recomputing" in ln and "not a regular file" in ln]
    # the point cannot be saved over a directory: one error line naming it, exit 2, the other point kept
    assert rc == 2
    errors = [ln for ln in err.splitlines() if "error" in ln]
    assert len(errors) == 1 and victim.name in errors[0]
    assert (out / "points" / sorted(saved)[1]).read_bytes() == saved[sorted(saved)[1]]


def test_clean_rerun_recomputes_nothing(clean, tmp_path, capsys):
    _, csv, saved = clean
    s, out = _copy(clean, tmp_path)
    assert main(["run", str(s), "--out", str(out), "--no-plots", "--jobs", "1"]) == 0
    assert "recomputing" not in capsys.readouterr().err
    assert json.loads((out / "manifest.json").read_text())["computed"] == 0
    assert (out / "results.csv").read_text() == csv


def test_point_file_checksum_round_trip():
    rec = {"row": {"time_us": 1.5, "status": "ok"}, "kernels": [], "point": {"n": 3}}
    text = point_text(rec)
    back, why = check_record(text)
    assert why is None and back == rec
    assert check_record(text.replace("1.5", "1.6"))[1] == "point file checksum mismatch"


@pytest.mark.parametrize("kind", ["fifo", "symlink", "huge"])
def test_point_file_that_is_no_plain_small_file_is_replaced(clean, tmp_path, capsys, kind):
    """A FIFO never blocks the re-run, a symlink is neither followed nor its target touched, and a
    huge file is not read: each is recomputed, one line, and saved as a plain file."""
    import os

    from gpusim.sweep import runner

    _, csv, saved = clean
    s, out = _copy(clean, tmp_path)
    victim = out / "points" / sorted(saved)[0]
    victim.unlink()
    target = tmp_path / "elsewhere.json"
    if kind == "fifo":
        os.mkfifo(victim)
    elif kind == "symlink":
        target.write_bytes(saved[victim.name])
        victim.symlink_to(target)
    else:
        with victim.open("wb") as f:
            f.truncate(runner.MAX_POINT_FILE_BYTES + 1)      # sparse: no disk used
    assert main(["run", str(s), "--out", str(out), "--no-plots", "--jobs", "1"]) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "recomputing" in ln]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert (out / "results.csv").read_text() == csv
    assert victim.is_file() and not victim.is_symlink() and check_record(victim.read_text())[1] is None
    if kind == "symlink":
        assert target.read_bytes() == saved[victim.name]


def test_recompute_line_is_short_and_escaped_whatever_the_file_holds(clean, tmp_path, capsys):
    """A re-sealed file whose fields hold megabytes and escape codes gives one short, printable line."""
    _, csv, saved = clean
    s, out = _copy(clean, tmp_path)
    f = out / "points" / sorted(saved)[0]
    rec = json.loads(f.read_text())
    rec["row"]["status"] = "\x1b[31mok\n" + "x" * 100_000
    rec["row"]["time_us"] = "\x1b[2J" * 10_000
    f.write_text(_reseal(rec))
    assert main(["run", str(s), "--out", str(out), "--no-plots", "--jobs", "1"]) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "recomputing" in ln]
    assert len(lines) == 1 and len(lines[0]) < 500 and "\x1b" not in lines[0]
    assert (out / "results.csv").read_text() == csv


@pytest.mark.parametrize("kind", ["fifo", "nested", "huge", "not_an_object"])
def test_manifest_that_cannot_be_read_never_blocks_a_run(clean, tmp_path, capsys, kind):
    """A manifest.json that is a FIFO hung the run until killed; one nested 100,000 deep or huge is
    not read whole. The run treats --out as holding no other scenario and writes a plain manifest."""
    import os

    from gpusim.sweep import runner

    _, csv, _ = clean
    s, out = _copy(clean, tmp_path)
    m = out / "manifest.json"
    m.unlink()
    if kind == "fifo":
        os.mkfifo(m)
    elif kind == "nested":
        m.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "huge":
        with m.open("wb") as f:
            f.truncate(runner.MAX_MANIFEST_BYTES + 1)
    else:
        m.write_text("[1, 2, 3]")
    assert main(["run", str(s), "--out", str(out), "--no-plots", "--jobs", "1"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert m.is_file() and json.loads(m.read_text())["complete"] is True
    assert (out / "results.csv").read_text() == csv


@pytest.mark.slow
def test_manifest_symlinked_to_dev_zero_is_never_read(clean, tmp_path):
    """It took 22 GB of RSS before; now the link is replaced and /dev/zero never opened (run in a
    child process with a 2 GB address-space limit, so a regression cannot take the machine down)."""
    import os
    import resource
    import subprocess
    import sys

    s, out = _copy(clean, tmp_path)
    m = out / "manifest.json"
    m.unlink()
    m.symlink_to("/dev/zero")

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    env = {**os.environ, "PYTHONPATH": str(__import__("pathlib").Path(__file__).resolve().parents[1])}
    p = subprocess.run([sys.executable, "-m", "gpusim", "run", str(s), "--out", str(out), "--no-plots", "--jobs", "1"],
                       capture_output=True, text=True, timeout=60, preexec_fn=limit, env=env)
    assert p.returncode == 0, p.stderr
    assert m.is_file() and not m.is_symlink()
