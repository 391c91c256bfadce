"""Derive the named H100 and A100 configs from the H200 measured on our machine.

The H100 SXM5 has the H200's die (GH100: same SMs, tensor cores, L2 slices, clocks and 700 W
limit); only its memory system differs. The A100 is an older SM (Ampere: mma.sync, no wgmma or
TMA, 164 KiB of shared memory, 108 SMs at 1.41 GHz) whose numbers come from its datasheet and
published microbenchmarks; where neither gives a number, the H200's measured *efficiency*
(measured / datasheet on the same kind of unit) is carried over and the source says so.

usage: python benchmarks/derive_configs.py [--from configs/h200.yaml] [--out configs]
Writes h100.yaml, a100.yaml and a100-80gb.yaml; every field keeps or gets a source.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim.hardware import GPUConfig  # noqa: E402
from gpusim.hw.config_yaml import dump_config  # noqa: E402

H200_HBM_DATASHEET = 4.8e12        # H: H200 SXM datasheet, 4.8 TB/s HBM3e
H200_TENSOR_DATASHEET_PER_CLK = 4 * 512 * 2   # H: 4 tensor cores x 512 dense FP16 FMA per SM per clock (Hopper)
A100_TENSOR_PER_CLK = 4 * 256 * 2             # H: A100 whitepaper, 256 dense FP16 FMA per tensor core per clock
FP32_LANES = 128                              # H: 128 FP32 lanes per SM on Hopper (Hopper in-depth)
A100_FP32_LANES = 64                          # H: A100 whitepaper, 64 FP32 cores per SM (GA100)
NOMINAL_L2_BYTES_PER_CLK = 5120               # H: A100 whitepaper, L2 read bandwidth 5120 B/clk


def _measured_fractions(h200: GPUConfig) -> dict:
    clk = h200.clock_hz
    return {
        "hbm_read": h200.hbm_read_bandwidth_bytes_per_s / H200_HBM_DATASHEET,
        "hbm_write": h200.hbm_write_bandwidth_bytes_per_s / H200_HBM_DATASHEET,
        "hbm_copy": (h200.hbm_copy_bandwidth_bytes_per_s or h200.hbm_read_bandwidth_bytes_per_s) / H200_HBM_DATASHEET,
        "tensor": {dt: v / (h200.sm_count * H200_TENSOR_DATASHEET_PER_CLK * clk * (0.5 if dt == "fp32" else 1.0))
                   for dt, v in h200.tensor_flops_per_s.items()},
        "fp32": h200.fp32_flops_per_s / (h200.sm_count * FP32_LANES * 2 * clk),
        "l2_per_clk": h200.l2_bandwidth_bytes_per_s / clk,
    }


def _base(h200: GPUConfig) -> tuple[dict, dict]:
    d = h200.model_dump()
    d.pop("measurements", None)
    d["provenance"] = {"derived_by": "benchmarks/derive_configs.py", "from": f"{h200.name} ({h200.config_hash()})"}
    sources = {k: f"same as the H200 measured on our machine: {v}" for k, v in h200.sources.items()}
    return d, sources


def h100(h200: GPUConfig) -> dict:
    d, src = _base(h200)
    f = _measured_fractions(h200)
    hbm = 3.35e12                  # M: H100 SXM5 datasheet, 3.35 TB/s HBM3
    d.update(name="h100", description="NVIDIA H100 SXM5 80GB: the H200's measured SM with H100's memory system",
             l2_bytes=50 * 2 ** 20, hbm_bytes=80 * 2 ** 30,
             hbm_read_bandwidth_bytes_per_s=hbm * f["hbm_read"], hbm_write_bandwidth_bytes_per_s=hbm * f["hbm_write"],
             hbm_copy_bandwidth_bytes_per_s=hbm * f["hbm_copy"])
    src.update(
        l2_bytes="H: Hopper in-depth, 50 MB L2 on H100 SXM5",
        hbm_bytes="H: 80 GB HBM3",
        hbm_read_bandwidth_bytes_per_s=f"D: 3.35 TB/s (M: H100 SXM5 datasheet) x {f['hbm_read']:.3f}, the fraction of "
                                       "its 4.8 TB/s datasheet the H200 read-streaming benchmark reached",
        hbm_write_bandwidth_bytes_per_s=f"D: 3.35 TB/s x {f['hbm_write']:.3f} (H200 measured write fraction)",
        hbm_copy_bandwidth_bytes_per_s=f"D: 3.35 TB/s x {f['hbm_copy']:.3f} (H200 measured copy fraction)",
    )
    d["sources"] = src
    return d


def a100(h200: GPUConfig, gb: int = 40) -> dict:
    d, src = _base(h200)
    f = _measured_fractions(h200)
    clk = 1.41e9                  # H: A100 whitepaper boost clock
    sms = 108                     # H: A100 whitepaper
    hbm = 1555e9 if gb == 40 else 2039e9    # H: 40 GB HBM2 1555 GB/s; M: 80 GB HBM2e 2039 GB/s
    tensor = {dt: sms * A100_TENSOR_PER_CLK * clk * (0.5 if dt == "fp32" else 1.0) * f["tensor"][dt]
              for dt in h200.tensor_flops_per_s}
    d.update(name="a100" if gb == 40 else "a100-80gb",
             description=f"NVIDIA A100 SXM4 {gb}GB (Ampere): datasheet and published microbenchmarks; "
                         "efficiencies the H200 measured where no Ampere figure exists",
             sm_count=sms, clock_hz=clk, sram_bytes_per_sm=164 * 1024, sram_bytes_per_cta_max=163 * 1024,
             l2_bytes=40 * 2 ** 20, l2_bandwidth_bytes_per_s=min(f["l2_per_clk"], NOMINAL_L2_BYTES_PER_CLK) * clk,
             l2_latency_cycles=262.0, hbm_latency_cycles=466.0, sm_load_bytes_per_clk=64.0,
             hbm_bytes=gb * 2 ** 30, hbm_read_bandwidth_bytes_per_s=hbm * f["hbm_read"],
             hbm_write_bandwidth_bytes_per_s=hbm * f["hbm_write"], hbm_copy_bandwidth_bytes_per_s=hbm * f["hbm_copy"],
             tensor_flops_per_s=tensor, fp32_flops_per_s=sms * A100_FP32_LANES * 2 * clk * f["fp32"],
             simt_lane_ops_per_clk_per_sm={k: v * A100_FP32_LANES / FP32_LANES
                                           for k, v in h200.simt_lane_ops_per_clk_per_sm.items()},
             sfu_ops_per_clk_per_sm=16.0, power_limit_w=None, idle_power_w=0.0, activity_energy_j={},
             request_latency_cycles={w: {n: round(x * clk / h200.clock_hz, 1) for n, x in t.items()}
                                     for w, t in h200.request_latency_cycles.items()},
             l2_coalesced_fraction={})
    if "compute_capability" in d:
        d["compute_capability"] = 80          # H: sm_80 (Ampere GA100): Triton compiles mma.sync, no wgmma
    src.update(
        compute_capability="H: CUDA compute capability 8.0 (GA100)",
        sm_count="H: A100 whitepaper, 108 SMs", clock_hz="H: A100 whitepaper, 1410 MHz boost",
        sram_bytes_per_sm="H: Ampere tuning guide, 164 KB shared memory per SM",
        sram_bytes_per_cta_max="H: Ampere tuning guide, 163 KB per thread block",
        l2_bytes="H: A100 whitepaper, 40 MB L2",
        l2_bandwidth_bytes_per_s=f"D: {f['l2_per_clk']:.0f} B/clk measured on the H200's L2 (below the A100 "
                                 "whitepaper's nominal 5120 B/clk) x 1.41 GHz",
        l2_latency_cycles="M: Luo et al. 2024, A100 L2 hit ~262 cycles",
        hbm_latency_cycles="M: Luo et al. 2024, A100 global memory ~466 cycles",
        sm_load_bytes_per_clk="E: 64 B/clk L2->SM fill per SM (Ampere L1 line fill width)",
        hbm_bytes=f"H: {gb} GB",
        hbm_read_bandwidth_bytes_per_s=f"D: {hbm / 1e9:.0f} GB/s datasheet x {f['hbm_read']:.3f}, the fraction of its "
                                       "datasheet bandwidth the H200 read-streaming benchmark reached",
        hbm_write_bandwidth_bytes_per_s=f"D: {hbm / 1e9:.0f} GB/s x {f['hbm_write']:.3f} (H200 measured write fraction)",
        hbm_copy_bandwidth_bytes_per_s=f"D: {hbm / 1e9:.0f} GB/s x {f['hbm_copy']:.3f} (H200 measured copy fraction)",
        tensor_flops_per_s="D: 312 TFLOP/s fp16/bf16, 156 TF32 (H: A100 whitepaper) x the fraction of the datasheet "
                           "rate the H200's best measured tile reached (" + ", ".join(
                               f"{k} {v:.3f}" for k, v in f["tensor"].items()) + "); published A100 cuBLAS fp16 "
                           "GEMMs reach ~80-90% of 312 (M)",
        fp32_flops_per_s=f"D: 19.5 TFLOP/s (H) x {f['fp32']:.3f} (H200 measured FP32 fraction)",
        sfu_ops_per_clk_per_sm="H: 16 special-function ops per clock per SM (Ampere and Hopper)",
        tensor_tile_efficiency="E: the H200's measured efficiency per tile shape relative to its best tile; Ampere's "
                               "mma.sync has no wgmma, so small tiles may differ (not measured here)",
        simt_lane_ops_per_clk_per_sm="D: the H200's measured per-SM-per-clock rates x 64/128 (GA100 has 64 FP32 lanes per SM, GH100 128)",
        tensor_simt_overlap="E: measured on the H200; not measured on Ampere",
        cta_dispatch_ns="E: measured on the H200; not measured on Ampere",
        cta_async_fill_bytes_per_clk="E: measured on the H200 (benchmarks/micro_fidelity.py mlp); Ampere has the "
                                     "same cp.async path (not measured on Ampere)",
        warp_load_bytes_per_clk="E: measured on the H200 (benchmarks/micro_fidelity.py mlp); not measured on Ampere",
        hbm_piece_efficiency="E: measured on the H200's HBM3e (benchmarks/micro_fidelity.py dramchunk); the A100's "
                             "HBM2/HBM2e pages are not measured here",
        cp_async_min_bytes="H: PTX ISA, cp.async (sm_80 and later) copies 4, 8 or 16 bytes",
        l2_fetch_bytes="E: measured on the H200 (ncu); Ampere's L2 is sectored the same way and CUDA 11 "
                       "introduced cudaLimitMaxL2FetchGranularity for it (not measured on Ampere)",
        request_latency_cycles="E: the H200's measured extra cycles (benchmarks/micro_fidelity.py sectorlines, "
                               "sectorhits) at the same nanoseconds, x 1.41/1.98 for the A100's clock; not "
                               "measured on Ampere",
        l2_coalesced_fraction="not set: the H200's L2 request coalescer (lrc__ in ncu) is a Hopper unit; whether and how "
                              "much the A100's L2 merges reads of one line by several SMs is not measured here, so "
                              "nothing merges (every sector costs the slices)",
        launch_overhead_us="E: measured on the H200 host; launch cost is mostly driver and host side",
        sync_overhead_us="E: measured on the H200 host",
        power_limit_w="not set: no Ampere clock or power measurement here, so the A100's clock stays at its 1.41 GHz "
                      "boost (the H200's energies belong to another process node; an A100 under dense tensor work "
                      "can run below its boost clock at its 400 W limit, which this config does not model)",
        idle_power_w="not set (see power_limit_w)", activity_energy_j="not set (see power_limit_w)",
    )
    if gb == 40:
        _ampere_measured(d, src)
    if h200.l2_write_bandwidth_bytes_per_s:
        ratio = h200.l2_write_bandwidth_bytes_per_s / h200.l2_bandwidth_bytes_per_s
        d["l2_write_bandwidth_bytes_per_s"] = d["l2_bandwidth_bytes_per_s"] * ratio
        src["l2_write_bandwidth_bytes_per_s"] = (f"E: the H200's measured L2 write rate over its read rate ({ratio:.3f}, "
                                                 "benchmarks/l2_write.py) times this part's L2 read rate; no published "
                                                 "Ampere L2 write rate")
    d["sources"] = src
    return d


# Published A100 measurements (docs/history.md, "The `a100` config against published results"). gpu-benches:
# J. Ernst et al., https://github.com/RRZE-HPC/gpu-benches (commit 1038c5d), raw outputs in the repository.
GPU_BENCHES = "RRZE-HPC/gpu-benches (github.com/RRZE-HPC/gpu-benches, commit 1038c5d)"
A100_40_STREAM = {"read": 1500e9, "write": 1539e9, "copy": 1382e9}   # gpu-stream/a100_40.txt, 100% occupancy
A100_L2_READ = 5391.1e9          # gpu-l2-cache/a100_80.txt: median over 4 MiB < W <= 30 MiB (25 sizes, 4.0-5.45 TB/s)
CC80 = "H: CUDA C++ Programming Guide, compute capability 8.0 (features and technical specifications table)"


def _ampere_measured(d: dict, src: dict) -> None:
    """The A100 40GB fields a published Ampere measurement or an sm_80 specification gives
    (the values the H200 lent them before, where an Ampere number now exists)."""
    d.update(hbm_read_bandwidth_bytes_per_s=A100_40_STREAM["read"],
             hbm_write_bandwidth_bytes_per_s=A100_40_STREAM["write"],
             hbm_copy_bandwidth_bytes_per_s=A100_40_STREAM["copy"],
             l2_bandwidth_bytes_per_s=A100_L2_READ)
    src.update(
        hbm_read_bandwidth_bytes_per_s=f"M: {GPU_BENCHES}, gpu-stream/a100_40.txt (A100 40GB): read kernel (sum = A[i], "
                                       "fp64) at 100% occupancy, 1500 GB/s = 0.965 of the 1555 GB/s datasheet",
        hbm_write_bandwidth_bytes_per_s=f"M: {GPU_BENCHES}, gpu-stream/a100_40.txt (A100 40GB): init kernel (A[i] = c, "
                                        "fp64), 1536-1539 GB/s from 25% occupancy up; 1539 GB/s = 0.990 of datasheet",
        hbm_copy_bandwidth_bytes_per_s=f"M: {GPU_BENCHES}, gpu-stream/a100_40.txt (A100 40GB): scale kernel (A[i] = "
                                       "B[i] * c, fp64, one load and one store stream) at 100% occupancy, 1382 GB/s "
                                       "read + write = 0.889 of datasheet (triad 1358 GB/s)",
        l2_bandwidth_bytes_per_s=f"M: {GPU_BENCHES}, gpu-l2-cache/a100_80.txt (A100 80GB SXM, the same 40 MB L2 and "
                                 "clock as the 40GB part): all SMs read a working set W repeatedly (fp64 loads); median "
                                 "over 4 MiB < W <= 30 MiB (3/4 of L2, as for the H200), 25 sizes, 5391 GB/s (range "
                                 "4000-5448: above 20 MB a line no longer fits both L2 partitions); 3823 B/clk at 1.41 GHz, "
                                 "below the whitepaper's 5120 B/clk",
        registers_per_sm=f"{CC80}: 64K 32-bit registers per SM",
        max_registers_per_thread=f"{CC80}: 255 registers per thread",
        max_ctas_per_sm=f"{CC80}: 32 resident blocks per SM",
        max_warps_per_sm=f"{CC80}: 64 resident warps (2048 threads) per SM",
        warp_issue_per_clk_per_sm="H: A100 whitepaper (NVIDIA A100 Tensor Core GPU Architecture, 2020): four SM "
                                  "partitions, each with one warp scheduler dispatching one warp-instruction per clock",
        shuffle_lanes_per_clk_per_sm="H: CUDA C++ Programming Guide, arithmetic instruction throughput, cc 8.0: 32 "
                                     "warp-shuffle results per clock per SM",
        shared_bytes_per_clk_per_sm="H: CUDA C++ Programming Guide, shared memory (32 banks of 4 bytes); "
                                    f"{GPU_BENCHES} gpu-cache measures close to 128 B/clk/SM from the A100's L1",
        l2_line_bytes="H: 128-byte L2 cache lines of four 32-byte sectors (CUDA C++ best practices guide; "
                      "Ampere tuning guide)",
        l2_latency_cycles="M: Luo et al., Benchmarking and Dissecting the Nvidia Hopper GPU Architecture (IPDPS "
                          "2024, arXiv 2402.13499), A100 L2 hit 261.5 cycles; gpu-benches gpu-latency/a100_80.txt "
                          "measures 205 cycles from the near L2 partition and about 400 from the far one",
        hbm_latency_cycles="M: Luo et al. 2024 (arXiv 2402.13499), A100 global memory 466 cycles; gpu-benches "
                           "gpu-latency/a100_80.txt about 550 cycles on an A100 80GB",
        tensor_flops_per_s=src["tensor_flops_per_s"] + "; the best published full GEMM, cuBLAS bf16 271.2 TFLOP/s "
                           "(0.869) at 1024x10240x5120 (S. Bekman, ML Engineering, maximum achievable matmul FLOPS "
                           "table), bounds the pipe rate from below; no Ampere measurement of the pipe itself",
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="src", default=str(ROOT / "configs" / "h200.yaml"))
    ap.add_argument("--out", default=str(ROOT / "configs"))
    args = ap.parse_args(argv)
    h200 = GPUConfig.model_validate(yaml.safe_load(Path(args.src).read_text()))
    out = Path(args.out)
    header = ("# Derived by benchmarks/derive_configs.py from the H200 measured on our machine; do not edit by hand.\n"
              "# Letters in sources: H primary source, M secondary/figure, D derived arithmetic, E estimate.\n")
    for d in (h100(h200), a100(h200, 40), a100(h200, 80)):
        cfg = GPUConfig.model_validate(d)       # validators run on the derived values
        path = out / f"{cfg.name}.yaml"
        path.write_text(dump_config(cfg.model_dump(exclude={"measurements"}), header))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
