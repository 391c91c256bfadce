"""Where a kernel's time goes on the GPU, by Nsight Compute: issue activity, warp stall reasons,
tensor-pipe and L2 activity of chosen validation points (run on a machine with an NVIDIA GPU).

The model is judged on time alone; when it misses, these counters say which mechanism is missing
(a latency-bound CTA stalls on its scoreboard, a bandwidth-bound one on its memory throttles).
Each point is one built-in kernel with its parameters, launched once under ``ncu`` through the same
Triton lowering ``gpusim validate`` times (its output checked against numpy in float64).

usage: python benchmarks/ncu_probe.py POINTS.yaml OUT.json      profile every point (runs ncu)
       python benchmarks/ncu_probe.py --child POINTS.yaml       (what ncu runs: each point once)
POINTS.yaml: a list of {kernel: NAME, params: {...}, label: TEXT}.
Only metrics that this ncu knows (``ncu --query-metrics``) are asked for.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STALLS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
          "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
          "short_scoreboard", "sleeping", "tex_throttle", "wait")
WANTED = (["gpu__time_duration.sum", "sm__cycles_elapsed.avg", "smsp__inst_executed.sum",
           "smsp__issue_active.avg.pct_of_peak_sustained_active", "sm__warps_active.avg.pct_of_peak_sustained_active",
           "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
           "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
           "sm__inst_executed_pipe_tensor_op_gmma.sum", "sm__inst_executed_pipe_xu.sum",
           "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
           "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
           "sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_active",
           "lts__t_bytes.sum", "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_requests_srcunit_tex_op_read.sum",
           "lts__t_sector_hit_rate.pct", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
           # round 8: how much of a line an L2 miss fetches
           "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
           "dram__sectors_read.sum",
           # round 9: L2 miss requests against missed sectors (a row's second sector: same request or its own)
           "lts__t_requests_srcunit_tex_op_read_lookup_miss.sum",
           "l1tex__t_sector_hit_rate.pct", "l1tex__m_xbar2l1tex_read_bytes.sum",
           "l1tex__throughput.avg.pct_of_peak_sustained_active", "dram__bytes_read.sum", "dram__bytes_write.sum",
           "smsp__warps_launched.sum",
           # the load/store path (round 7: narrow accesses)
           "smsp__inst_executed_op_ldgsts.sum", "smsp__inst_executed_op_global_ld.sum",
           "smsp__inst_executed_op_global_st.sum", "smsp__inst_executed_op_shared_st.sum",
           "smsp__inst_executed_op_shared_ld.sum", "smsp__inst_executed_pipe_lsu.sum",
           "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum",
           "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
           "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
           "l1tex__data_pipe_lsu_wavefronts.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
           "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
           "l1tex__lsuin_requests.sum", "l1tex__f_wavefronts.sum", "l1tex__m_l1tex2xbar_write_bytes.sum",
           "lts__t_sectors_srcunit_tex_op_write.sum", "lts__t_requests_srcunit_tex_op_write.sum",
           "l1tex__lsu_writeback_active.avg.pct_of_peak_sustained_active",
           "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed",
           "smsp__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed", "sm__warps_active.avg.per_cycle_active",
           "lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
           "lts__d_sectors_fill_sysmem.sum", "lts__t_sectors_op_write.sum", "dram__sectors_read.sum", "dram__sectors_write.sum",
           "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss.sum", "sm__ctas_launched.sum",
           # round 16: register spills (local memory through the L1, then the L2)
           "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
           "l1tex__t_requests_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_local_op_st.sum",
           "l1tex__t_sectors_pipe_lsu_mem_local_op_ld_lookup_hit.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st_lookup_hit.sum",
           "smsp__inst_executed_op_local_ld.sum", "smsp__inst_executed_op_local_st.sum",
           "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum", "launch__stack_size",
           "launch__occupancy_limit_registers", "launch__registers_per_thread", "sm__maximum_warps_per_active_cycle_pct"]
          + [f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio" for s in STALLS])


def child(points_path: str) -> int:
    """Launch every point's kernels once (under ncu), checking each result against numpy."""
    from gpusim.backends import numpy_exec
    from gpusim.backends.triton.run import run_workload
    from gpusim.hw.validate.measure import check_outputs
    from gpusim.kernels import build

    for pt in yaml.safe_load(Path(points_path).read_text()):
        w = build(pt["kernel"], pt["params"])
        inputs = numpy_exec.random_inputs(w, 0)
        out = run_workload(w, inputs, device=os.environ.get("NCU_PROBE_DEVICE", "cuda"))   # each launch once
        err, how = check_outputs(w, out, inputs)
        print(f"NCU_PROBE_POINT {pt.get('label', pt['kernel'])} max_rel_err {err:.2e} ({how})", file=sys.stderr, flush=True)
    return 0


def known_metrics(ncu: str) -> set:
    out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120).stdout
    return {ln.split()[0] for ln in out.splitlines() if ln.strip() and not ln.startswith(("-", "Device", "Metric"))}


def main(argv) -> int:
    if argv and argv[0] == "--child":
        return child(argv[1])
    points_path, out_path = argv
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    known = known_metrics(ncu)
    metrics = [m for m in WANTED if m.rsplit(".", 1)[0] in known or m in known]
    print(f"ncu_probe: {len(metrics)} of {len(WANTED)} metrics known to this ncu", flush=True)
    from gpusim.hw.validate.ncu import parse_ncu_csv

    pts = yaml.safe_load(Path(points_path).read_text())
    cmd = [ncu, "--clock-control", "none", "--metrics", ",".join(metrics), "--csv", "--print-units", "base",
           sys.executable, str(Path(__file__).resolve()), "--child", points_path]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ), timeout=540)
    kernels = [k for k in parse_ncu_csv(p.stdout) if not re.match(r"(void )?(at::|elementwise|vectorized|distribution)",
                                                                  k["kernel"])]
    checks = re.findall(r"NCU_PROBE_POINT (.*) max_rel_err (.*)", p.stderr)
    res = {"points": pts, "checks": checks, "kernels": kernels, "metrics": metrics, "rc": p.returncode,
           "stderr_tail": p.stderr[-3000:]}
    Path(out_path).write_text(json.dumps(res, indent=1))
    for k in kernels:
        m = k["metrics"]
        stalls = sorted(((s, m.get(f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio") or 0) for s in STALLS),
                        key=lambda x: -x[1])[:5]
        print(k["kernel"], {x: m.get(x) for x in ("gpu__time_duration.sum", "smsp__issue_active.avg.pct_of_peak_sustained_active",
                                                  "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
                                                  "lts__t_bytes.sum")},
              [(s, round(v, 2)) for s, v in stalls], flush=True)
    print("checks", checks, "rc", p.returncode, flush=True)
    return 0 if p.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
