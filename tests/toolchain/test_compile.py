"""Compiled resources: parsing the toolchain's output (no triton needed), and compiling a recorded
config again reproduces its registers per thread (needs triton; no GPU)."""
import json
import os
import sys
from pathlib import Path

import pytest

if "triton" not in sys.modules:
    os.environ["TRITON_INTERPRET"] = "1"     # before triton is imported (as the other Triton tests do)

from gpusim import kernels
from gpusim import compiler
from gpusim.backends.sim import cost
from gpusim.toolchain.compile import (CompiledResources, access_bytes, mma_flops_per_warp, parse_res_usage,
                                            parse_sass)
from gpusim.hardware import load_gpu

TABLE = Path(__file__).resolve().parents[1] / "data" / "compiled_resources_sm90.json"

SASS = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   STL [R1], RZ ;
        /*0020*/                   STL.64 [R1+0x8], R4 ;
.L_x_0:
        /*0030*/                   LDGSTS.E.BYPASS.128 [R9+0x18000], desc[UR24][R2.64] ;
        /*0040*/                   HGMMA.64x256x16.F32 R24, gdesc[UR4].tnspB, R24, gsb0 ;
        /*0050*/                   MUFU.EX2 R3, R3 ;
        /*0060*/              @!P0 BRA `(.L_x_0) ;
        /*0070*/                   LDL.LU.64 R4, [R1+0x8] ;
        /*0080*/                   LDG.E.U16 R6, desc[UR6][R4.64] ;
        /*0090*/                   STG.E.128 desc[UR6][R4.64], R8 ;
        /*00a0*/                   EXIT ;
.L_x_1:
        /*00b0*/                   BRA `(.L_x_1);
"""


def test_parse_sass_counts_loops_spills_and_widths():
    p = parse_sass(SASS)
    assert p["loop_mma_flops"] == 2 * 64 * 256 * 16 / 4      # one HGMMA.64x256x16 in the loop, per warp
    total, loop = dict(p["sass"]), dict(p["sass_loop"])
    assert total["HGMMA"] == 1 and loop["HGMMA"] == 1
    assert total["MUFU"] == 1 and total["MUFU.EX2"] == 1 and loop["MUFU.EX2"] == 1
    assert "STL" not in loop and total["STL"] == 2
    assert p["spill_store_bytes"] == 4 + 8 and p["spill_load_bytes"] == 8
    assert dict(p["global_load_widths"]) == {16: 1, 2: 1}
    assert dict(p["global_store_widths"]) == {16: 1}
    assert total["BRA"] == 2 and loop["BRA"] == 1       # the trap loop after EXIT is no loop body


def test_access_bytes():
    assert access_bytes("LDG", ".E.128") == 16
    assert access_bytes("LDG", ".E") == 4
    assert access_bytes("LDG", ".E.64") == 8
    assert access_bytes("LDG", ".E.U16") == 2
    assert access_bytes("LDGSTS", ".E.BYPASS.LTC128B.128") == 16


def test_parse_res_usage():
    text = (" Function other:\n  REG:12 STACK:0 SHARED:0\n"
            " Function matmul_kernel:\n  REG:255 STACK:1024 SHARED:1024 LOCAL:0 CONSTANT[0]:568\n")
    assert parse_res_usage(text, "matmul_kernel") == {"registers_per_thread": 255, "stack_bytes": 1024}


def test_round_trip_through_dict():
    r = CompiledResources("k", 90, 4, 3, 255, 1024, 147456, 1560, 1112, (("HGMMA", 8), ("STL", 262)),
                          (("HGMMA", 4),), ((16, 72),), ((16, 32),), "3.9.0", "13.4")
    assert CompiledResources.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    assert r.spills and r.global_load_vector_bytes == 16 and r.sass_count("HGMMA", loop=True) == 4


def test_unknown_resources_mode_is_one_line_error(monkeypatch):
    monkeypatch.setenv("GPUSIM_RESOURCES", "exact")
    with pytest.raises(ValueError, match="GPUSIM_RESOURCES='exact': allowed values are auto, compiled, estimated"):
        compiler.resources_mode()


def test_estimated_mode_never_compiles(monkeypatch):
    wl = kernels.build("elementwise_fused", dict(n=4096, BLOCK=1024))
    occ = cost.occupancy(wl.launches[0].program, load_gpu("h200"), wl.launches[0].grid, resources="estimated")
    assert occ.resources == "estimated" and occ.compiled is None


# --------------------------------------------------------------------------- with triton
def _recorded():
    doc = json.loads(TABLE.read_text())
    return doc, [r for r in doc["launches"] if "error" not in r]


def _needs_same_triton():
    triton = pytest.importorskip("triton", reason="compiling needs the triton package (no GPU)")
    from gpusim.toolchain import compile as tc

    if not tc.available():
        pytest.skip("this triton wheel carries no NVIDIA toolchain")
    doc, _ = _recorded()
    if triton.__version__ != doc["triton_version"]:
        pytest.skip(f"table recorded with triton {doc['triton_version']}, this is {triton.__version__}: "
                    f"register counts differ between triton versions")


@pytest.mark.parametrize("pick", ["elementwise", "matmul-spill"])
def test_compiling_reproduces_recorded_registers(pick, tmp_path, monkeypatch):
    _needs_same_triton()
    monkeypatch.setenv("GPUSIM_CACHE_DIR", str(tmp_path / "cache"))   # a cold cache: really compile
    from gpusim.toolchain import compile as tc

    monkeypatch.setattr(tc, "_MEMO", {})
    _, rows = _recorded()
    if pick == "elementwise":
        row = min((r for r in rows if r["kernel"] == "elementwise_fused"), key=lambda r: r["params"]["BLOCK"])
    else:   # the smallest spilling matmul (a cheap compile that still exercises the spill parsing)
        row = min((r for r in rows if r["kernel"] == "matmul" and r["spill_store_bytes"] > 0),
                  key=lambda r: r["params"]["BLOCK_M"] * r["params"]["BLOCK_N"])
    launch = next(ln for ln in kernels.build(row["kernel"], row["params"]).launches if ln.name == row["launch"])
    got = tc.compile_program(launch.program, launch.grid, 90)
    assert got.registers_per_thread == row["registers_per_thread"]
    assert got.spill_store_bytes == row["spill_store_bytes"] and got.stack_bytes == row["stack_bytes"]
    assert got.global_load_vector_bytes == row["global_load_vector_bytes"]
    # once compiled, the same content is served from memory, then from disk
    assert tc.compile_program(launch.program, launch.grid, 90) is got
    monkeypatch.setattr(tc, "_MEMO", {})
    monkeypatch.setattr(tc, "_compile", lambda *a: pytest.fail("compiled twice for the same content"))
    assert tc.compile_program(launch.program, launch.grid, 90) == got


def test_simulator_uses_compiled_registers(monkeypatch):
    _needs_same_triton()
    _, rows = _recorded()
    row = min((r for r in rows if r["kernel"] == "elementwise_fused"), key=lambda r: r["params"]["BLOCK"])
    wl = kernels.build(row["kernel"], row["params"])
    occ = cost.occupancy(wl.launches[0].program, load_gpu("h200"), wl.launches[0].grid, resources="compiled")
    assert occ.resources == "compiled" and occ.registers_per_thread == row["registers_per_thread"]
    assert occ.compiled.registers_per_thread == row["registers_per_thread"]


def test_results_say_which_resources_they_used(monkeypatch):
    from gpusim.api import simulate
    from gpusim.result import KERNEL_COLUMNS, METRIC_COLUMNS

    monkeypatch.setenv("GPUSIM_RESOURCES", "estimated")
    r = simulate("elementwise_fused", "h200", n=1 << 16, BLOCK=1024, check=False)
    assert r.resources == "estimated" and r.row()["resources"] == "estimated"
    assert all(k.row(0)["resources"] == "estimated" for k in r.kernels)
    assert "resources" in METRIC_COLUMNS and "resources" in KERNEL_COLUMNS


def test_compiling_a_source_the_interpreter_just_ran(tmp_path, monkeypatch):
    """Under TRITON_INTERPRET=1 Triton's compiler fails on a source the interpreter has run in this
    process; the compile is retried in a clean child process, so the cache holds the real answer
    (it used to hold the failure, and every later run in any process got 'estimated')."""
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs the Triton interpreter (TRITON_INTERPRET=1 before triton is imported)")
    from gpusim.backends import numpy_exec
    from gpusim.toolchain import compile as tc
    from gpusim.backends.triton import run as tb

    monkeypatch.setenv("GPUSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))  # a cached cubin would skip the front end
    wl = kernels.build("attention_flash", dict(batch=1, heads=2, seq_len=128, head_dim=64))
    tb.run_workload(wl, numpy_exec.random_inputs(wl, 0), device="cpu")
    la = wl.launches[0]
    got = tc.compile_program(la.program, la.grid)
    assert got.registers_per_thread > 32 and dict(got.sass_loop).get("HGMMA", 0) > 0
    cached = [json.loads(p.read_text()) for p in (tmp_path / "resources").glob("*.json")]
    assert cached and all("result" in c for c in cached)


def test_mma_shapes():
    assert mma_flops_per_warp("HGMMA", ".64x32x16.F32 R24, gdesc[UR4], RZ") == 2 * 64 * 32 * 16 / 4
    assert mma_flops_per_warp("HMMA", ".16816.F32 R24, R4, R8, R24") == 2 * 16 * 8 * 16
    assert mma_flops_per_warp("HMMA", ".1688.F32.TF32 R24, R4, R8, R24") == 2 * 16 * 8 * 8
    assert mma_flops_per_warp("HGMMA", ".SP R24") == 0.0
