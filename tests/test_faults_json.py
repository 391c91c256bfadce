"""`gpusim validate --reanalyze` of a JSON that is cut short, nested absurdly deep, not an object,
a FIFO or a device: one stderr line, exit 2, no traceback, the file untouched."""
import os
from pathlib import Path

import pytest

from gpusim.cli import main


def _one_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("text", ['{"points": [{"kernel": "x", ', "[" * 5000 + "]" * 5000, '{"points": 3}',
                                  "[]", "", '{"points": [] } trailing', "\xff"])
def test_bad_validation_json_is_one_line(tmp_path, capsys, text):
    d = tmp_path / "v"
    d.mkdir()
    f = d / "validation.json"
    f.write_text(text, errors="surrogateescape") if text != "\xff" else f.write_bytes(b"\xff\xfe")
    before = f.read_bytes()
    assert main(["validate", "--reanalyze", str(d)]) == 2
    assert "validation.json" in _one_line(capsys.readouterr().err)
    assert f.read_bytes() == before


def test_validation_json_fifo_is_refused(tmp_path, capsys):
    f = tmp_path / "validation.json"
    os.mkfifo(f)
    assert main(["validate", "--reanalyze", str(f)]) == 2
    _one_line(capsys.readouterr().err)
