"""Zipped sweeps (``sweep: {zip: {...}}``): coupled fields take their values together, as one axis of
the cartesian product; bad zips are one-line errors; every changed GPU field is its own column."""
import pytest

from gpusim.cli import main
from gpusim.sweep.errors import ScenarioError
from gpusim.sweep.runner import result_columns
from gpusim.sweep.scenario import load_scenario

HEAD = "kernel: elementwise_fused\nparams: {n: 4096}\ncheck: false\n"
SRAM_ZIP = ("  zip:\n    gpu.sram_bytes_per_sm: [131072, 233472]\n"
            "    gpu.sram_bytes_per_cta_max: [101376, 232448]\n")


def _write(tmp_path, sweep_text):
    p = tmp_path / "z.yaml"
    p.write_text(HEAD + "sweep:\n" + sweep_text)
    return p


def _fails(capsys, argv, *needles):
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


def _pairs(sc):
    return [(pt.config.sram_bytes_per_sm, pt.config.sram_bytes_per_cta_max, pt.config.l2_bytes) for pt in sc.points]


def test_zip_pairs_values_and_crosses_the_other_axes(tmp_path):
    sc = load_scenario(_write(tmp_path, SRAM_ZIP + "  gpu.l2_bytes: [25165824, 52428800]\n"))
    # 2 zipped pairs x 2 L2 sizes: 4 points, not 8; the last key varies fastest
    assert _pairs(sc) == [(131072, 101376, 25165824), (131072, 101376, 52428800),
                          (233472, 232448, 25165824), (233472, 232448, 52428800)]
    assert sc.gpu_override_fields == ["sram_bytes_per_sm", "sram_bytes_per_cta_max", "l2_bytes"]
    cols = result_columns(sc)
    assert cols[cols.index("BLOCK") + 1:cols.index("status")] == [
        "gpu.sram_bytes_per_sm", "gpu.sram_bytes_per_cta_max", "gpu.l2_bytes"]


def test_zip_keeps_its_place_in_the_order_and_takes_parameters(tmp_path):
    sc = load_scenario(_write(tmp_path, "  gpu.l2_bytes: [25165824, 52428800]\n  zip:\n"
                                        "    n: [1024, 2048, 4096]\n    BLOCK: [128, 256, 512]\n"))
    got = [(pt.config.l2_bytes, pt.params["n"], pt.params["BLOCK"]) for pt in sc.points]
    assert got == [(l2, n, b) for l2 in (25165824, 52428800) for n, b in ((1024, 128), (2048, 256), (4096, 512))]


def test_several_zip_groups_as_a_list(tmp_path):
    sc = load_scenario(_write(tmp_path, "  zip:\n    - {n: [1024, 2048], BLOCK: [128, 256]}\n"
                                        "    - {gpu.sram_bytes_per_sm: [131072, 233472], "
                                        "gpu.sram_bytes_per_cta_max: [101376, 232448]}\n"))
    got = [(pt.params["n"], pt.params["BLOCK"], pt.config.sram_bytes_per_sm) for pt in sc.points]
    assert got == [(1024, 128, 131072), (1024, 128, 233472), (2048, 256, 131072), (2048, 256, 233472)]


def test_coupled_fields_need_the_zip(tmp_path, capsys):
    """Less SRAM per SM than the per-CTA limit is no GPU: alone it is refused, zipped with its limit it runs."""
    _fails(capsys, ["run", str(_write(tmp_path, "  gpu.sram_bytes_per_sm: [131072, 233472]\n")), "--out",
                    str(tmp_path / "o")], "sweep.gpu.sram_bytes_per_sm[0]", "sram_bytes_per_cta_max cannot exceed")
    assert len(load_scenario(_write(tmp_path, SRAM_ZIP)).points) == 2


@pytest.mark.parametrize("sweep_text, needles", [
    ("  zip:\n    gpu.sram_bytes_per_sm: [131072, 233472]\n    gpu.sram_bytes_per_cta_max: [101376]\n",
     ["z.yaml: sweep.zip: zipped lists must be equally long", "gpu.sram_bytes_per_sm has 2",
      "gpu.sram_bytes_per_cta_max has 1"]),
    ("  zip:\n    - {n: [1024, 2048]}\n    - {BLOCK: [128, 256, 512], num_warps: [4]}\n",
     ["sweep.zip[1]: zipped lists must be equally long", "BLOCK has 3, num_warps has 1"]),
    ("  zip: [1, 2]\n", ["sweep.zip: must be a mapping of field: [values]"]),
    ("  zip: {}\n", ["sweep.zip: is empty"]),
    ("  zip: {n: [1024, 2048]}\n  n: [4096]\n", ["sweep.zip.n: is swept twice (also as sweep.n)"]),
    ("  zip: {n: 1024}\n", ["sweep.zip.n: must be a list of values"]),
    ("  zip: {nn: [1024]}\n", ["sweep.zip.nn: unknown parameter (did you mean 'n'?)"]),
    ("  zip: {n: [1024, -1], BLOCK: [128, 256]}\n", ["sweep.zip.n[1]"]),
    ("  zip:\n    gpu.sram_bytes_per_sm: [131072, 233472]\n    gpu.sram_bytes_per_cta_max: [232448, 232448]\n",
     ["sweep.zip[0]: h100 with sram_bytes_per_sm=131072, sram_bytes_per_cta_max=232448",
      "sram_bytes_per_cta_max cannot exceed sram_bytes_per_sm"]),
])
def test_bad_zip_is_one_line_exit_2(tmp_path, capsys, sweep_text, needles):
    _fails(capsys, ["run", str(_write(tmp_path, sweep_text)), "--out", str(tmp_path / "o")], *needles)


def test_point_limit_counts_a_zip_group_once(tmp_path):
    p = _write(tmp_path, "  zip: {n: [1024, 2048, 4096], BLOCK: [128, 256, 512]}\n  num_warps: [4, 8]\n")
    assert len(load_scenario(p, max_points=6).points) == 6
    with pytest.raises(ScenarioError, match="6 points"):
        load_scenario(p, max_points=5)


def test_notebook_sweep_zips_and_has_a_column_per_gpu_field():
    import gpusim

    pytest.importorskip("pandas")
    df = gpusim.sweep("elementwise_fused", check=False, n=4096, **{"gpu.l2_bytes": 25165824},
                      zip={"gpu.sram_bytes_per_sm": [131072, 233472], "gpu.sram_bytes_per_cta_max": [101376, 232448]})
    assert len(df) == 2 and "gpu_overrides" not in df.columns and set(df["status"]) == {"ok"}
    assert list(zip(df["gpu.sram_bytes_per_sm"], df["gpu.sram_bytes_per_cta_max"])) == [(131072, 101376),
                                                                                        (233472, 232448)]
    assert list(df["gpu.l2_bytes"]) == [25165824] * 2          # a fixed GPU field is a column too
