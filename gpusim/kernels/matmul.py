"""The tiled GEMM built-in (``matmul``) and the GEMM body the naive attention reuses."""
from __future__ import annotations

from ..dsl import cdiv, dot, load, loop, program_id, store, trace, trans, zeros
from ..dsl.ir import Launch, TensorArg, Workload
from .spec import DTYPES, FP8_DTYPES, POW2, Param, common, kernel, register_kernel


def matmul_body(a, b, c, *, BLOCK_M, BLOCK_N, BLOCK_K, num_stages, trans_b=False, batched=False):
    """C[.., M, N] = A[.., M, K] @ B[.., K, N] (B given as [.., N, K] when trans_b)."""
    pm, pn = program_id(0), program_id(1)
    lead = (program_id(2),) if batched else ()
    K = a.shape[-1]

    def body(kk, acc):
        at = load(a, lead + (pm * BLOCK_M, kk), (BLOCK_M, BLOCK_K))
        if trans_b:
            bt = trans(load(b, lead + (pn * BLOCK_N, kk), (BLOCK_N, BLOCK_K)))
        else:
            bt = load(b, lead + (kk, pn * BLOCK_N), (BLOCK_K, BLOCK_N))
        return dot(at, bt, acc)

    (acc,) = loop(0, K, BLOCK_K, (zeros((BLOCK_M, BLOCK_N)),), body, stages=num_stages)
    store(c, lead + (pm * BLOCK_M, pn * BLOCK_N), acc)


def matmul_reference(x, p):
    b = x["b"].T if p["dtype"] in FP8_DTYPES else x["b"]      # fp8: B is given as [N, K]
    return {"c": x["a"] @ b}


@register_kernel
@kernel(name="matmul", help="tiled GEMM C = A B; in fp8, B is given as [N, K] (K-major, as Hopper's FP8 MMA "
                           "reads it) and C is fp16, with no per-tensor scales (the operands are used as stored)",
        reference=matmul_reference, params=(
    Param("M", int, 4096, "rows of A and C"), Param("N", int, 4096, "columns of B and C"),
    Param("K", int, 4096, "inner dimension"),
    Param("BLOCK_M", int, 128, "C tile rows", POW2), Param("BLOCK_N", int, 128, "C tile columns", POW2),
    Param("BLOCK_K", int, 64, "K step", POW2),
    Param("num_stages", int, 3, "software-pipelining depth", (1, 2, 3, 4, 5)))
    + common(DTYPES + FP8_DTYPES, "storage dtype of A and B (and of C, fp16 for an fp8 A and B)"))
def matmul(p) -> Workload:
    dt = p["dtype"]
    fp8 = dt in FP8_DTYPES      # B K-major: an MN-major fp8 B is transposed byte by byte into shared memory
    t = {"a": TensorArg("a", (p["M"], p["K"]), dt),
         "b": TensorArg("b", (p["N"], p["K"]) if fp8 else (p["K"], p["N"]), dt),
         "c": TensorArg("c", (p["M"], p["N"]), "fp16" if fp8 else dt)}
    extra = {"trans_b": True} if fp8 else {}
    prog = trace(matmul_body, "matmul", [t["a"], t["b"], t["c"]], num_warps=p["num_warps"], BLOCK_M=p["BLOCK_M"],
                 BLOCK_N=p["BLOCK_N"], BLOCK_K=p["BLOCK_K"], num_stages=p["num_stages"], **extra)
    grid = (cdiv(p["M"], p["BLOCK_M"]), cdiv(p["N"], p["BLOCK_N"]))
    return Workload("matmul", t, ("a", "b"), ("c",), (Launch("matmul", prog, grid, {"a": "a", "b": "b", "c": "c"}),),
                    dict(p))
