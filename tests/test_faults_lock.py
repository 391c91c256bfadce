"""One writer per --out: a second run into a directory a live run holds is refused (one line, exit 2,
the holder's PID named, the holder's saved points kept); a lock left by a dead process is taken over;
--force never follows a symlinked points folder out of --out."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpusim.cli import main
from gpusim.sweep.outlock import LOCK_NAME, OutLock

REPO = Path(__file__).resolve().parents[1]
SCEN = "kernel: elementwise_fused\nsweep: {n: [1024, 2048]}\n"


def _scenario(tmp_path, text=SCEN, name="s.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _one_line_error(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _hold_in_child(out):
    """A real second process holding the lock on ``out`` until its stdin closes."""
    code = ("import sys; from gpusim.sweep.outlock import OutLock; l = OutLock(sys.argv[1]).acquire(); "
            "print('held', flush=True); sys.stdin.read()")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    child = subprocess.Popen([sys.executable, "-c", code, str(out)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout.readline().strip() == "held"
    return child


@pytest.mark.parametrize("force", [False, True])
def test_second_run_into_a_held_out_is_refused(tmp_path, capsys, force):
    out = tmp_path / "out"
    assert main(["run", str(_scenario(tmp_path)), "--out", str(out), "--no-plots"]) == 0
    saved = sorted(p.name for p in (out / "points").glob("*.json"))
    assert saved
    capsys.readouterr()
    child = _hold_in_child(out)
    try:
        other = _scenario(tmp_path, "name: other\nkernel: elementwise_fused\nsweep: {n: [4096]}\n", "o.yaml")
        argv = ["run", str(other), "--out", str(out), "--no-plots"] + (["--force"] if force else [])
        assert main(argv) == 2
        line = _one_line_error(capsys.readouterr().err)
        assert f"PID {child.pid}" in line and "in use" in line
        assert sorted(p.name for p in (out / "points").glob("*.json")) == saved
    finally:
        child.stdin.close()
        child.wait(timeout=10)


def test_lock_of_a_dead_process_is_taken_over(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    child = _hold_in_child(out)
    child.kill()
    child.wait(timeout=10)
    assert f"{child.pid} " in (out / LOCK_NAME).read_text()  # the stale file is still there
    assert main(["run", str(_scenario(tmp_path)), "--out", str(out), "--no-plots"]) == 0
    assert (out / "results.csv").is_file()


def test_lock_is_released_after_the_run(tmp_path):
    out = tmp_path / "out"
    assert main(["run", str(_scenario(tmp_path)), "--out", str(out), "--no-plots"]) == 0
    with OutLock(out):
        pass


def test_same_process_second_lock_is_refused(tmp_path):
    from gpusim.sweep.errors import ScenarioError

    with OutLock(tmp_path):
        with pytest.raises(ScenarioError, match=f"PID {os.getpid()}"):
            OutLock(tmp_path).acquire()


def test_force_does_not_follow_a_symlinked_points_folder(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(_scenario(tmp_path)), "--out", str(out), "--no-plots"]) == 0
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "mine.json").write_text("{}")
    for p in (out / "points").glob("*"):
        p.unlink()
    (out / "points").rmdir()
    (out / "points").symlink_to(victim)
    capsys.readouterr()
    other = _scenario(tmp_path, "name: other\nkernel: elementwise_fused\nsweep: {n: [4096]}\n", "o.yaml")
    assert main(["run", str(other), "--out", str(out), "--no-plots", "--force"]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "symlink" in line
    assert (victim / "mine.json").read_text() == "{}"
    assert list(victim.iterdir()) == [victim / "mine.json"]


def test_lock_file_symlink_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (out / LOCK_NAME).symlink_to(target)
    assert main(["run", str(_scenario(tmp_path)), "--out", str(out), "--no-plots"]) == 2
    assert "symlink" in _one_line_error(capsys.readouterr().err)
    assert target.read_text() == "keep"
