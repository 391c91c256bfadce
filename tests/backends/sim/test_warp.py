"""The warp scoreboard: a loop body's dependent chains, the scheduler's issue slots, the SFU's
throughput, barriers, and the loop bodies read from nvdisasm text."""
import pytest

from gpusim.backends.sim import warp
from gpusim.backends.sim.steps import SimtStep
from gpusim.toolchain.sass_deps import instruction, loop_bodies

RATES = {"mufu": 16.0, "shfl": 32.0, "shared": 128.0}
LAT = {"fp32": 4, "int": 2, "mufu": 20, "shfl": 30, "shared": 30, "shared_store": 30, "barrier": 10, "branch": 0}


def chain(n):
    return tuple(f"FFMA|R1|R1 R2" for _ in range(n))


def test_a_dependent_chain_takes_its_latencies():
    assert warp.iteration_cycles(chain(10), LAT, RATES) == pytest.approx(40.0)


def test_independent_instructions_issue_one_per_clock():
    body = tuple(f"FFMA|R{10 + k}|R{10 + k} R2" for k in range(10))   # ten chains of one
    assert warp.iteration_cycles(body, LAT, RATES) == pytest.approx(10.0)


def test_warps_sharing_a_scheduler_hide_latency_until_issue_binds():
    # a 10-deep chain: one warp 40 cycles; two warps interleave in the same 40; twelve need 120 slots
    assert warp.iteration_cycles(chain(10), LAT, RATES, num_warps=8) == pytest.approx(40.0)
    assert warp.iteration_cycles(chain(10), LAT, RATES, num_warps=48) == pytest.approx(120.0)


def test_the_sfu_accepts_a_warp_instruction_every_eight_clocks():
    body = tuple(f"MUFU.EX2|R{10 + k}|R{10 + k}" for k in range(10))   # independent
    # 16 lanes per clock per SM = 4 per sub-partition: 8 clocks per warp-instruction
    assert warp.iteration_cycles(body, LAT, RATES) == pytest.approx(80.0)


def test_shuffles_share_one_unit_per_sm():
    body = tuple(f"SHFL.BFLY|R{10 + k}|R2" for k in range(10))   # independent shuffles
    # one warp alone: 32 lanes per clock, a shuffle per clock
    assert warp.iteration_cycles(body, LAT, RATES, num_warps=1) == pytest.approx(10.0)
    # four warps, one per scheduler, share the SM's unit: each gets a shuffle every 4 clocks
    assert warp.iteration_cycles(body, LAT, RATES, num_warps=4) == pytest.approx(40.0)


def test_a_barrier_waits_for_shared_stores_and_every_warp():
    body = ("STS||R4 R5", "BAR.SYNC||", "LDS|R6|R4", "FADD|R5|R6 R5")
    one = warp.iteration_cycles(body, LAT, RATES)
    # store lands (30) -> barrier (10) -> load (30) -> add (4), each pass
    assert one == pytest.approx(30 + 10 + 30 + 4, abs=1.0)
    assert warp.iteration_cycles(body, LAT, RATES, num_warps=8) >= one


def test_tensor_and_global_memory_instructions_cost_only_their_issue_slot():
    body = ("HGMMA.64x64x16.F32|R24 R25|R24 R25", "WARPGROUP.DEPBAR.LE||", "FADD|R1|R24", "LDGSTS.E.128||R8")
    assert warp.iteration_cycles(body, LAT, RATES) == pytest.approx(4.0)


def test_no_latencies_no_floor():
    assert warp.iteration_cycles(chain(10), {}, RATES) == 0.0


SASS = """
        /*0100*/                   MOV R1, c[0x0][0x28] ;
.L_x_0:
        /*0110*/                   LDS.128 R4, [R2+0x10] ;
        /*0120*/              @!P0 FFMA R8, R4, R7, R8 ;
        /*0130*/                   SHFL.BFLY PT, R9, R8, 0x1, 0x1f ;
        /*0140*/                   STG.E.64 desc[UR4][R12.64], R8 ;
        /*0150*/                   ISETP.NE.AND P0, PT, R3, RZ, PT ;
        /*0160*/                   HGMMA.64x16x16.F32 R24, gdesc[UR8], R24 ;
        /*0170*/              @P0 BRA `(.L_x_0) ;
        /*0180*/                   EXIT ;
"""


def test_loop_bodies_from_nvdisasm():
    (body,) = loop_bodies(SASS)
    assert len(body) == 7 and not any(b.startswith("MOV") for b in body)
    assert body[0] == "LDS.128|R4 R5 R6 R7|R2"
    assert body[1] == "FFMA|R8|P0 R4 R7 R8"                  # the guard predicate is read
    assert body[2] == "SHFL.BFLY|R9|R8"
    assert body[3] == "STG.E.64||UR4 R12 R13 R8 R9"          # a 64-bit address and a 64-bit value
    assert body[4] == "ISETP.NE.AND|P0|R3"
    dst, src = body[5].split("|")[1:]
    assert dst.split() == [f"R{24 + k}" for k in range(8)]   # 64x16 fp32 over a warpgroup: 8 registers
    assert src.split()[-8:] == dst.split()                  # and it accumulates into them
    assert body[6] == "BRA||P0"


def test_instruction_without_destination():
    assert instruction("BAR", ".SYNC.DEFER_BLOCKING", "0x0", None) == "BAR.SYNC.DEFER_BLOCKING||"
    assert instruction("STS", ".128", "[R3], R8", None) == "STS.128||R3 R8 R9 R10 R11"


def test_min_cycles_is_a_floor_not_a_pipe_hold():
    from types import SimpleNamespace

    from gpusim.backends.sim.engine import LaunchSim

    me = SimpleNamespace(counters=SimpleNamespace(vector_flops=0.0, sfu_ops=0.0, tensor_flops=0.0), cross_block=0.0)
    sm = SimpleNamespace(pipe_free=[0.0, 0.0, 0.0], pipe_busy=[0.0, 0.0, 0.0])
    step = SimtStep(vector_cycles=100.0, sfu_cycles=0.0, flops=0.0, sfu_ops=0.0, min_cycles=300.0)
    assert LaunchSim._compute(me, step, sm, 10.0) == 310.0      # the CTA's chain takes 300 cycles
    assert sm.pipe_free[1] == 110.0                           # but holds the vector pipe for 100
    plain = SimtStep(vector_cycles=100.0, sfu_cycles=0.0, flops=0.0, sfu_ops=0.0)
    assert LaunchSim._compute(me, plain, sm, 110.0) == 210.0


def test_straight_body_is_the_code_outside_loops():
    from gpusim.toolchain.sass_deps import straight_body

    body = straight_body(SASS)
    assert [b.split("|")[0] for b in body] == ["MOV", "EXIT"]


def test_a_single_pass_takes_its_chain_once():
    # one pass of a 10-deep chain: the last instruction issues after 9 latencies of 4 cycles
    assert warp.pass_cycles(chain(10), LAT, RATES) == pytest.approx(37.0)
    # a barrier between two 5-deep chains: both chains, the barrier's 10 cycles, and the two warps
    # sharing each scheduler interleaving (8 warps on 4 schedulers)
    body = chain(5) + ("BAR.SYNC||",) + chain(5)
    assert 2 * 17 + LAT["barrier"] <= warp.pass_cycles(body, LAT, RATES, num_warps=8) <= 2 * 20 + LAT["barrier"]
    assert warp.pass_cycles((), LAT, RATES) == 0.0


def test_straight_latency_is_shared_among_the_steps_outside_loops():
    from types import SimpleNamespace

    from gpusim.backends.sim import compiled_steps

    a = SimtStep(vector_cycles=10.0, sfu_cycles=0.0, flops=0.0, sfu_ops=0.0)
    b = SimtStep(vector_cycles=30.0, sfu_cycles=0.0, flops=0.0, sfu_ops=0.0)
    loop = SimpleNamespace()          # anything that is not a SimtStep passes through untouched
    out = compiled_steps._straight_latency((a, loop, b), 400.0)
    assert out[1] is loop
    assert (out[0].min_cycles, out[2].min_cycles) == pytest.approx((100.0, 300.0))
    assert compiled_steps._straight_latency((a, b), 0.0) == (a, b)


def test_a_reloaded_spill_is_waited_for_and_a_stored_one_is_not():
    lat = {**LAT, "local": 300}
    reload_then_use = ("LDL|R1|R9", "FFMA|R2|R1 R1")
    # per pass: the round trip, then the FFMA's issue slot (its latency overlaps the next reload)
    assert warp.iteration_cycles(reload_then_use, lat, RATES) == pytest.approx(301.0)
    store_then_work = ("STL||R9 R1", "FFMA|R2|R1 R1")
    assert warp.iteration_cycles(store_then_work, lat, RATES) == pytest.approx(2.0)     # two issue slots
    assert warp.op_class("LDL.64") == "local" and warp.op_class("STL.128") == "free"


def test_a_spill_reload_takes_the_l2_round_trip_unless_the_config_names_its_own():
    from gpusim.hardware import load_gpu

    cfg = load_gpu("h100")
    assert warp.latencies(cfg)["local"] == cfg.l2_latency_cycles
    own = cfg.model_copy(update={"dependent_latency_cycles": {**cfg.dependent_latency_cycles, "local": 40.0}})
    assert warp.latencies(own)["local"] == 40.0


def _reloads(n):
    """n independent spill reloads, each read once by an add."""
    return tuple(f"LDL|R{10 + k}|R1" for k in range(n)) + tuple(f"FADD|R{40 + k}|R{10 + k} R2" for k in range(n))


def test_a_warp_keeps_only_its_reload_slots_in_flight():
    lat = {**LAT, "local": 300}
    # no limit: the twelve reloads issue back to back and return together, about one round trip
    free = warp.iteration_cycles(_reloads(12), lat, RATES)
    assert free < 300 + 2 * 12 + 5
    # three slots: four rounds of three reloads, each a round trip
    assert warp.iteration_cycles(_reloads(12), lat, RATES, reloads_in_flight=3) == pytest.approx(4 * 300, rel=0.05)


def test_more_reload_slots_never_take_longer():
    lat = {**LAT, "local": 300}
    times = [warp.iteration_cycles(_reloads(12), lat, RATES, num_warps=8, reloads_in_flight=k) for k in range(1, 14)]
    assert all(b <= a + 1e-9 for a, b in zip(times, times[1:]))
    assert times[-1] == pytest.approx(warp.iteration_cycles(_reloads(12), lat, RATES, num_warps=8))
