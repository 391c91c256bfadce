"""benchmarks/sim_points.py --merge-into: new points are added once, known ones kept, the bytes stable."""
import gzip
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("sim_points", ROOT / "benchmarks" / "sim_points.py")
sim_points = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sim_points)


def _lines(rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_merge_adds_only_new_points_and_is_byte_stable(tmp_path):
    into, new = tmp_path / "sim.jsonl.gz", tmp_path / "new.jsonl"
    new.write_text(_lines([{"scenario": "a.yaml", "point": 0, "time_us": 1.0}]))
    assert sim_points.merge(new, into) == 1
    first = into.read_bytes()
    # a known point is not added again (its old line is kept), a new one and a duplicate within the file once
    new.write_text(_lines([{"scenario": "a.yaml", "point": 0, "time_us": 9.0},
                           {"scenario": "a.yaml", "point": 1, "time_us": 2.0},
                           {"scenario": "a.yaml", "point": 1, "time_us": 3.0}]))
    assert sim_points.merge(new, into) == 1
    rows = [json.loads(x) for x in gzip.decompress(into.read_bytes()).decode().splitlines()]
    assert [(r["point"], r["time_us"]) for r in rows] == [(0, 1.0), (1, 2.0)]
    assert sim_points.merge(new, into) == 0            # nothing new: the file is untouched
    # no timestamp in the gzip header: the same lines give the same bytes
    again = tmp_path / "again.jsonl.gz"
    new.write_text(_lines([{"scenario": "a.yaml", "point": 0, "time_us": 1.0}]))
    sim_points.merge(new, again)
    assert again.read_bytes() == first


def test_replace_swaps_known_points_in_place_and_adds_new_ones(tmp_path):
    into, new = tmp_path / "sim.jsonl.gz", tmp_path / "new.jsonl"
    new.write_text(_lines([{"scenario": "a.yaml", "point": p, "time_us": 1.0} for p in range(3)]))
    sim_points.merge(new, into)
    new.write_text(_lines([{"scenario": "a.yaml", "point": 1, "time_us": 5.0},
                           {"scenario": "a.yaml", "point": 1, "time_us": 6.0},     # the first line of a point wins
                           {"scenario": "b.yaml", "point": 0, "time_us": 7.0}]))
    assert sim_points.merge(new, into, replace=True) == 2
    rows = [json.loads(x) for x in gzip.decompress(into.read_bytes()).decode().splitlines()]
    assert [(r["scenario"], r["point"], r["time_us"]) for r in rows] == [
        ("a.yaml", 0, 1.0), ("a.yaml", 1, 5.0), ("a.yaml", 2, 1.0), ("b.yaml", 0, 7.0)]
