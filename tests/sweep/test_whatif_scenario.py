"""scenarios/whatif_sram_l2.yaml end to end: SRAM per SM zipped with its per-CTA limit, crossed with the
L2 size and the stages, prints, saves and plots one column per GPU field (8 points, about 10 s)."""
import csv
from pathlib import Path

import pytest

from gpusim.cli import main

REPO = Path(__file__).resolve().parents[2]
FIELDS = ["gpu.sram_bytes_per_sm", "gpu.sram_bytes_per_cta_max", "gpu.l2_bytes"]


@pytest.mark.slow
def test_whatif_scenario_prints_saves_and_plots_a_column_per_field(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["run", str(REPO / "scenarios" / "whatif_sram_l2.yaml"), "--out", str(out), "--jobs", "1"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split()[:6] == ["gpu", "kernel", "num_stages"] + FIELDS
    shown = [tuple(line.split()[2:12]) for line in printed[2:10]]    # stages, then each field: value, unit, ratio
    assert len(set(shown)) == 8                                   # no two rows look alike
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert len(rows) == 8 and all(f in rows[0] for f in FIELDS) and "gpu_overrides" not in rows[0]
    assert {(r["gpu.sram_bytes_per_sm"], r["gpu.sram_bytes_per_cta_max"]) for r in rows} == {
        ("131072", "101376"), ("233472", "232448")}               # zipped: two pairs, not four
    assert all(r["status"] == "ok" for r in rows)
    t = {(r["gpu.sram_bytes_per_sm"], r["gpu.l2_bytes"], r["num_stages"]): float(r["time_us"]) for r in rows}
    # each field changes the answer: the rows are not duplicates
    assert t[("233472", "52428800", "3")] < t[("131072", "52428800", "3")]
    assert t[("233472", "52428800", "3")] < t[("233472", "4194304", "3")]
    with open(out / "plot_time_us.csv") as f:
        header = next(csv.reader(f))
    assert header[0] == "gpu.sram_bytes_per_sm" and len(header) == 5
    assert all("gpu.l2_bytes=" in h and "num_stages=" in h for h in header[1:])
    assert (out / "plot_time_us.png").read_bytes()[:4] == b"\x89PNG"
