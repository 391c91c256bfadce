"""Published NCCL all-reduce figures on one NVLink 4 / NVSwitch node (HGX H100 and HGX H200 share the
baseboard: 18 NVLink 4 links per GPU, 900 GB/s both directions, four third-generation NVSwitch
chips). Each row: (GPUs, buffer bytes, bus bandwidth in GB/s as nccl-tests defines it, algorithm
NCCL ran: "" = its own choice, source). ``collectives_fit.py`` fits the config's NCCL fields to
some rows (``FIT``) and checks the others.
"""
from __future__ import annotations

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

STAS_H200 = ("stas00/ml-engineering network/benchmarks/results/all-reduce-8xH200.md (commit 744d01e): "
             "8x H200 SXM, NV18, nccl 2.27.7, torch all_reduce_bench.py (one all_reduce timed after a barrier)")
STAS_SHARP = ("stas00/ml-engineering network/README.md, SHARP (commit 744d01e): 8x H200, nccl-tests, "
              "NCCL_NVLS_ENABLE=0/1")
NCCL_1455 = "NVIDIA/nccl issue 1455: 8x H100 SXM, all_reduce_perf -b 2G -e 4G, NCCL_ALGO=RING / NVLS"
NCCL_TESTS_212 = "NVIDIA/nccl-tests issue 212 (sjeaugey): H100, ring ~370 GB/s busbw, NVLS ~480 (algbw ~275) on 8 GPUs"
NCCL_TESTS_290 = "NVIDIA/nccl-tests issue 290 (AddyLaddy): single 8x H100 node, NVLS, 476 GB/s busbw"

# 8x H200, all-reduce, NCCL's choice (ring LL up to 1 MiB, NVLS Simple from 2 MiB: the page's
# NCCL_DEBUG=TUNING note); busbw in GB/s
_H200_TABLE = [(32 * KiB, 1.44), (64 * KiB, 2.93), (128 * KiB, 5.73), (256 * KiB, 11.74), (512 * KiB, 23.94),
               (1 * MiB, 39.93), (2 * MiB, 64.53), (4 * MiB, 107.16), (8 * MiB, 155.53), (16 * MiB, 219.89),
               (32 * MiB, 275.84), (64 * MiB, 346.51), (128 * MiB, 401.93), (256 * MiB, 436.15),
               (512 * MiB, 450.29), (1 * GiB, 463.58), (2 * GiB, 469.17), (4 * GiB, 473.10), (8 * GiB, 477.45),
               (16 * GiB, 482.26)]

ROWS = [(8, b, bw, "", STAS_H200) for b, bw in _H200_TABLE] + [
    # ring forced (NVLS off) and NVLS at 4..8 GPUs, 8 GiB
    (4, 8 * GiB, 363.3, "ring", STAS_SHARP), (5, 8 * GiB, 364.4, "ring", STAS_SHARP),
    (8, 8 * GiB, 365.6, "ring", STAS_SHARP), (8, 16 * GiB, 367.2, "ring", STAS_SHARP),
    (5, 8 * GiB, 414.2, "", STAS_SHARP), (6, 8 * GiB, 435.6, "", STAS_SHARP),
    (7, 8 * GiB, 460.0, "", STAS_SHARP), (8, 8 * GiB, 473.1, "", STAS_SHARP),
    # H100 SXM
    (2, 2 * GiB, 367.0, "ring", NCCL_1455), (8, 2 * GiB, 367.0, "ring", NCCL_1455),
    (8, 4 * GiB, 480.0, "", NCCL_1455), (8, 4 * GiB, 480.0, "", NCCL_TESTS_212),
    (8, 4 * GiB, 476.0, "", NCCL_TESTS_290),
]

# the rows the fit sees: every other size of the H200 sweep from 32 KiB (the rest, and every other
# row, are checks it never saw), and the ring at 16 GiB for the ring's efficiency
FIT = [r for r in ROWS[:20] if r[1] in (32 * KiB, 128 * KiB, 512 * KiB, 2 * MiB, 8 * MiB, 32 * MiB, 128 * MiB,
                                        512 * MiB, 2 * GiB, 8 * GiB)] + [ROWS[23]]
CHECK = [r for r in ROWS if r not in FIT]
