# Matrix-vector product (GEMV), from FlagGems (src/flag_gems/ops/mv.py).
# Source: https://github.com/FlagOpen/FlagGems/blob/532ff438c70343d7aec9becdabb76a71225a0553/src/flag_gems/ops/mv.py
# Commit: 532ff438c70343d7aec9becdabb76a71225a0553
# License: Apache License 2.0 (Copyright 2024 BAAI); see LICENSE in the repository.
# The kernel body is copied unmodified. Its @libentry() and @triton.autotune decorators above
# @triton.jit are left out (the config list is read from FlagGems' runtime when the file is
# imported); a scenario names one of its configs (BLOCK_N, BLOCK_M, num_warps, num_stages) instead.
# The host code is left out and the imports are reduced to what the kernel uses: `tle` is FlagGems'
# triton_lang_extension, vendored beside this file with the functions it needs.
import triton
import triton.language as tl

import triton_lang_extension as tle


@triton.jit
def mv_kernel(
    A,
    B,
    C,
    N,
    M,
    stride_an,
    stride_am,
    stride_bm,
    stride_cn,
    BLOCK_N: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    pid = tle.program_id(0)
    offset_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)[:, None]
    offset_m = tl.arange(0, BLOCK_M)[None, :]
    n_mask = offset_n < N
    A_ptrs = A + offset_n * stride_an + offset_m * stride_am
    B_ptrs = B + offset_m * stride_bm
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for m in range(0, M, BLOCK_M):
        m_mask = m + offset_m < M
        a = tl.load(A_ptrs, mask=n_mask & m_mask, other=0.0).to(tl.float32)
        b = tl.load(B_ptrs, mask=m_mask, other=0.0).to(tl.float32)
        acc += a * b
        A_ptrs += BLOCK_M * stride_am
        B_ptrs += BLOCK_M * stride_bm

    acc = tl.sum(acc, axis=1)
    C_ptrs = C + offset_n * stride_cn
    tl.store(C_ptrs, acc[:, None], mask=n_mask)
