"""The calibration microbenchmark kernels: small hand-written Triton kernels and their launchers.

Streaming read / write / copy, a working-set sweep, one-warp pointer chasing, a tile ``tl.dot``
loop, FMA and exp2 chains, and a one-element kernel. Never the built-in attention / matmul /
elementwise kernels the model is judged on. triton is imported on first use (``kernels()``), so
``TRITON_INTERPRET`` is read then.
"""
from __future__ import annotations

_KERNELS: dict = {}


def kernels() -> dict:
    """The calibration kernels, defined on first use (``triton.jit`` reads TRITON_INTERPRET then)."""
    if _KERNELS:
        return _KERNELS
    _KERNELS.update(_memory_kernels())
    _KERNELS.update(_compute_kernels())
    return _KERNELS


def _memory_kernels() -> dict:
    """Streaming read, write and copy, the working-set sweep and the pointer chase."""
    import triton
    import triton.language as tl

    @triton.jit
    def read_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        x = tl.load(x_ptr + pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK))
        tl.store(out_ptr + pid, tl.sum(x, axis=0))

    @triton.jit
    def write_kernel(y_ptr, value, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        tl.store(y_ptr + pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK), tl.zeros([BLOCK], tl.float32) + value)

    @triton.jit
    def copy_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs))

    @triton.jit
    def sweep_kernel(x_ptr, out_ptr, nchunks, total, BLOCK: tl.constexpr):
        # program p reads chunks p, p + P, p + 2P, ... (mod nchunks): the whole buffer, over and over
        pid = tl.program_id(0)
        nprog = tl.num_programs(0)
        acc = tl.zeros([BLOCK], tl.float32)
        for i in range(pid, total, nprog):
            c = i % nchunks
            acc += tl.load(x_ptr + c * BLOCK + tl.arange(0, BLOCK))
        tl.store(out_ptr + pid, tl.sum(acc, axis=0))

    @triton.jit(do_not_specialize=["start"])
    def chase_kernel(p_ptr, out_ptr, hops, start):
        i = start
        for _ in range(hops):
            i = tl.load(p_ptr + i, cache_modifier=".cg")
        tl.store(out_ptr, i)

    return dict(read=read_kernel, write=write_kernel, copy=copy_kernel, sweep=sweep_kernel, chase=chase_kernel)


def _compute_kernels() -> dict:
    """The tile ``tl.dot`` loop, the FMA and exp2 chains and the one-element kernel."""
    import triton
    import triton.language as tl

    @triton.jit
    def mma_kernel(a_ptr, b_ptr, c_ptr, R, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   TF32: tl.constexpr):
        pid = tl.program_id(0)
        rm = tl.arange(0, BM)
        rn = tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
        acc = tl.zeros((BM, BN), tl.float32)
        for _ in range(R):
            if TF32:
                acc = tl.dot(a, b, acc, input_precision="tf32")
            else:
                acc = tl.dot(a, b, acc)
        tl.store(c_ptr + pid * BM * BN + rm[:, None] * BN + rn[None, :], acc)

    @triton.jit
    def fma_kernel(out_ptr, a, b, iters, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        x = offs.to(tl.float32) * 1e-3 + pid
        for _ in range(iters):
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
        tl.store(out_ptr + pid * BLOCK + offs, x)

    @triton.jit
    def exp2_kernel(out_ptr, c, iters, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        x = offs.to(tl.float32) * 1e-4
        for _ in range(iters):
            x = tl.exp2(x) * c
            x = tl.exp2(x) * c
            x = tl.exp2(x) * c
            x = tl.exp2(x) * c
            x = tl.exp2(x) * c
            x = tl.exp2(x) * c
            x = tl.exp2(x) * c
            x = tl.exp2(x) * c
        tl.store(out_ptr + pid * BLOCK + offs, x)

    @triton.jit
    def tiny_kernel(x_ptr):
        tl.store(x_ptr, 1.0)

    return dict(mma=mma_kernel, fma=fma_kernel, exp2=exp2_kernel, tiny=tiny_kernel)


FMA_PER_ITER = 8       # unrolled steps per loop iteration of fma_kernel / exp2_kernel
READ_BLOCK = 4096      # fp32 elements per program of the streaming kernels (16 KiB)
SWEEP_BLOCK = 4096


def launch_read(x, out, num_warps=8, block=READ_BLOCK):
    kernels()["read"][(x.numel() // block,)](x, out, BLOCK=block, num_warps=num_warps)


def launch_write(y, value=1.0, num_warps=8, block=READ_BLOCK):
    kernels()["write"][(y.numel() // block,)](y, value, BLOCK=block, num_warps=num_warps)


def launch_copy(x, y, num_warps=8, block=READ_BLOCK):
    kernels()["copy"][(x.numel() // block,)](x, y, BLOCK=block, num_warps=num_warps)


def launch_sweep(x, out, working_elems, total_iters, grid, num_warps=8, block=SWEEP_BLOCK):
    kernels()["sweep"][(grid,)](x, out, working_elems // block, total_iters, BLOCK=block, num_warps=num_warps)


def launch_chase(buf, out, hops, start):
    kernels()["chase"][(1,)](buf, out, hops, start, num_warps=1)


def launch_mma(a, b, c, R, m, n, k, grid, num_warps, tf32=False):
    kernels()["mma"][(grid,)](a, b, c, R, BM=m, BN=n, BK=k, TF32=tf32, num_warps=num_warps)


def launch_fma(out, iters, grid, a=0.999, b=0.001, num_warps=8, block=2048):
    kernels()["fma"][(grid,)](out, a, b, iters, BLOCK=block, num_warps=num_warps)


def launch_exp2(out, iters, grid, c=0.25, num_warps=8, block=2048):
    kernels()["exp2"][(grid,)](out, c, iters, BLOCK=block, num_warps=num_warps)


def launch_tiny(x):
    kernels()["tiny"][(1,)](x, num_warps=1)
