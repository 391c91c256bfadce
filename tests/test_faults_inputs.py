"""Bounded input: only regular files of at most 1 MiB are read (scenario and GPU YAML), a FIFO never
blocks, a device is refused before it is opened, and a GPU YAML refuses a key given twice; each is
one stderr line, exit 2, no traceback, and results already in --out are kept."""
import os
import time
from pathlib import Path

import pytest

from gpusim.cli import main
from gpusim.hardware import ConfigError, load_gpu
from gpusim.sweep.yamlio import MAX_FILE_BYTES

REPO = Path(__file__).resolve().parents[1]
SCEN = "kernel: elementwise_fused\nsweep: {n: [1024]}\n"


def _one_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _bad(tmp_path, kind):
    """A path of the given bad kind."""
    p = tmp_path / f"bad_{kind}.yaml"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "dev_zero":
        return Path("/dev/zero")
    elif kind == "dev_urandom":
        return Path("/dev/urandom")
    elif kind == "symlink_to_zero":
        p.symlink_to("/dev/zero")
    elif kind == "symlink_to_fifo":
        os.mkfifo(tmp_path / "f")
        p.symlink_to(tmp_path / "f")
    elif kind == "too_big":
        p.write_text("# x\n" * (MAX_FILE_BYTES // 4 + 1))
    elif kind == "directory":
        p.mkdir()
    elif kind == "binary":
        p.write_bytes(b"\xff\xfe\x00kernel")
    return p


KINDS = ["fifo", "dev_zero", "dev_urandom", "symlink_to_zero", "symlink_to_fifo", "too_big", "directory",
         "binary"]


@pytest.fixture
def done_out(tmp_path, capsys):
    """An --out with one finished run in it, whose saved points must survive a refused run."""
    s = tmp_path / "good.yaml"
    s.write_text(SCEN)
    out = tmp_path / "out"
    assert main(["run", str(s), "--out", str(out), "--no-plots"]) == 0
    capsys.readouterr()
    return out, {p.name: p.read_bytes() for p in (out / "points").glob("*.json")}


def _kept(out, saved):
    assert {p.name: p.read_bytes() for p in (out / "points").glob("*.json")} == saved


@pytest.mark.parametrize("kind", KINDS)
def test_bad_scenario_file_is_one_line(tmp_path, capsys, kind, done_out):
    out, saved = done_out
    t0 = time.monotonic()
    assert main(["run", str(_bad(tmp_path, kind)), "--out", str(out), "--no-plots"]) == 2
    assert time.monotonic() - t0 < 2
    line = _one_line(capsys.readouterr().err)
    assert "bad_" in line or "/dev/" in line
    _kept(out, saved)


@pytest.mark.parametrize("kind", KINDS)
def test_bad_gpu_yaml_is_one_line(tmp_path, capsys, kind, done_out):
    out, saved = done_out
    s = tmp_path / "g.yaml"
    s.write_text(SCEN)
    gpu = _bad(tmp_path, kind)
    t0 = time.monotonic()
    assert main(["run", str(s), "--out", str(out), "--no-plots", "--set", f"gpu={gpu}"]) == 2
    assert time.monotonic() - t0 < 2
    _one_line(capsys.readouterr().err)
    _kept(out, saved)


@pytest.mark.parametrize("kind", KINDS)
def test_bad_gpu_yaml_api_is_typed(tmp_path, kind):
    with pytest.raises(ConfigError) as e:
        load_gpu(str(_bad(tmp_path, kind)))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("field", ["sm_count", "name", "l2_bytes"])
def test_gpu_yaml_duplicate_key_is_refused(tmp_path, field):
    text = (REPO / "configs" / "h100.yaml").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith(f"{field}:"))
    p = tmp_path / "dup.yaml"
    p.write_text(text + "\n" + line + "\n")
    with pytest.raises(ConfigError, match="duplicate key"):
        load_gpu(str(p))


@pytest.mark.parametrize("gpu", [None, 123, {}, [], "", 1.5, b"h100"])
def test_api_bad_gpu_is_a_config_error(gpu):
    from gpusim import simulate

    with pytest.raises(ConfigError, match="gpu must be") as e:
        simulate("elementwise_fused", gpu=gpu, n=1024)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("seed", ["abc", -1, 2**32, 1.5, None, True])
def test_api_bad_seed_is_a_value_error(seed):
    from gpusim import simulate

    with pytest.raises(ValueError, match="seed must be") as e:
        simulate("elementwise_fused", gpu="h100", n=1024, seed=seed)
    assert "\n" not in str(e.value)


def test_api_good_seed_still_runs():
    from gpusim import simulate

    assert simulate("elementwise_fused", gpu="h100", n=1024, seed=7).status == "ok"


@pytest.mark.parametrize("value", ["2:08", "1_2_8", "yes", "no", "on", "0b1000", "0o200"])
def test_yaml11_surprises_are_not_numbers(tmp_path, capsys, value, done_out):
    out, saved = done_out
    s = tmp_path / "y.yaml"
    s.write_text(f"kernel: elementwise_fused\nsweep: {{n: [{value}]}}\n")
    assert main(["run", str(s), "--out", str(out), "--no-plots"]) == 2
    _one_line(capsys.readouterr().err)
    _kept(out, saved)


@pytest.mark.parametrize("depth", [1000, 3000, 5000])
@pytest.mark.parametrize("where", ["scenario", "gpu"])
def test_deep_nesting_is_one_line(tmp_path, capsys, depth, where, done_out):
    out, saved = done_out
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * depth + "]" * depth + "\n")
    s = deep
    if where == "gpu":
        s = tmp_path / "s2.yaml"
        s.write_text(SCEN)
    argv = ["run", str(s), "--out", str(out), "--no-plots"] + (["--set", f"gpu={deep}"] if where == "gpu" else [])
    assert main(argv) == 2
    _one_line(capsys.readouterr().err)
    _kept(out, saved)


@pytest.mark.parametrize("name", ["evil\\nwrote results.csv", "\\x1b[2Jcleared", "a\\rb"])
def test_control_characters_in_names_are_escaped(tmp_path, capfd, name):
    s = tmp_path / "n.yaml"
    s.write_text(f'name: "{name}"\nkernel: elementwise_fused\nsweep: {{n: [1024]}}\n')
    main(["run", str(s), "--out", str(tmp_path / "o"), "--no-plots"])
    err = capfd.readouterr().err
    assert "\x1b" not in err and "\r" not in err
    assert not any(ln.startswith("wrote results.csv") for ln in err.splitlines())


@pytest.mark.parametrize("kernel", ["bad\\nname", "\\x1b[31mred"])
def test_control_characters_in_errors_are_one_line(tmp_path, capfd, kernel):
    s = tmp_path / "k.yaml"
    s.write_text(f'kernel: "{kernel}"\nsweep: {{n: [1024]}}\n')
    assert main(["run", str(s), "--out", str(tmp_path / "o"), "--no-plots"]) == 2
    err = capfd.readouterr().err
    assert "\x1b" not in err
    _one_line(err)


@pytest.mark.parametrize("extra", ["power_limit_w: 300\nidle_power_w: 300", "power_limit_w: 300\nidle_power_w: 500",
                                   "l2_line_bytes: 100", "l2_line_bytes: 96"])
def test_gpu_cross_field_checks(tmp_path, capsys, extra, done_out):
    out, saved = done_out
    text = "\n".join(ln for ln in (REPO / "configs" / "h100.yaml").read_text().splitlines()
                     if not ln.startswith(tuple(f"{k.split(':')[0]}:" for k in extra.splitlines())))
    g = tmp_path / "cross.yaml"
    g.write_text(text + "\n" + extra + "\n")
    with pytest.raises(ConfigError):
        load_gpu(str(g))
    s = tmp_path / "c.yaml"
    s.write_text(SCEN)
    assert main(["run", str(s), "--out", str(out), "--no-plots", "--set", f"gpu={g}"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert extra.splitlines()[-1].split(":")[0] in line
    _kept(out, saved)


def test_gpu_yaml_is_not_taken_from_the_working_directory(tmp_path, capsys, monkeypatch):
    (tmp_path / "scen").mkdir()
    (tmp_path / "mygpu.yaml").write_text((REPO / "configs" / "h100.yaml").read_text())
    s = tmp_path / "scen" / "s.yaml"
    s.write_text("kernel: elementwise_fused\ngpu: mygpu.yaml\nsweep: {n: [1024]}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(s), "--out", str(tmp_path / "o"), "--no-plots"]) == 2
    assert "mygpu.yaml" in _one_line(capsys.readouterr().err)
    (tmp_path / "scen" / "mygpu.yaml").write_text((REPO / "configs" / "h100.yaml").read_text())
    assert main(["run", str(s), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
