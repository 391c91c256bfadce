"""Global-access vector width and the SM load/store port's rate for narrow accesses.

Models: Triton vectorises a global access only as wide as it can prove aligned. The base pointer is
16-byte aligned and shapes are compile-time constants in gpusim's generated code, so a tile row
can be read in ``v``-element vectors where ``v`` is the largest power of two dividing the row pitch
(for tensors with rows) and the row length when the last tile of a row is masked, capped at 16
bytes. A narrower access moves the same bytes in more instructions: the SM's load/store path then
sustains ``scalar_access_per_clk_per_sm[element bytes] * v`` elements per clock. Where only the
mask is narrow the stores pay that rate (``store_port_bytes``); where the rows' pitch is narrow
the bytes cost what they cost aligned (``port_width``).

Measured by: a streaming copy of 2^26 + 1 elements on the H200 (``benchmarks/micro_fidelity.py``;
2.0 fp16 and 3.3 fp32 element accesses per clock per SM) and ncu on the odd-length elementwise
kernel (``data/h200/micro/ncu_probe_round7b.json``).

Effect (docs/model.md, ablation "unvectorised access rate" off): median / p90 |error| +1.0 / +15.4
points on the recorded points, +1.0 / +4.9 on the held-out points.
"""
from __future__ import annotations

from ...dsl import ir
from ...hardware import GPUConfig


VECTOR_BYTES = 16      # widest global access per thread (LDG.E.128 / cp.async 16 B)


def pow2_divisor(n: int) -> int:
    """Largest power of two dividing ``n`` (``n`` > 0)."""
    n = int(n)
    return n & -n if n > 0 else 1


def vector_width(tensor: ir.TensorArg, tile_shape: tuple) -> int:
    """Elements per global access for a tile of ``tile_shape`` read from or written to ``tensor``."""
    es = ir.DTYPE_BYTES[tensor.dtype]
    full = max(1, VECTOR_BYTES // es)
    last = int(tensor.shape[-1])
    cols = int(tile_shape[-1])
    v = full
    if len(tensor.shape) > 1 and tensor.nbytes // es != last:
        v = min(v, pow2_divisor(last))            # every row must start on a v-element boundary
    if last % cols:
        v = min(v, pow2_divisor(last))            # the masked last tile of a row
    return max(1, min(v, cols))


def port_width(tensor: ir.TensorArg, tile_shape: tuple) -> int:
    """The access width whose cost a register tile's load or store pays on the SM's load/store path.

    Where the narrowness comes from the rows' pitch (a tensor with rows whose length is not a
    multiple of 16 bytes), Triton cannot prove the row starts aligned and lays the tile out with
    consecutive lanes on consecutive elements: each warp access covers 32 x element bytes in one or
    two lines, the bytes cost what they cost aligned, only in more instructions (which the compiled
    loop's issue counts). Where only the mask is narrow (a 1-D tensor whose length is not a multiple
    of 16 bytes, the pointer aligned), Triton keeps the 16-byte-per-thread layout and splits each
    thread's vector into element-wide accesses: every warp access then touches the sixteen sectors
    of 512 bytes for 64 or 128 bytes of data, and the stores reach the L2 as partial sectors. ncu
    on the H200 (data/h200/micro/ncu_probe_round7b.json): the fused elementwise kernel at
    an odd length, 16 L1 sectors per global load request and 5.7 times the data's sectors written to
    the L2; a softmax over 9999-element rows, 2.9 sectors per request. So the measured narrow rate
    (``scalar_access_per_clk_per_sm``, from such a copy) applies to the mask-limited case only."""
    width = vector_width(tensor, tile_shape)
    es = ir.DTYPE_BYTES[tensor.dtype]
    if len(tensor.shape) > 1 and tensor.nbytes // es != int(tensor.shape[-1]) \
            and pow2_divisor(int(tensor.shape[-1])) * es < VECTOR_BYTES:
        return max(width, min(VECTOR_BYTES // es, int(tile_shape[-1])))
    return width


def store_port_bytes(tensor: ir.TensorArg, tile_shape: tuple, nbytes: float, cfg: GPUConfig) -> float:
    """Bytes-equivalent time a register tile's store holds the SM's load/store path. The narrow
    rate was measured with a copy (one load and one store per element); ncu shows its loads' repeated
    sectors hitting in the L1 (70% hit rate, exactly the data's sectors missing) and its stores reaching
    the L2 as 5.7 times the data's sectors, the warps stalled on the load/store queues. So the
    copy's whole time is the stores': two of its element accesses per stored element, and a narrow
    load costs its bytes."""
    es = ir.DTYPE_BYTES[tensor.dtype]
    return port_bytes(nbytes, 2.0 * nbytes / es, es, port_width(tensor, tile_shape), cfg)


def port_bytes(nbytes: float, elements: float, es: int, width: int, cfg: GPUConfig) -> float:
    """Bytes-equivalent time a tile access holds the SM's load/store port: its bytes, or, for an
    access narrower than a full vector, the element rate the config measured for that width."""
    rate = cfg.scalar_access_per_clk_per_sm.get(es) if width * es < VECTOR_BYTES else None
    if not rate:
        return nbytes
    cycles = elements / (rate * width)
    return max(nbytes, cycles * cfg.sm_load_bytes_per_clk)
