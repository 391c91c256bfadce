"""The L2's write rate against its read rate (round 16), each on its own.

``ctas`` CTAs of 4 warps sweep an L2-resident buffer (8 or 16 MiB, well inside the H200's L2) P
times: in ``write`` each CTA stores its slice of 16-byte vectors, in ``read`` it loads them past the L1
(``.cg``, as the L2 sweep of the calibration does) and keeps a running sum (stored once at the end so nothing is optimised away). Writes to lines the L2
already holds never reach the DRAM until eviction, so both sides measure the SM <-> L2 path. The
rate is bytes moved over the time ``triton.testing.do_bench`` gives (its 256 MiB flush runs
before each call, outside the timed region); every result is checked exactly.

Why: ncu on spilling kernels (micro/ncu_probe_round16.json) shows every local store written
through the L1 to the L2 (``l1tex__m_l1tex2xbar_write_bytes`` = local store sectors x 32 B), and
spill_live at 384 values per thread, whose traffic is almost all such stores, moves them at about
3.7-4.0 TB/s, well under the 9.07 TB/s the L2 reads at.

``mixed`` reads and writes in one loop (264 CTAs, 1, 2 or 4 bytes read per byte written): whether\nthe two directions share one path.

usage: python benchmarks/l2_write.py OUT.json      (on a machine with an NVIDIA GPU)"""
from __future__ import annotations

import json
import sys

import torch
import triton
import triton.language as tl

BLOCK = 4096     # fp32 per CTA step: 32 per thread of 4 warps, stored as 16-byte vectors


@triton.jit
def _write(buf, n_per_cta, P, BLOCK: tl.constexpr):
    base = tl.program_id(0) * n_per_cta
    offs = tl.arange(0, BLOCK)
    for p in range(P):
        v = (offs + p).to(tl.float32)
        for i in range(0, n_per_cta, BLOCK):
            tl.store(buf + base + i + offs, v)


@triton.jit
def _read(buf, out, n_per_cta, P, BLOCK: tl.constexpr):
    base = tl.program_id(0) * n_per_cta
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for p in range(P):
        for i in range(0, n_per_cta, BLOCK):
            acc += tl.load(buf + base + i + offs, cache_modifier=".cg")   # L2, not the L1
    tl.store(out + tl.program_id(0) * BLOCK + offs, acc)


@triton.jit
def _mixed(src, dst, out, n_per_cta, P, RATIO: tl.constexpr, STORE: tl.constexpr, BLOCK: tl.constexpr):
    # RATIO blocks read (.cg) for every block written, in the same loop: do reads and writes share
    # the SM <-> L2 path (time = reads / read rate + writes / write rate) or not (the longer one)?
    base = tl.program_id(0) * n_per_cta
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for p in range(P):
        for i in range(0, n_per_cta, BLOCK):
            for r in tl.static_range(RATIO):
                acc += tl.load(src + (base + i) * RATIO + r * BLOCK + offs, cache_modifier=".cg")
            if STORE:
                tl.store(dst + base + i + offs, acc)
    tl.store(out + tl.program_id(0) * BLOCK + offs, acc)


def mixed() -> list:
    rows = []
    ctas, P = 264, 32
    n_w = 12 * 2**20 // 4                    # 8.6 MiB written (2 blocks per CTA), 8.6-35 MiB read: L2-resident
    n_per_cta = n_w // ctas // BLOCK * BLOCK
    for ratio in (1, 2, 4):
        src = torch.ones(ctas * n_per_cta * ratio, device="cuda", dtype=torch.float32)
        dst = torch.zeros(ctas * n_per_cta, device="cuda", dtype=torch.float32)
        out = torch.empty(ctas * BLOCK, device="cuda", dtype=torch.float32)
        t = {}
        for store in (0, 1):    # the same loop without its stores: the reads alone
            t[store] = 1e3 * triton.testing.do_bench(lambda: _mixed[(ctas,)](src, dst, out, n_per_cta, P, RATIO=ratio,
                                                                             STORE=store, BLOCK=BLOCK, num_warps=4))
        ok = bool(torch.all(out == float(P * (n_per_cta // BLOCK) * ratio)))
        us, read_only = t[1], t[0]
        rd, wr = src.numel() * 4 * P, dst.numel() * 4 * P
        rows.append({"ctas": ctas, "read_per_write": ratio, "read_bytes": rd, "write_bytes": wr, "us": us,
                     "reads_alone_us": read_only, "writes_alone_us_at_4_28": wr / 4.28e6, "ok": ok})
        print("mixed", rows[-1], flush=True)
    return rows


def measure() -> dict:
    props = torch.cuda.get_device_properties(0)
    rows = []
    for mib in (8, 16, 32):
        for ctas in (132, 264):
            n = mib * 2**20 // 4
            n_per_cta = n // ctas // BLOCK * BLOCK
            used = n_per_cta * ctas
            P = 32
            buf = torch.zeros(n, device="cuda", dtype=torch.float32)
            out = torch.empty(ctas * BLOCK, device="cuda", dtype=torch.float32)
            w_us = 1e3 * triton.testing.do_bench(lambda: _write[(ctas,)](buf, n_per_cta, P, BLOCK=BLOCK, num_warps=4))   # ms -> us
            want = (torch.arange(BLOCK, device="cuda", dtype=torch.float32) + (P - 1)).repeat(used // BLOCK)
            ok_w = bool(torch.equal(buf[:used], want))
            buf[:used] = 1.0
            r_us = 1e3 * triton.testing.do_bench(lambda: _read[(ctas,)](buf, out, n_per_cta, P, BLOCK=BLOCK, num_warps=4))
            ok_r = bool(torch.all(out == float(P * (n_per_cta // BLOCK))))
            moved = used * 4 * P
            rows.append({"buffer_mib": mib, "ctas": ctas, "passes": P, "bytes": moved,
                         "write_us": w_us, "read_us": r_us, "write_tb_s": moved / w_us / 1e6,
                         "read_tb_s": moved / r_us / 1e6, "ok_write": ok_w, "ok_read": ok_r})
            print(rows[-1], flush=True)
    mix = mixed()
    return {"device": props.name, "mixed": mix, "sm_count": props.multi_processor_count, "triton": triton.__version__,
            "torch": torch.__version__, "rows": rows}


if __name__ == "__main__":
    res = measure()
    with open(sys.argv[1], "w") as f:
        json.dump(res, f, indent=1)
