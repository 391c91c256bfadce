"""The saved configs of ``gpusim tune --out DIR``: one line per simulated config, appended as it
finishes, so an interrupted tune (Ctrl-C, a killed process) loses nothing it computed and the same
command resumes where it stopped.

``DIR/tune_points.jsonl`` holds one JSON record per line: the point's key (``sweep.point.Point.key``:
the point, the resolved GPU config, the gpusim version, the hash of gpusim's code and the
compiler's view), the point and its results.csv row, with a checksum of the line
(``sweep.point.point_text``). On a re-run a line is served only when its checksum holds and its
key and point are those of a config the run asks for; a line cut short by a kill, edited by hand,
or written by other code or for another GPU config is ignored (and recomputed when needed).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from .sweep.point import check_record, point_dict, point_text

FILE = "tune_points.jsonl"
MAX_BYTES = 1 << 28       # a line is ~2 KB; a larger file is not a tune's


class TuneStore:
    """Append-only saved rows of one ``--out`` directory (None: nothing is saved)."""

    def __init__(self, out: str | os.PathLike | None):
        self.path = Path(out) / FILE if out is not None else None

    def load(self, points: list) -> dict:
        """{index in ``points``: saved row} for the points this file answers."""
        if self.path is None or not self.path.is_file() or self.path.stat().st_size > MAX_BYTES:
            return {}
        want = {pt.key(): i for i, pt in enumerate(points)}
        out = {}
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for line in f:
                rec, why = check_record(line)
                if why or not isinstance(rec.get("row"), dict):
                    continue
                i = want.get(rec.get("key"))
                if i is not None and rec.get("point") == _plain(point_dict(points[i])):
                    out[i] = rec["row"]
        return out

    def save(self, point, row: dict) -> None:
        """Append ``point``'s row (flushed and synced: on disk when this returns)."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = point_text({"key": point.key(), "point": point_dict(point), "row": row})
        with open(self.path, "a+b") as f:
            f.seek(0, os.SEEK_END)
            if f.tell():            # a line cut short by a kill stays a line of its own
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")
            f.write(text.encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())


def _plain(d: dict) -> dict:
    """``d`` as it reads back from JSON (tuples as lists, numbers as saved)."""
    return json.loads(json.dumps(d, sort_keys=True, default=str))
