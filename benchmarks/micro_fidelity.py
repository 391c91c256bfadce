"""Microbenchmarks for the mechanisms below the tile (run on a machine with an NVIDIA GPU).

Each one isolates one mechanism, so the model's constants come from these and never from a
validation point:

  spill     fp32 values kept live per thread across a loop, past the 255-register limit: time per
            iteration against the spill bytes ptxas reports (local memory through L1/L2).
  vector    a streaming copy at sizes divisible by 16, 8, 4, 2 and 1 element: Triton vectorizes a
            global access only as wide as it can prove aligned, so the achieved bandwidth per width.
  narrowctas the copy of ``vector`` (odd and aligned lengths) on 1 to 2 x sm_count persistent CTAs:
            whether the narrow rate is each SM's own (it scales with the CTAs) or the chip's.
  latency   dependent chains (FMA, MUFU.EX2, tensor-core MMA) with 1..16 warps per SM: cycles per
            dependent instruction with one warp, and how many warps it takes to fill the pipe.
  mlp       memory-level parallelism: one CTA per SM streaming tiles from HBM (or L2) into a dot or
            into registers, against warps, pipelining depth and tile size: the bytes a CTA keeps in
            flight, and the dot's own time without the loads.
  share     L2 bandwidth against how many CTAs read each line (1 to all), L2-resident regions,
            one and two CTAs per SM.
  coalesce  the same lines read by 2..33 CTAs at 0..8 tiles' distance in time (run under ncu for
            the L2 sectors read against the bytes delivered: request coalescing in front of the L2).
  reduction a dependency chain through a row max / sum of an R x C tile (one CTA per SM): the
            latency a reduction adds to a CTA's critical path, against tile shape and warps.
  chains    held-out checks of the warp scoreboard: reduction and softmax-like chains at other
            tile shapes and warp counts than ``reduction`` (benchmarks/fit_latency.py does not fit them).
  l2share   L2-resident reads (ld.global.cg, 8 CTAs per SM) of lines read by one CTA, by 8, or by
            every CTA: the L2's delivery rate to the SMs against how widely a line is shared.
  dramchunk HBM reads of many rows at once, 32 to 2048 bytes of each row per request (8 CTAs per SM,
            each byte read once): the DRAM's rate against the contiguous piece a row gives.
  tilelat   one tile from HBM per iteration, not pipelined, one CTA per SM: its latency against
            how many rows (requests) and bytes per row it is made of.
  sectorlat pointer chains that ask for 1, 2 or 4 sectors of a line per hop, 1 to 32 chains at once,
            missing or hitting in the L2: the latency of a miss against the sectors a request asks for.
  sectorpitch the chains of sectorlat laid out as a streamed tile's rows (P rows a pitch apart) or
            walking the sectors of each line in turn: the latency of a miss against the addresses.
  sectorstream stream_cols's walk along P rows as pointer chains (plain LDG), 32-256 bytes of every
            row per hop: the copy path's share of a streamed tile's round trip.
  streamctas sectorstream's chains (64 rows per CTA) on 1 to 2 x sm_count CTAs at once: a streamed
            tile's round trip against how many SMs ask at the same time.
  sectorlines the chains of sectorlat at 1 to 256 lines per hop, missing and hitting: a CTA's
            round trip against how many lines it asks for at once.
  sectorhits sectorlines' L2 hits with less noise (each chain cycling through 128 lines of its own).
  hmma      dependent mma.sync chains (a 16-row dot, its operands in registers), one CTA per SM:
            cycles per dot against its N and K.
  resources registers / spills / shared memory of the compiled kernels of every point of the given
            scenario files (cache hits after `gpusim validate` compiled them).

usage: python benchmarks/micro_fidelity.py OUT.json [spill] [vector] [narrowctas] [latency] [mlp] [share] [coalesce] [reduction] [chains]
                                             [l2share] [dramchunk] [tilelat] [sectorlat] [sectorpitch] [sectorstream] [streamctas] [sectorlines] [sectorhits] [hmma] [resources SCENARIO...]
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

import numpy as np
import torch
import triton
import triton.language as tl
from triton.testing import do_bench


def _bench_us(fn) -> float:
    return 1000.0 * float(do_bench(fn, warmup=10, rep=40, return_mode="median"))


def _clock_hz() -> float:
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        return float(out) * 1e6
    except Exception:
        return float("nan")


# ----------------------------------------------------------------------------- spill
@triton.jit
def _live_kernel(out_ptr, a, b, T, BLOCK: tl.constexpr):
    # BLOCK fp32 values per CTA all live across the loop: BLOCK / (32 * num_warps) per thread
    offs = tl.arange(0, BLOCK)
    x = offs.to(tl.float32) * 1e-6
    for _ in range(T):
        x = x * a + b
    tl.store(out_ptr + tl.program_id(0) * BLOCK + offs, x)


def spill(sm_count: int, clock: float) -> list:
    rows = []
    T = 4096
    for per_thread in (64, 128, 256, 512):
        nw = 4
        block = per_thread * 32 * nw
        ctas = sm_count   # one CTA per SM: the SM's issue rate is not the limit
        out = torch.empty(ctas * block, device="cuda", dtype=torch.float32)
        k = _init(_live_kernel.warmup(out, 0.999, 0.001, T, BLOCK=block, grid=(ctas,), num_warps=nw))
        _live_kernel[(ctas,)](out, 0.999, 0.001, T, BLOCK=block, num_warps=nw)
        us = _bench_us(lambda: _live_kernel[(ctas,)](out, 0.999, 0.001, T, BLOCK=block, num_warps=nw))
        ref = torch.arange(block, device="cuda", dtype=torch.float32) * 1e-6
        rows.append({"per_thread_fp32": per_thread, "num_warps": nw, "ctas": ctas, "iters": T, "us": us,
                     "n_regs": getattr(k, "n_regs", None), "n_spills": getattr(k, "n_spills", None),
                     "cycles_per_iter": us * 1e-6 * clock / T, "ok": bool(torch.isfinite(out[:block]).all()
                                                                          and out.shape[0] == ctas * block),
                     "ref_first": float(ref[1])})
        print("spill", rows[-1], flush=True)
    return rows


# ----------------------------------------------------------------------------- vector width
@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


def vector(sm_count: int, clock: float) -> list:
    rows = []
    base = 1 << 26
    for dtype in (torch.float16, torch.float32):
        for extra in (0, 8, 4, 2, 1):
            n = base + extra if extra != 0 else base
            x = torch.randn(n, device="cuda").to(dtype)
            y = torch.empty_like(x)
            grid = (triton.cdiv(n, 1024),)
            k = _init(_copy_kernel.warmup(x, y, n, BLOCK=1024, grid=grid, num_warps=4))
            _copy_kernel[grid](x, y, n, BLOCK=1024, num_warps=4)
            ok = bool(torch.equal(x, y))
            us = _bench_us(lambda: _copy_kernel[grid](x, y, n, BLOCK=1024, num_warps=4))
            sass = ""
            try:
                sass = k.asm.get("sass", "") or ""
            except Exception:
                pass
            width = None
            for tag in ("LDG.E.128", "LDG.E.64", "LDG.E.U16", "LDG.E.U8", "LDG.E"):
                if tag in sass:
                    width = tag
                    break
            es = x.element_size()
            rows.append({"dtype": str(dtype).replace("torch.", ""), "n": n, "divisible_by": 16 if extra == 0 else extra,
                         "us": us, "gbps": 2 * n * es / (us * 1e-6) / 1e9, "ok": ok, "n_regs": getattr(k, "n_regs", None),
                         "ldg": width})
            print("vector", rows[-1], flush=True)
            del x, y
    return rows


@triton.jit
def _copy_persistent(x_ptr, y_ptr, n, nblocks, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for b in range(pid, nblocks, tl.num_programs(0)):
        offs = b * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


def narrowctas(sm_count: int, clock: float) -> list:
    rows = []
    for dtype in (torch.float16, torch.float32):
        for n in ((1 << 24) + 1, 1 << 24):
            x = torch.randn(n, device="cuda").to(dtype)
            y = torch.zeros_like(x)
            nblocks = triton.cdiv(n, 1024)
            for ctas in (1, 2, 4, 8, 16, 33, 66, 132, 264):
                ctas = min(ctas, 2 * sm_count)
                y.zero_()
                _copy_persistent[(ctas,)](x, y, n, nblocks, BLOCK=1024, num_warps=4)
                ok = bool(torch.equal(x, y))
                us = _bench_us(lambda: _copy_persistent[(ctas,)](x, y, n, nblocks, BLOCK=1024, num_warps=4))
                sms = min(ctas, sm_count)
                rows.append({"dtype": str(dtype).replace("torch.", ""), "n": n, "ctas": ctas, "us": us, "ok": ok,
                             "gbps": 2 * n * x.element_size() / (us * 1e-6) / 1e9,
                             "access_per_clk_per_sm": 2.0 * n / (us * 1e-6 * clock * sms)})
                print("narrowctas", rows[-1], flush=True)
            del x, y
    return rows


# ----------------------------------------------------------------------------- dependent latency
@triton.jit
def _fma_chain(out_ptr, a, b, T, BLOCK: tl.constexpr):
    x = tl.arange(0, BLOCK).to(tl.float32) * 1e-3
    for _ in range(T):
        x = x * a + b
    tl.store(out_ptr + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), x)


@triton.jit
def _ex2_chain(out_ptr, c, T, BLOCK: tl.constexpr):
    x = tl.arange(0, BLOCK).to(tl.float32) * 1e-3
    for _ in range(T):
        x = tl.exp2(x * c)
    tl.store(out_ptr + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), x)


@triton.jit
def _mma_chain(a_ptr, b_ptr, out_ptr, T, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.zeros((M, N), dtype=tl.float32)
    for _ in range(T):
        acc = tl.dot(a, b, acc)
    tl.store(out_ptr + tl.program_id(0) * M * N + rm[:, None] * N + rn[None, :], acc)


def latency(sm_count: int, clock: float) -> list:
    rows = []
    T = 8192
    for warps_per_sm in (1, 2, 4, 8, 16, 32):
        # one warp per CTA, warps_per_sm CTAs per SM: 32 lanes, one value each (a pure chain per warp)
        ctas = sm_count * warps_per_sm
        out = torch.empty(ctas * 32, device="cuda", dtype=torch.float32)
        for name, fn, args in (("fma", _fma_chain, (0.999, 0.001, T)), ("ex2", _ex2_chain, (0.5, T))):
            fn[(ctas,)](out, *args, BLOCK=32, num_warps=1)
            us = _bench_us(lambda: fn[(ctas,)](out, *args, BLOCK=32, num_warps=1))
            cyc = us * 1e-6 * clock / T
            rows.append({"chain": name, "warps_per_sm": warps_per_sm, "us": us, "cycles_per_iter": cyc,
                         "ok": bool(torch.isfinite(out).all())})
            print("latency", rows[-1], flush=True)
    T2 = 2048
    for M, N, K in ((64, 64, 16), (64, 64, 64), (64, 128, 64), (128, 128, 64)):
        a = torch.randn(M, K, device="cuda", dtype=torch.float16) * 0.01
        b = torch.randn(K, N, device="cuda", dtype=torch.float16) * 0.01
        for ctas_per_sm in (1, 2, 4):
            ctas = sm_count * ctas_per_sm
            out = torch.empty(ctas * M * N, device="cuda", dtype=torch.float32)
            _mma_chain[(ctas,)](a, b, out, T2, M=M, N=N, K=K, num_warps=4)
            ref = (a.float() @ b.float()) * T2  # acc grows by a@b each step
            err = float((out[: M * N].view(M, N) - ref).abs().max() / (ref.abs().max() + 1e-12))
            us = _bench_us(lambda: _mma_chain[(ctas,)](a, b, out, T2, M=M, N=N, K=K, num_warps=4))
            cyc = us * 1e-6 * clock / T2
            rows.append({"chain": "mma", "M": M, "N": N, "K": K, "ctas_per_sm": ctas_per_sm, "num_warps": 4,
                         "us": us, "cycles_per_iter": cyc,
                         "flops_per_clk_per_sm": 2.0 * M * N * K * ctas_per_sm / cyc, "rel_err": err})
            print("latency", rows[-1], flush=True)
    return rows


# ----------------------------------------------------------------------------- memory-level parallelism
@triton.jit
def _dot_only(x_ptr, q_ptr, out_ptr, T, BLOCK_N: tl.constexpr, D: tl.constexpr):
    # the same loop with the tile loaded once, before it: the dot chain's own time
    pid = tl.program_id(0)
    rn = tl.arange(0, BLOCK_N)
    rd = tl.arange(0, D)
    rm = tl.arange(0, 16)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    k = tl.load(x_ptr + rn[:, None] * D + rd[None, :])
    acc = tl.zeros((16, BLOCK_N), dtype=tl.float32)
    for i in range(0, T):
        acc = tl.dot(q, tl.trans(k), acc)
    tl.store(out_ptr + pid * 16 * BLOCK_N + rm[:, None] * BLOCK_N + rn[None, :], acc)


@triton.jit
def _stream_reg(x_ptr, out_ptr, T, BLOCK_N: tl.constexpr, D: tl.constexpr):
    # the same stream into registers (no dot): acc += k, so the loads are plain LDGs unless the
    # pipeliner turns them into asynchronous copies
    pid = tl.program_id(0)
    rn = tl.arange(0, BLOCK_N)
    rd = tl.arange(0, D)
    acc = tl.zeros((BLOCK_N, D), dtype=tl.float32)
    base = x_ptr + pid.to(tl.int64) * T * BLOCK_N * D
    for i in range(0, T):
        acc += tl.load(base + i * BLOCK_N * D + rn[:, None] * D + rd[None, :]).to(tl.float32)
    tl.store(out_ptr + pid * BLOCK_N * D + rn[:, None] * D + rd[None, :], acc)


def mlp(sm_count: int, clock: float) -> list:
    """Bytes one CTA keeps in flight: per-CTA streaming rate from HBM (and from L2) against the
    warps, the pipelining depth and the tile size, one CTA per SM on half or all of the SMs."""
    rows = []
    D = 128
    total = 2 << 30                      # 2 GiB streamed in all: far beyond the 60 MiB L2
    q = torch.randn(16, D, device="cuda", dtype=torch.float16) * 0.05
    x = torch.randn(total // 2, device="cuda", dtype=torch.float16) * 0.05
    for kind in ("dot", "reg", "dot_l2", "dot_compute"):
        for ctas in ((sm_count // 2, sm_count) if kind == "dot" else (sm_count,)):
            for nw in ((4, 8) if kind in ("dot", "dot_compute") else (4,)):
                for bn in (32, 64, 128):
                    for st in ((1, 2, 4) if kind != "dot_compute" else (1,)):
                        tile = bn * D * 2
                        out = torch.empty(ctas * max(16 * bn, bn * D), device="cuda", dtype=torch.float32)
                        T = 1 << int(math.log2(min(4096, total // (ctas * tile))))
                        out = torch.empty(ctas * max(16 * bn, bn * D), device="cuda", dtype=torch.float32)
                        opt = dict(BLOCK_N=bn, D=D, num_warps=nw, num_stages=st)
                        if kind == "reg":
                            fn = lambda: _stream_reg[(ctas,)](x, out, T, **opt)
                        elif kind == "dot_compute":
                            fn = lambda: _dot_only[(ctas,)](x, q, out, T, **opt)
                        elif kind == "dot_l2":      # 64 tiles (1 MiB at BLOCK_N 64) shared by all CTAs
                            fn = lambda: _stream_dot[(ctas,)](x, q, out, T, ctas, 0, 63, **opt)
                        else:
                            fn = lambda: _stream_dot[(ctas,)](x, q, out, T, 1, 0, T - 1, **opt)
                        try:
                            fn()
                            torch.cuda.synchronize()
                            ok = True
                            if kind == "dot":   # check the first CTA against numpy in float64
                                k = x[: T * bn * D].view(T, bn, D).cpu().numpy().astype(np.float64)
                                ref = q.cpu().numpy().astype(np.float64) @ k.sum(0).T
                                got = out[: 16 * bn].view(16, bn).cpu().numpy()
                                ok = bool(np.abs(got - ref).max() / (np.abs(ref).max() + 1e-9) < 2e-2)
                            us = _bench_us(fn)
                        except Exception as e:  # noqa: BLE001 - recorded, not fatal
                            rows.append({"kind": kind, "ctas": ctas, "num_warps": nw, "BLOCK_N": bn, "stages": st,
                                         "error": repr(e)[:200]})
                            print("mlp", rows[-1], flush=True)
                            continue
                        cyc = us * 1e-6 * clock
                        rows.append({"kind": kind, "ctas": ctas, "num_warps": nw, "BLOCK_N": bn, "D": D, "stages": st,
                                     "tile_bytes": tile, "trips": T, "us": us, "cycles_per_iter": cyc / T,
                                     "bytes_per_clk_per_cta": tile * T / cyc, "ok": ok,
                                     "total_gbs": tile * T * ctas / (us * 1e-6) / 1e9})
                        print("mlp", rows[-1], flush=True)
    del x
    return rows


def share(sm_count: int, clock: float) -> list:
    """L2 bandwidth against how many CTAs read each line: ``ctas`` CTAs (one or two per SM) each
    stream T 16 KiB tiles from a region of R tiles shared by ``share`` CTAs (L2-resident after
    the first pass), into a 16-row dot (the loop is bound by its loads)."""
    rows = []
    D, bn, T = 128, 64, 2048
    tile = bn * D * 2
    q = torch.randn(16, D, device="cuda", dtype=torch.float16) * 0.05
    x = torch.randn(2 * sm_count * 16 * bn * D, device="cuda", dtype=torch.float16) * 0.05
    for ctas in (sm_count, 2 * sm_count):
        for R in (4, 16):
            for sh in (1, 2, 4, 12, 33, ctas):
                if ctas // sh * R * tile > x.numel() * 2:
                    continue
                out = torch.empty(ctas * 16 * bn, device="cuda", dtype=torch.float32)
                fn = lambda: _stream_dot[(ctas,)](x, q, out, T, sh, 0, R - 1, BLOCK_N=bn, D=D, num_warps=4,
                                                  num_stages=4)
                fn()
                torch.cuda.synchronize()
                kk = x[: R * bn * D].view(R, bn, D).cpu().numpy().astype(np.float64).sum(0) * (T // R)
                ref = q.cpu().numpy().astype(np.float64) @ kk.T
                got = out[: 16 * bn].view(16, bn).cpu().numpy()
                ok = bool(np.abs(got - ref).max() / (np.abs(ref).max() + 1e-9) < 2e-2)
                us = _bench_us(fn)
                rows.append({"ctas": ctas, "share": sh, "region_tiles": R, "tile_bytes": tile, "trips": T,
                             "footprint_bytes": -(-ctas // sh) * R * tile, "us": us, "ok": ok,
                             "cycles_per_iter": us * 1e-6 * clock / T,
                             "total_tbs": tile * T * ctas / (us * 1e-6) / 1e12})
                print("share", rows[-1], flush=True)
    return rows


@triton.jit
def _stream_dot(x_ptr, q_ptr, out_ptr, T, share, lag, R_MASK, BLOCK_N: tl.constexpr, D: tl.constexpr):
    # one CTA streams T tiles of BLOCK_N x D fp16 into acc = dot(q, k^T, acc) with a 16-row q: the
    # loop of a decode kernel without its softmax. CTAs pid // share read one region of R_MASK + 1
    # tiles (share 1 and R_MASK + 1 = T: each CTA its own stream; share = all CTAs: one small
    # L2-resident region), member j of a group lag * j tiles ahead of member 0
    pid = tl.program_id(0)
    rn = tl.arange(0, BLOCK_N)
    rd = tl.arange(0, D)
    rm = tl.arange(0, 16)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = tl.zeros((16, BLOCK_N), dtype=tl.float32)
    base = x_ptr + (pid // share).to(tl.int64) * (R_MASK + 1) * (BLOCK_N * D)
    off = lag * (pid % share)
    for i in range(0, T):
        k = tl.load(base + ((i + off) & R_MASK) * (BLOCK_N * D) + rn[:, None] * D + rd[None, :])
        acc = tl.dot(q, tl.trans(k), acc)
    tl.store(out_ptr + pid * 16 * BLOCK_N + rm[:, None] * BLOCK_N + rn[None, :], acc)


def coalesce(sm_count: int, clock: float) -> list:
    """Reads of the same lines by several SMs, at a chosen distance in time: ``share`` CTAs read one
    L2-resident region of 16 tiles, member j ``lag`` tiles ahead of member 0. Run under ncu
    (``MICRO_ONCE=1``: each config launched once, not timed) it gives the L2 sectors read against the
    bytes the SMs received; timed, the cycles per tile."""
    shares = [(1, 0)] + [(2, lag) for lag in (0, 1, 2, 4, 8)] + [(8, 0), (8, 1), (33, 0)]
    cases = [(2 * sm_count, bn, sh, lag) for bn in (64, 16) for sh, lag in shares]
    return _coalesce_cases("coalesce", cases, 16, 2048, clock)


def coalescek(sm_count: int, clock: float) -> list:
    """How much the L2 request coalescer merges against how many CTAs read the same lines at the same
    time: ``coalesce``'s kernel with ``share`` = k consecutive CTAs reading one L2-resident region of
    16 tiles in phase (lag 0), k = 1 .. all, at 2 CTAs per SM and at 1. Under ncu (``MICRO_ONCE=1``)
    it gives the L2 sectors read against the bytes the SMs received; timed, the cycles per tile."""
    return _coalesce_cases("coalescek", _in_phase(sm_count, (2, 1)), 16, 2048, clock)


def coalescek_dense(sm_count: int, clock: float) -> list:
    """``coalescek`` at 4 and 8 CTAs per SM, over regions of 4 tiles (so that even 2 sharers' regions
    stay in the L2: 528 x 64 KiB at 8 CTAs per SM), 512 tiles per CTA."""
    return _coalesce_cases("coalescek_dense", _in_phase(sm_count, (4, 8)), 4, 512, clock)


def _in_phase(sm_count: int, per_sm: tuple) -> list:
    """(CTAs, BLOCK_N, share, lag 0) for k = 1 .. all CTAs reading each region, at ``per_sm`` CTAs per SM."""
    return [(c * sm_count, bn, sh, 0) for c in per_sm for bn in (64, 16)
            for sh in sorted({1, 2, 4, 8, 16, 33, 66, sm_count, 2 * sm_count, c * sm_count}) if sh <= c * sm_count]


def _coalesce_cases(section: str, cases: list, R: int, T: int, clock: float) -> list:
    """Launch (and unless ``MICRO_ONCE=1`` time and check) ``_stream_dot`` for each (CTAs, BLOCK_N,
    share, lag) of ``cases`` over regions of ``R`` tiles, ``T`` tiles per CTA."""
    once = os.environ.get("MICRO_ONCE") == "1"
    rows = []
    D = 128
    q = torch.randn(16, D, device="cuda", dtype=torch.float16) * 0.05
    x = torch.randn(max(c[0] for c in cases) * R * 64 * D, device="cuda", dtype=torch.float16) * 0.05
    for ctas, bn, sh, lag in cases:
        out = torch.empty(ctas * 16 * bn, device="cuda", dtype=torch.float32)
        fn = lambda: _stream_dot[(ctas,)](x, q, out, T, sh, lag, R - 1, BLOCK_N=bn, D=D, num_warps=4, num_stages=3)
        fn()
        torch.cuda.synchronize()
        row = {"ctas": ctas, "BLOCK_N": bn, "share": sh, "lag": lag, "region_tiles": R, "trips": T,
               "tile_bytes": bn * D * 2}
        if not once:
            kk = x[: R * bn * D].view(R, bn, D).cpu().numpy().astype(np.float64).sum(0) * (T // R)
            ref = q.cpu().numpy().astype(np.float64) @ kk.T
            got = out[: 16 * bn].view(16, bn).cpu().numpy()
            us = _bench_us(fn)
            row.update(us=us, ok=bool(np.abs(got - ref).max() / (np.abs(ref).max() + 1e-9) < 2e-2),
                       cycles_per_iter=us * 1e-6 * clock / T, total_tbs=bn * D * 2 * T * ctas / (us * 1e-6) / 1e12)
        rows.append(row)
        print(section, row, flush=True)
    return rows


@triton.jit
def _fill_kernel(y_ptr, n, BLOCK: tl.constexpr):
    # stores only: every element of y gets its index (no loads, so the L2 holds nothing but y)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, offs.to(tl.float32), mask=offs < n)


def writeback(sm_count: int, clock: float) -> list:
    """Does the L2 write back? One kernel stores W MB of fp32 (no loads), W = 4 .. 256. Under ncu
    (``MICRO_ONCE=1``, each W launched once after ncu's cache flush) ``dram__bytes_write`` says how
    much reached DRAM during the kernel: about nothing while W fits in the L2 and what does not fit
    beyond, if dirty lines are written back when evicted; W, if stores write through. Timed, the
    store rate."""
    once = os.environ.get("MICRO_ONCE") == "1"
    rows = []
    BLOCK = 4096
    for mb in (4, 8, 16, 24, 32, 40, 48, 64, 96, 128, 256):
        n = mb * (1 << 20) // 4
        y = torch.empty(n, device="cuda", dtype=torch.float32)
        fn = lambda: _fill_kernel[(triton.cdiv(n, BLOCK),)](y, n, BLOCK=BLOCK, num_warps=4)
        fn()
        torch.cuda.synchronize()
        row = {"mb": mb, "bytes": 4 * n}
        if not once:
            ok = bool((y[:: 1 << 16].cpu() == torch.arange(0, n, 1 << 16, dtype=torch.float32)).all())
            us = _bench_us(fn)
            row.update(us=us, ok=ok, tbs=4 * n / (us * 1e-6) / 1e12)
        rows.append(row)
        print("writeback", row, flush=True)
        del y
        torch.cuda.empty_cache()
    return rows


# ----------------------------------------------------------------------------- reduction latency
@triton.jit
def _reduce_chain(out_ptr, c, T, R: tl.constexpr, C: tl.constexpr, OP: tl.constexpr):
    # a dependent chain through a row reduction of an R x C fp32 tile: x = x * c - red(x)[:, None]
    # (OP 0: max, 1: sum, 2: none, the same elementwise work without the reduction)
    rr = tl.arange(0, R)
    cc = tl.arange(0, C)
    x = (rr[:, None] * C + cc[None, :]).to(tl.float32) * 1e-6
    for _ in range(T):
        if OP == 0:
            x = x * c - tl.max(x, 1)[:, None]
        elif OP == 1:
            x = x * c - tl.sum(x, 1)[:, None] * 1e-3
        else:
            x = x * c - x * 1e-3
    tl.store(out_ptr + tl.program_id(0) * R * C + rr[:, None] * C + cc[None, :], x)


def _chain_row(label: str, kern, op: int, name: str, R: int, C: int, nw: int, T: int, sm_count: int,
               clock: float, out) -> dict:
    """Time one chain kernel (one CTA per SM, T iterations): its row, or the error it raised."""
    fn = lambda: kern[(sm_count,)](out, 0.999, T, R=R, C=C, OP=op, num_warps=nw)
    try:
        fn()
        us = _bench_us(fn)
    except Exception as e:  # noqa: BLE001 - recorded, not fatal
        return {"R": R, "C": C, "num_warps": nw, "op": name, "error": repr(e)[:200]}
    row = {"R": R, "C": C, "num_warps": nw, "op": name, "us": us,
           "cycles_per_iter": us * 1e-6 * clock / T, "ok": bool(torch.isfinite(out).all())}
    print(label, row, flush=True)
    return row


def reduction(sm_count: int, clock: float) -> list:
    """Cycles per iteration of a reduction-carried dependency chain, one CTA per SM, against the
    tile shape and warps; the same loop without the reduction gives the elementwise part."""
    rows = []
    T = 2048
    for R, C in ((16, 64), (64, 64), (128, 64), (64, 128), (128, 128)):
        for nw in (4, 8):
            out = torch.empty(sm_count * R * C, device="cuda", dtype=torch.float32)
            for op, name in ((0, "max"), (1, "sum"), (2, "none")):
                rows.append(_chain_row("reduction", _reduce_chain, op, name, R, C, nw, T, sm_count, clock, out))
    return rows


# ----------------------------------------------------------------------------- held-out chains
@triton.jit
def _softmax_chain(out_ptr, c, T, R: tl.constexpr, C: tl.constexpr, OP: tl.constexpr):
    # a loop-carried chain through an online-softmax-like step of an R x C fp32 tile (OP 0:
    # x = exp2(x * c - max(x)); 1: x = x * c - sum(exp2(x)) * 1e-3; 2: x = exp2(x * c - max(x)) * c - sum(x) * 1e-3)
    rr = tl.arange(0, R)
    cc = tl.arange(0, C)
    x = (rr[:, None] * C + cc[None, :]).to(tl.float32) * 1e-6
    for _ in range(T):
        if OP == 0:
            x = tl.exp2(x * c - tl.max(x, 1)[:, None])
        elif OP == 1:
            x = x * c - tl.sum(tl.exp2(x), 1)[:, None] * 1e-3
        else:
            x = tl.exp2(x * c - tl.max(x, 1)[:, None])
            x = x * c - tl.sum(x, 1)[:, None] * 1e-3
    tl.store(out_ptr + tl.program_id(0) * R * C + rr[:, None] * C + cc[None, :], x)


CHAIN_SHAPES = ((32, 64, 2), (32, 64, 4), (32, 128, 4), (256, 64, 8), (64, 256, 8), (64, 64, 16), (16, 128, 1),
                (128, 32, 4))


def chains(sm_count: int, clock: float) -> list:
    """Held-out checks of the warp scoreboard (benchmarks/fit_latency.py never sees them): the
    reduction chains of ``reduction`` at other shapes and warp counts, and softmax-like chains
    mixing MUFU.EX2 with the reductions. One CTA per SM, cycles per iteration."""
    rows = []
    T = 1024
    for R, C, nw in CHAIN_SHAPES:
        out = torch.empty(sm_count * R * C, device="cuda", dtype=torch.float32)
        for kern, op, name in ((_reduce_chain, 0, "max"), (_reduce_chain, 1, "sum"), (_softmax_chain, 0, "exp2-max"),
                               (_softmax_chain, 1, "sum-exp2"), (_softmax_chain, 2, "softmax")):
            rows.append(_chain_row("chains", kern, op, name, R, C, nw, T, sm_count, clock, out))
    return rows


# ----------------------------------------------------------------------------- L2 sharing, DRAM pieces, mma.sync chains
@triton.jit
def _read_shared(x_ptr, out_ptr, T, share, R_MASK, BLOCK: tl.constexpr):
    # CTA pid reads T tiles of BLOCK fp16, one per iteration, from a region of R_MASK + 1 tiles that
    # ``share`` consecutive CTAs read; ld.global.cg caches them in the L2 only (no L1 hits)
    pid = tl.program_id(0)
    r = tl.arange(0, BLOCK)
    base = x_ptr + (pid // share).to(tl.int64) * (R_MASK + 1) * BLOCK
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, T):
        acc += tl.load(base + (i & R_MASK) * BLOCK + r, cache_modifier=".cg").to(tl.float32)
    tl.store(out_ptr + pid * BLOCK + r, acc)


def l2share(sm_count: int, clock: float) -> list:
    """L2 -> SM delivery rate for L2-resident data against how many CTAs read each line: 8 CTAs per
    SM, each streaming T tiles of 8 KiB from a 4-tile region of its own (share 1: 35 MiB in all),
    shared by 8 consecutive CTAs, or by every CTA."""
    rows = []
    BLOCK, R, T = 4096, 4, 1024
    ctas = 8 * sm_count
    x = torch.randn(ctas * R * BLOCK, device="cuda", dtype=torch.float16)
    out = torch.empty(ctas * BLOCK, device="cuda", dtype=torch.float32)
    for nw in (4, 8):
        for sh in (1, 8, ctas):
            fn = lambda: _read_shared[(ctas,)](x, out, T, sh, R - 1, BLOCK=BLOCK, num_warps=nw)
            fn()
            torch.cuda.synchronize()
            ref = x[: R * BLOCK].view(R, BLOCK).float().sum(0) * (T // R)
            ok = bool(torch.allclose(out[:BLOCK], ref, rtol=1e-3, atol=1e-2))
            us = _bench_us(fn)
            rows.append({"ctas": ctas, "num_warps": nw, "share": sh, "region_tiles": R, "tile_bytes": 2 * BLOCK,
                         "trips": T, "footprint_bytes": -(-ctas // sh) * R * 2 * BLOCK, "us": us, "ok": ok,
                         "total_tbs": 2 * BLOCK * T * ctas / (us * 1e-6) / 1e12})
            print("l2share", rows[-1], flush=True)
    return rows


@triton.jit
def _read_rows(x_ptr, out_ptr, T, PITCH, ROWS: tl.constexpr, CHUNK: tl.constexpr):
    # CTA pid reads its own panel of ROWS rows PITCH elements apart, CHUNK elements of every row per
    # iteration, walking along the rows: every byte once, from HBM (ld.global.cg)
    pid = tl.program_id(0)
    rr = tl.arange(0, ROWS)
    rc = tl.arange(0, CHUNK)
    base = x_ptr + (pid * ROWS).to(tl.int64) * PITCH
    acc = tl.zeros((ROWS, CHUNK), dtype=tl.float32)
    for i in range(0, T):
        acc += tl.load(base + rr[:, None] * PITCH + i * CHUNK + rc[None, :], cache_modifier=".cg").to(tl.float32)
    tl.store(out_ptr + pid * ROWS * CHUNK + rr[:, None] * CHUNK + rc[None, :], acc)


def _time_rows(ctas: int, nrows: int, chunk: int, pitch: int) -> tuple:
    """(us, ok, bytes read) of ``_read_rows`` over a fresh HBM buffer, checked against torch."""
    T = pitch // chunk
    x = torch.randn(ctas * nrows * pitch, device="cuda", dtype=torch.float16)
    out = torch.empty(ctas * nrows * chunk, device="cuda", dtype=torch.float32)
    fn = lambda: _read_rows[(ctas,)](x, out, T, pitch, ROWS=nrows, CHUNK=chunk, num_warps=4)
    fn()
    torch.cuda.synchronize()
    ref = x[: nrows * pitch].view(nrows, T, chunk).float().sum(1)
    ok = bool(torch.allclose(out[: nrows * chunk].view(nrows, chunk), ref, rtol=1e-3, atol=1e-2))
    us = _bench_us(fn)
    nbytes = x.numel() * 2
    del x, out
    return us, ok, nbytes


def dramchunk(sm_count: int, clock: float) -> list:
    """HBM read rate against the contiguous piece of each row a request covers: 8 CTAs per SM, each
    streaming its own 2 MiB panel of ROWS rows along the rows, 4 KiB per iteration in pieces of
    32..4096 bytes (ROWS x CHUNK = 2048 elements; ROWS 1 is a plain contiguous stream), every byte
    read once (2.2 GB in all, far beyond the L2)."""
    rows = []
    ctas = 8 * sm_count
    for chunk in (16, 32, 64, 128, 256, 512, 2048):
        nrows = 2048 // chunk
        PITCH = (1 << 20) // nrows       # 2 MiB per CTA whatever the piece: 2.2 GB in all
        T = PITCH // chunk
        us, ok, nbytes = _time_rows(ctas, nrows, chunk, PITCH)
        rows.append({"ctas": ctas, "chunk_bytes": 2 * chunk, "rows": nrows, "pitch_bytes": 2 * PITCH, "trips": T,
                     "bytes": nbytes, "us": us, "ok": ok, "total_tbs": nbytes / (us * 1e-6) / 1e12,
                     "cycles_per_iter": us * 1e-6 * clock / T})
        print("dramchunk", rows[-1], flush=True)
    return rows


def tilelat(sm_count: int, clock: float) -> list:
    """The latency of one tile from HBM against how many requests it is made of, at low load: one CTA
    per SM reads ROWS rows x CHUNK elements per iteration (plain ld.global.cg, not pipelined: each
    iteration waits for its tile), walking along its own rows (16 KiB apart, or back to back when
    the tile is one contiguous piece), every byte read once. Caveat (round 8): what it measures is
    not the HBM latency alone. Tiles of 2 KiB and more take the per-warp LDG fill rate
    (``warp_load_bytes_per_clk``), and a tile of one short row runs faster than the L2's latency
    (the compiler keeps several iterations' loads in flight), so nothing is calibrated from it."""
    rows = []
    ctas = sm_count
    for nrows, chunk in ((1, 16), (4, 16), (16, 16), (64, 16), (128, 16), (1, 64), (4, 64), (16, 64), (64, 64),
                         (32, 128), (64, 128), (1, 1024), (4, 1024)):
        PITCH = 8192
        T = PITCH // chunk
        us, ok, _ = _time_rows(ctas, nrows, chunk, PITCH)
        rows.append({"ctas": ctas, "rows": nrows, "chunk_bytes": 2 * chunk, "tile_bytes": 2 * nrows * chunk,
                     "pitch_bytes": 2 * PITCH, "trips": T, "us": us, "ok": ok,
                     "cycles_per_iter": us * 1e-6 * clock / T})
        print("tilelat", rows[-1], flush=True)
    return rows


def hmma(sm_count: int, clock: float) -> list:
    """Dependent mma.sync chains: acc = dot(a, b, acc) with a 16-row a (too few rows for a warpgroup
    MMA, so Triton emits mma.sync), its operands loaded once, one CTA of 4 warps per SM (and 2 and 4
    per SM at one shape): cycles per dot against N and K."""
    rows = []
    T = 4096
    for (M, N, K, per_sm) in ((16, 32, 16, 1), (16, 32, 32, 1), (16, 32, 64, 1), (16, 32, 128, 1), (16, 64, 128, 1),
                              (16, 128, 128, 1), (16, 64, 16, 1), (16, 64, 32, 1), (16, 64, 64, 1), (16, 32, 128, 2),
                              (16, 32, 128, 4)):
        a = torch.randn(M, K, device="cuda", dtype=torch.float16) * 0.01
        b = torch.randn(K, N, device="cuda", dtype=torch.float16) * 0.01
        ctas = sm_count * per_sm
        out = torch.empty(ctas * M * N, device="cuda", dtype=torch.float32)
        fn = lambda: _mma_chain[(ctas,)](a, b, out, T, M=M, N=N, K=K, num_warps=4)
        fn()
        torch.cuda.synchronize()
        ref = (a.float() @ b.float()) * T
        err = float((out[: M * N].view(M, N) - ref).abs().max() / (ref.abs().max() + 1e-12))
        us = _bench_us(fn)
        rows.append({"M": M, "N": N, "K": K, "ctas_per_sm": per_sm, "num_warps": 4, "us": us, "rel_err": err,
                     "cycles_per_iter": us * 1e-6 * clock / T})
        print("hmma", rows[-1], flush=True)
    return rows


# ----------------------------------------------------------------------------- compiled resources
_TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "int32": torch.int32}
_ESIZE = {"fp16": 2, "bf16": 2, "fp32": 4, "int32": 4}


# ----------------------------------------------------------------------------- sectors per miss
@triton.jit(do_not_specialize=["hops"])
def _sector_chase(p_ptr, start_ptr, out_ptr, hops, P: tl.constexpr, W: tl.constexpr, GAP: tl.constexpr,
                  CG: tl.constexpr):
    # P independent pointer chains, one per row of a P x W tile (flattened, so that a warp's 32
    # consecutive lanes take 32 consecutive elements): every hop, row r reads W int32 (8 per 32-byte
    # sector) at node_r + (c % 8) + (c // 8) * 8 * GAP, all of which hold the next node. GAP 1: W / 8
    # adjacent sectors of one line; GAP 2: every other sector; GAP 4: sector 0 of W / 8 consecutive
    # lines. Plain 4-byte loads (the addresses come from memory), so a warp instruction asks for
    # the sectors its lanes cover: W 8, 16, 32 -> 4 rows x 1 sector, 2 x 2, 1 x 4.
    # With a grid of several CTAs, CTA i follows chains i * P .. i * P + P - 1.
    e = tl.arange(0, P * W)
    r = e // W
    c = e % W
    off = (c % 8) + (c // 8) * 8 * GAP
    cta = tl.program_id(0)
    node = tl.load(start_ptr + cta * P + r)
    for _ in range(hops):
        if CG:
            node = tl.load(p_ptr + node + off, cache_modifier=".cg")
        else:
            node = tl.load(p_ptr + node + off)
    tl.store(out_ptr + cta * P * W + e, node)


def _time_noflush_us(fn, reps: int = 20) -> float:
    """Median time of ``fn`` without do_bench's L2 flush between calls (the data stays L2-resident)."""
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000.0)
    return float(np.median(ts))


def sectorlat(sm_count: int, clock: float) -> list:
    """The latency of a miss against how many sectors of a line one request asks for: one CTA of 4
    warps on an idle GPU chases P pointer chains at once (a random cycle of nodes 4224 B apart, each
    node one 128-byte-aligned line), asking for 1, 2 or 4 sectors of each node's line per hop
    (``_sector_chase``). ``miss``: a 277 MB buffer after do_bench's L2 flush, every hop a new line;
    ``hit``: a 8.7 MB buffer kept in the L2 (ld.global.cg, no flush). Cycles per hop =
    (t(1024 hops) - t(256 hops)) / 768 x clock; checked against the chain's known end."""
    rows = []
    stride = 4224 // 4                              # elements between nodes: 33 lines
    hops = (256, 1024)
    for where, nodes in (("miss", 65536), ("hit", 2048)):
        order = np.random.default_rng(7).permutation(nodes).astype(np.int64)
        pos = order * stride
        nxt = np.roll(pos, -1)
        buf = torch.zeros(nodes * stride, dtype=torch.int32, device="cuda")
        idx = (torch.from_numpy(pos)[:, None] + torch.arange(128)[None, :]).reshape(-1)
        buf[idx.cuda()] = torch.from_numpy(np.repeat(nxt, 128).astype(np.int32)).cuda()
        cases = []
        if where == "miss":
            for cg in (0, 1):
                for P in (1, 4, 16, 32):
                    for S in (1, 2, 4):
                        cases.append((P, S, 1, cg))
            for P in (1, 16):
                for S, gap in ((2, 2), (2, 4), (4, 2), (4, 4)):
                    cases.append((P, S, gap, 0))
        else:
            for P in (1, 16):
                for S in (1, 2, 4):
                    cases.append((P, S, 1, 1))
        for P, S, gap, cg in cases:
            step = nodes // P               # chain r starts r * step nodes along the cycle
            chain = pos[(np.arange(P)[:, None] * step + np.arange(hops[1] + 1)[None, :]) % nodes]
            lines = P * -(-((S - 1) * 8 * gap + 8) // 32)
            _chain_row("sectorlat", rows, {"where": where, "chains": P, "sectors": S, "gap": gap, "cg": cg,
                                           "lines_per_hop": lines, "bytes_per_hop": 32 * S * P},
                       _time_chains(buf, chain, 8 * S, hops, gap=gap, cg=cg, flush=where == "miss"), clock)
        del buf
        torch.cuda.empty_cache()
    return rows


def _chase_buffer(nodes: np.ndarray, width: int):
    """An int32 buffer in which chain r's hop j (``nodes[r, j]``, an element offset) holds
    ``nodes[r, j + 1]`` in each of the ``width`` elements the hop reads."""
    n = int(nodes.max()) + 128
    buf = torch.zeros(n, dtype=torch.int32, device="cuda")
    idx = torch.from_numpy((nodes[:, :-1, None] + np.arange(width)[None, None, :]).reshape(-1))
    val = torch.from_numpy(np.repeat(nodes[:, 1:].reshape(-1), width).astype(np.int32))
    buf[idx.cuda()] = val.cuda()
    return buf


def _time_chains(buf, nodes: np.ndarray, W: int, hops: tuple, *, gap: int = 1, cg: int = 0, nw: int = 4,
                 flush: bool = True, ring: int = 0) -> tuple:
    """(times in us at both hop counts, every chain ended where it should, seconds per hop) of
    ``_sector_chase`` over ``buf`` from ``nodes[:, 0]`` (``ring``: the chains cycle through that many
    nodes). ``flush``: do_bench's L2 flush before each run (misses); else the data stays in the L2."""
    P = nodes.shape[0]
    starts = torch.from_numpy(nodes[:, 0].astype(np.int32)).cuda()
    out = torch.empty(P * W, dtype=torch.int32, device="cuda")
    t, ok = [], True
    for h in hops:
        fn = lambda h=h: _sector_chase[(1,)](buf, starts, out, h, P=P, W=W, GAP=gap, CG=cg, num_warps=nw)
        fn()
        torch.cuda.synchronize()
        ok = ok and bool((out.view(P, W).cpu().numpy() == nodes[:, h % ring if ring else h][:, None]).all())
        t.append(_bench_us(fn) if flush else _time_noflush_us(fn, reps=50 if ring else 20))
    return t, ok, (t[1] - t[0]) * 1e-6 / (hops[1] - hops[0])


def _chain_row(section: str, rows: list, fields: dict, timed: tuple, clock: float) -> None:
    """Append (and print) one pointer-chain measurement: ``fields`` plus ``_time_chains``' result."""
    t, ok, per_hop = timed
    rows.append({**fields, "us": t, "ok": ok, "ns_per_hop": per_hop * 1e9, "cycles_per_hop": per_hop * clock})
    print(section, rows[-1], flush=True)


def sectorpitch(sm_count: int, clock: float) -> list:
    """The same pointer chains as ``sectorlat`` (one CTA of 4 warps, 1, 2 or 4 sectors per line per
    hop, every hop after do_bench's L2 flush) with the P lines of a hop laid out as a streamed
    tile's rows: at one random column of P rows ``pitch`` bytes apart, in a random block of P rows
    per hop (``rows``), against P lines anywhere (``random``); and ``sequential``: 4 hops through
    the 4 sectors of each line, as a tile of 32-byte rows walks along its rows."""
    rows = []
    H = 1024
    rng = np.random.default_rng(11)
    for layout, P, pitch in (("random", 16, 0), ("rows", 16, 16384), ("rows", 16, 16512), ("rows", 16, 8192),
                             ("rows", 16, 4224), ("rows", 4, 16384), ("rows", 64, 16384), ("sequential", 16, 0),
                             ("sequential", 16, 16384)):
        for S in ((1,) if layout == "sequential" else (1, 2, 4)):
            W = 8 * S
            if layout == "random":
                lines = rng.choice(277_000_000 // 128, size=P * (H + 1), replace=False).reshape(P, H + 1)
                nodes = lines * 32
            elif layout == "rows":
                block = P * pitch // 4                                  # elements per block of P rows
                z = rng.permutation(max(H + 1, 268_435_456 // (P * pitch)))[: H + 1]
                col = rng.integers(0, pitch // 128, size=H + 1) * 32
                nodes = z[None, :] * block + np.arange(P)[:, None] * (pitch // 4) + col[None, :]
            else:
                nl = H // 4 + 1
                if pitch:
                    z = rng.permutation(268_435_456 // (P * pitch))[:nl]
                    col = rng.integers(0, pitch // 128, size=nl) * 32
                    ln = z[None, :] * (P * pitch // 4) + np.arange(P)[:, None] * (pitch // 4) + col[None, :]
                else:
                    ln = rng.choice(277_000_000 // 128, size=P * nl, replace=False).reshape(P, nl) * 32
                j = np.arange(H + 1)
                nodes = ln[:, j // 4] + (j % 4)[None, :] * 8
            nodes = nodes.astype(np.int64)
            buf = _chase_buffer(nodes, W)
            _chain_row("sectorpitch", rows, {"layout": layout, "chains": P, "pitch_bytes": pitch, "sectors": S},
                       _time_chains(buf, nodes, W, (256, 1024)), clock)
            del buf
            torch.cuda.empty_cache()
    return rows


def sectorstream(sm_count: int, clock: float) -> list:
    """``stream_cols``'s access pattern as pointer chains (plain LDG, each hop waiting for the last):
    one CTA of 4 warps walks P rows along their length, 32 x S bytes of every row per hop (hop j
    reads row r at byte j * 32 * S), every hop after do_bench's L2 flush. Against ``stream_cols``
    (cp.async into shared memory) at the same rows and bytes per row, it tells the copy path's
    share of a streamed tile's round trip from the L2's and the DRAM's."""
    rows = []
    H = 1024
    for P in (16, 64):
        for S in (1, 2, 4, 8):
            W = 8 * S
            pitch = 1 << int(math.ceil(math.log2((H + 1) * W)))       # elements per row
            nodes = (np.arange(P)[:, None] * pitch + np.arange(H + 1)[None, :] * W).astype(np.int64)
            buf = _chase_buffer(nodes, W)
            for cg in (0, 1):
                _chain_row("sectorstream", rows, {"layout": "stream", "chains": P, "row_bytes": 32 * S, "sectors": S,
                                                  "cg": cg}, _time_chains(buf, nodes, W, (256, 1024), cg=cg), clock)
            del buf
            torch.cuda.empty_cache()
    return rows


def streamctas(sm_count: int, clock: float) -> list:
    """``sectorstream``'s chains (64 rows per CTA walked along their length, 32 x S bytes of every
    row per hop, plain LDG, after do_bench's L2 flush; rows of 32 and 64 bytes per hop share lines
    between hops, as in ``stream_cols``) on 1 to 2 x sm_count CTAs
    at once, each CTA its own rows: a streamed tile's round trip against how many SMs ask at the
    same time. Against ``stream_cols`` at the same CTA counts (cp.async, a barrier and a dot per
    iteration) it separates the load on the memory system from the copy path's own cost."""
    rows = []
    H, P = 256, 64
    for S in (1, 2, 4, 8):
        W = 8 * S
        pitch = 1 << int(math.ceil(math.log2((H + 1) * W)))       # elements per row
        for ctas in (1, 8, 33, sm_count, 2 * sm_count):
            n = ctas * P
            # row r, hop j: the W elements at r * pitch + j * W hold r * pitch + (j + 1) * W
            ar = torch.arange(n * pitch, dtype=torch.int64, device="cuda")
            buf = ((ar // W + 1) * W).to(torch.int32)
            del ar
            starts = torch.arange(n, dtype=torch.int32, device="cuda") * pitch
            out = torch.empty(n * W, dtype=torch.int32, device="cuda")
            t, ok = [], True
            for h in (64, 256):
                fn = lambda h=h: _sector_chase[(ctas,)](buf, starts, out, h, P=P, W=W, GAP=1, CG=0, num_warps=4)
                fn()
                torch.cuda.synchronize()
                want = torch.arange(n, dtype=torch.int64, device="cuda")[:, None] * pitch + h * W
                ok = ok and bool((out.view(n, W).to(torch.int64) == want).all().item())
                t.append(_bench_us(fn))
            per_hop = (t[1] - t[0]) * 1e-6 / (256 - 64)
            _chain_row("streamctas", rows, {"layout": "stream", "chains": P, "row_bytes": 32 * S, "sectors": S,
                                            "ctas": ctas, "buffer_mb": n * pitch * 4 / 1e6}, (t, ok, per_hop), clock)
            del buf, starts, out
            torch.cuda.empty_cache()
    return rows


def sectorlines(sm_count: int, clock: float) -> list:
    """The latency of one CTA's P concurrent requests (P lines anywhere, 1 or 4 sectors each, the
    chains of ``sectorlat``) against P = 1..256: ``miss`` every hop a new line after do_bench's L2
    flush (hops 256 and 1024); ``hit`` the same chains over 8 MiB or less kept in the L2
    (ld.global.cg, no flush; hops 64 and 256). 4 warps, and 8 at a few P."""
    rows = []
    rng = np.random.default_rng(13)
    for where, hops, region in (("miss", (256, 1024), 2_000_000_000), ("hit", (64, 256), 40_000_000)):
        H = hops[1]
        for P in (1, 2, 4, 8, 16, 32, 64, 128, 256):
            nodes = (rng.choice(region // 128, size=P * (H + 1), replace=False).reshape(P, H + 1) * 32).astype(np.int64)
            buf = _chase_buffer(nodes, 32)
            for S in (1, 4):
                for nw in ((4, 8) if P in (16, 64, 256) and S == 1 else (4,)):
                    cg = 1 if where == "hit" else 0
                    _chain_row("sectorlines", rows, {"where": where, "chains": P, "sectors": S, "num_warps": nw, "cg": cg},
                               _time_chains(buf, nodes, 8 * S, hops, cg=cg, nw=nw, flush=where == "miss"), clock)
            del buf
            torch.cuda.empty_cache()
    return rows


def sectorhits(sm_count: int, clock: float) -> list:
    """``sectorlines``' hits, with less noise: each of the P chains cycles through 128 lines of its
    own (P x 16 KiB, at most 4 MiB, kept in the L2: ld.global.cg, no flush), hops 256 and 1024."""
    rows = []
    rng = np.random.default_rng(17)
    K, hops = 128, (256, 1024)
    for P in (1, 4, 16, 32, 64, 128, 256):
        ring = rng.choice(40_000_000 // 128, size=P * K, replace=False).reshape(P, K) * 32
        nodes = ring[:, np.arange(K + 1) % K].astype(np.int64)
        buf = _chase_buffer(nodes, 32)
        for S in (1, 4):
            _chain_row("sectorhits", rows, {"where": "hit", "chains": P, "sectors": S, "num_warps": 4, "cg": 1, "ring": K},
                       _time_chains(buf, nodes, 8 * S, hops, cg=1, flush=False, ring=K), clock)
        del buf
        torch.cuda.empty_cache()
    return rows


def _init(k):
    """Load the compiled kernel so its n_regs / n_spills are filled in."""
    try:
        k._init_handles()
    except Exception:  # noqa: BLE001 - older/newer Triton fill them eagerly
        pass
    return k


def resources(scenarios: list) -> list:
    """n_regs / n_spills / shared of the compiled kernels of every point (Triton's own compile)."""
    from gpusim.toolchain.lower import kernel_name, launch_stages, lower
    from gpusim.backends.triton.run import load_kernel
    from gpusim.kernels import build
    from gpusim.sweep.scenario import load_scenario

    rows = []
    for path in scenarios:
        sc = load_scenario(path)
        for i, pt in enumerate(sc.points):
            try:
                wl = build(pt.kernel, pt.params)
            except Exception as e:  # noqa: BLE001 - recorded, not fatal
                rows.append({"scenario": path, "point": i, "error": str(e)})
                continue
            for launch in wl.launches:
                prog = launch.program
                t0 = time.time()
                try:
                    fn = load_kernel(lower(prog, launch.grid), kernel_name(prog))
                    args = [torch.empty(max(1, t.nbytes // _ESIZE[t.dtype]), device="cuda", dtype=_TORCH[t.dtype])
                            for t in prog.params]
                    k = fn.warmup(*args, grid=tuple(launch.grid), num_warps=prog.num_warps,
                                  num_stages=launch_stages(prog))
                    _init(k)
                    rows.append({"scenario": path, "point": i, "kernel": pt.kernel, "params": pt.params,
                                 "launch": launch.name, "n_regs": k.n_regs, "n_spills": k.n_spills,
                                 "shared": k.metadata.shared, "compile_s": time.time() - t0})
                except Exception as e:  # noqa: BLE001
                    rows.append({"scenario": path, "point": i, "launch": launch.name, "error": repr(e)[:300]})
                del args
        print("resources", path, len(rows), flush=True)
    return rows


def main(argv) -> int:
    out_path, what = argv[0], argv[1:]
    props = torch.cuda.get_device_properties(0)
    sm_count, clock = props.multi_processor_count, _clock_hz()
    res = {"device": props.name, "sm_count": sm_count, "clock_hz": clock, "triton": triton.__version__,
           "torch": torch.__version__}
    if "resources" in what:
        i = what.index("resources")
        res["resources"] = resources(what[i + 1:])
        what = what[:i]
    for name in what:
        res[name] = globals()[name](sm_count, clock)
        with open(out_path, "w") as f:
            json.dump(res, f, indent=1, default=str)
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def config_fields(micro: dict) -> dict:
    """Config fields these measurements give (applied to configs/h200*.yaml with their sources)."""
    out = {}
    sm, clk = micro["sm_count"], micro["clock_hz"]
    scalar = {}
    for r in micro.get("vector", []):
        if r["divisible_by"] == 1 and r["ok"]:
            es = 2 if r["dtype"] in ("float16", "bfloat16") else 4
            scalar[es] = 2.0 * r["n"] / (r["us"] * 1e-6 * clk * sm)   # a load and a store per element
    if scalar:
        out["scalar_access_per_clk_per_sm"] = {k: round(v, 3) for k, v in sorted(scalar.items())}
    out.update(mlp_fields(micro.get("mlp", []), sm))
    return out


def mlp_fields(rows: list, sm_count: int, miss_table: dict | None = None) -> dict:
    """Per-CTA fill rates from the mlp rows. A loop that is not pipelined (stages 1 and 2: Triton
    waits for every copy at the top of the iteration) takes compute + latency + tile / rate per
    iteration; the dot's own time (``dot_compute``) is taken off, and the rate is the slope of the
    remaining memory time between the 8 KiB and the 32 KiB tile (HBM, half the SMs streaming, so
    the HBM is not the limit). Registers (``reg``: LDG, nothing pipelined, all SMs): the same slope
    per warp.

    ``miss_table`` (``request_latency_cycles["miss"]``, measured by ``sectorlines``): the extra
    round trip of a tile of that many lines (2 per 256-byte row here) is taken off first, so the
    slope is the bytes' own share. A series whose memory time then does not grow with the tile
    has no rate of its own (an unlimited rate); with the table, 3 of the 4 cp.async series are
    such, and their median is unlimited: no ``cta_async_fill_bytes_per_clk`` (None)."""
    import statistics

    from gpusim.backends.sim.codegen import request_latency

    def extra(r):
        return request_latency(miss_table or {}, 2 * r["BLOCK_N"])

    ok = [r for r in rows if "us" in r and r.get("ok", True)]
    comp = {(r["num_warps"], r["BLOCK_N"]): r["cycles_per_iter"] for r in ok if r["kind"] == "dot_compute"}
    slopes = []
    for nw in (4, 8):
        for st in (1, 2):
            mem = {}
            for r in ok:
                if (r["kind"], r["ctas"], r["num_warps"], r["stages"]) == ("dot", sm_count // 2, nw, st) \
                        and (nw, r["BLOCK_N"]) in comp:
                    mem[r["tile_bytes"]] = (r["cycles_per_iter"] - comp[(nw, r["BLOCK_N"])] - extra(r))
            if len(mem) >= 2:
                grow = mem[max(mem)] - mem[min(mem)]
                slopes.append((max(mem) - min(mem)) / grow if grow > 0 else math.inf)
    out = {}
    if slopes:
        rate = statistics.median(slopes)
        out["cta_async_fill_bytes_per_clk"] = round(rate, 2) if math.isfinite(rate) else None
    reg = {r["tile_bytes"]: r for r in ok if r["kind"] == "reg" and r["stages"] == 1}
    if len(reg) >= 2:
        lo, hi = reg[min(reg)], reg[max(reg)]
        rate = (hi["tile_bytes"] - lo["tile_bytes"]) / (hi["cycles_per_iter"] - extra(hi)
                                                          - lo["cycles_per_iter"] + extra(lo))
        out["warp_load_bytes_per_clk"] = round(rate / hi["num_warps"], 3)
    return out


def request_latency_fields(lines_rows: list, hit_rows: list) -> dict:
    """``request_latency_cycles`` from the pointer chains of ``sectorlines`` (misses) and
    ``sectorhits`` (hits), 4 warps: the cycles per hop of R lines at once less those of one line.
    R counts distinct requests: with fewer elements than threads (P x 8 x sectors < 128) Triton
    replicates the tile over the warps and each warp asks again, so those rows are left out, except
    one chain of one sector (four warps asking for the same line: the one-line latency). Where both
    1 and 4 sectors per line give R, the 1-sector row (32 bytes a line, the bytes' own share
    smallest) is taken."""
    out = {}
    for where, rows in (("miss", [r for r in lines_rows if r["where"] == "miss"]), ("hit", hit_rows)):
        rows = [r for r in rows if r["ok"] and r["num_warps"] == 4]
        base = [r["cycles_per_hop"] for r in rows if r["chains"] == 1 and r["sectors"] == 1]
        by_r = {}
        for r in sorted(rows, key=lambda r: -r["sectors"]):          # 1-sector rows win
            if r["chains"] * 8 * r["sectors"] >= 128:
                by_r[r["chains"]] = r["cycles_per_hop"]
        if base:
            out[where] = {n: round(max(0.0, c - base[0]), 1) for n, c in sorted(by_r.items()) if n > 1}
    return out



def coalesce_fields(runs: list) -> dict:
    """``l2_coalesced_fraction`` from ``coalescek`` and ``coalescek_dense``. ``runs``: (the
    micro_fidelity JSON, its section, the ncu CSVs of its ``MICRO_ONCE=1`` runs: each one
    ``_stream_dot`` launch per config, in the section's order). Per config and ncu run the fraction
    of the sectors the SMs received (``l1tex__m_xbar2l1tex_read_bytes`` / 32) that the L2 slices read
    (``lts__t_sectors_srcunit_tex_op_read``), averaged over the ncu runs, by CTAs per SM (the
    launch's CTAs / SMs), tile bytes and CTAs reading each line (``share``); made non-increasing in
    ``share``, as merging more requests can only leave fewer sectors per request. ``share`` 1 is 1
    by definition (where one region per CTA does not fit in the L2, its time is the DRAM's)."""
    from pathlib import Path

    from gpusim.hw.validate.ncu import parse_ncu_csv

    table: dict = {}
    for micro, section, ncu_csvs in runs:
        rows = micro[section]
        sums: dict = {}
        for path in ncu_csvs:
            launches = [k["metrics"] for k in parse_ncu_csv(Path(path).read_text())
                        if k["kernel"] in ("_stream_dot", "_lag_dot")]
            if len(launches) != len(rows):
                raise ValueError(f"{path}: {len(launches)} profiled launches for {len(rows)} configs")
            for j, m in enumerate(launches):
                frac = m["lts__t_sectors_srcunit_tex_op_read.sum"] * 32 / m["l1tex__m_xbar2l1tex_read_bytes.sum"]
                sums.setdefault(j, []).append(frac)
        for j, row in enumerate(rows):
            t = table.setdefault(row["ctas"] // micro["sm_count"], {}).setdefault(row["tile_bytes"], {})
            t[row["share"]] = 1.0 if row["share"] == 1 else sum(sums[j]) / len(sums[j])
    out = {}
    for c, by_tile in sorted(table.items()):
        out[c] = {}
        for tb, curve in sorted(by_tile.items()):
            lo, mono = 1.0, {}
            for k in sorted(curve):
                lo = min(lo, curve[k])
                mono[k] = round(lo, 3)
            out[c][tb] = mono
    return {"l2_coalesced_fraction": out}
