"""Small @triton.jit kernels for the front end's tests (written for them, not vendored)."""
import triton
import triton.language as tl


@triton.jit
def copy_by_pid_mod(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Column blocks from ``pid % cdiv(N, BLOCK_N)`` (a 1-d grid folded onto columns, as split-K and
    stream-K kernels index tiles), rows from the second grid axis."""
    pid = tl.program_id(0)
    rn = (pid % tl.cdiv(N, BLOCK_N)) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    x = tl.load(x_ptr + rk[:, None] * N + rn[None, :])
    tl.store(y_ptr + rk[:, None] * N + rn[None, :], x)


@triton.jit
def split_k_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    """Split-K GEMM: each program sums one K slice and adds it into C with an atomic."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.program_id(2) * BLOCK_K + tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K * SPLIT_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.atomic_add(c_ptr + rm[:, None] * N + rn[None, :], acc)
