"""Compile a program's generated Triton source for a GPU architecture without a GPU, and read what
the real compiler decided: registers per thread, spills, shared memory, the SASS instruction mix.

``triton.compile`` runs the whole toolchain (Triton -> PTX -> ``ptxas`` -> cubin) on the CPU; the
triton wheel carries ``cuobjdump`` and ``nvdisasm``, which read the cubin. Pointer arguments are
compiled as 16-byte aligned (``tt.divisibility=16``), which is how the JIT specialises torch
tensors, so the vector width of global accesses is the one a real launch gets.

Results are ``CompiledResources`` (frozen), cached per process and on disk under
``<cache>/resources/`` (see ``cache``), keyed by the content: source text, kernel name,
num_warps, num_stages, arch, pointer signature and triton version. triton is imported inside
functions only.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass

from ..dsl import ir
from .cache import cache_dir, digest, import_source, interpreting, write_atomic
from .lower import kernel_name, launch_stages, lower
from .sass_deps import loop_bodies, scan, straight_body

POINTER_TYPE = {"fp16": "*fp16", "bf16": "*bf16", "fp32": "*fp32", "int32": "*i32", "bool": "*i1",
                "fp8e4m3": "*fp8e4nv", "fp8e5m2": "*fp8e5"}
FORMAT = 5   # bump when the fields of CompiledResources change (part of the cache key); 3: loop MMA FLOPs, load bytes;
#              4: loop bodies with their register dependencies; 5: the straight-line code outside loops


@dataclass(frozen=True)
class CompiledResources:
    """What ptxas made of one kernel. SASS counts are static (instructions in the binary), overall
    and inside loops (between a backward branch and its target): the inner loop's mix is what
    repeats. Byte widths of global loads count both LDG and LDGSTS (cp.async) instructions."""

    kernel: str
    arch: int                    # compute capability, e.g. 90 (compiled for sm_90a)
    num_warps: int
    num_stages: int
    registers_per_thread: int    # REG from cuobjdump -res-usage (ptxas caps it at 255)
    stack_bytes: int             # STACK: per-thread stack frame (spilled values live here)
    shared_bytes: int            # dynamic shared memory Triton allocates (metadata.shared)
    spill_store_bytes: int       # bytes of STL instructions (equals ptxas -v "bytes spill stores")
    spill_load_bytes: int        # bytes of LDL instructions (ptxas -v "bytes spill loads")
    sass: tuple                  # ((opcode class, count), ...) over the whole kernel, sorted
    sass_loop: tuple             # the same, inside loops only
    global_load_widths: tuple    # ((bytes per thread per instruction, count), ...) of LDG/LDGSTS
    global_store_widths: tuple   # the same for STG
    triton_version: str
    ptxas_version: str
    # tensor FLOPs one warp's share of the loop body issues: each HGMMA.MxNxK (a warpgroup's) counts
    # 2MNK / 4, each HMMA.MNK (a warp's) 2MNK; x num_warps = the CTA's per iteration. None: unknown
    loop_mma_flops: float | None = None
    # bytes per thread of the global loads (LDG, LDGSTS) inside loops: against the tile program's
    # loads per iteration this gives how many iterations ptxas unrolled into one loop body
    loop_load_bytes: float | None = None
    # each loop body's instructions with the registers they write and read (``sass_deps``), for the
    # warp scoreboard of ``backends/sim/warp.py``. None: unknown
    loop_bodies: tuple | None = None
    # the instructions outside every loop, in program order (``sass_deps.straight_body``). None: unknown
    straight_body: tuple | None = None

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0

    def sass_count(self, opcode: str, loop: bool = False) -> int:
        """Static count of an opcode class (``HGMMA``, ``MUFU.EX2``, ``LDG``...)."""
        return dict(self.sass_loop if loop else self.sass).get(opcode, 0)

    @property
    def global_load_vector_bytes(self) -> int:
        """Bytes per thread of the most common global load (16 = 128-bit vectors; 0 if none)."""
        if not self.global_load_widths:
            return 0
        return max(self.global_load_widths, key=lambda wc: (wc[1], wc[0]))[0]

    def to_dict(self) -> dict:
        d = asdict(self)
        for f in ("sass", "sass_loop", "global_load_widths", "global_store_widths"):
            d[f] = {str(k): v for k, v in d[f]}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CompiledResources":
        d = dict(d)
        for f in ("sass", "sass_loop"):
            d[f] = tuple(sorted(d[f].items()))
        for f in ("global_load_widths", "global_store_widths"):
            d[f] = tuple(sorted((int(k), v) for k, v in d[f].items()))
        if d.get("loop_bodies") is not None:
            d["loop_bodies"] = tuple(tuple(b) for b in d["loop_bodies"])
        if d.get("straight_body") is not None:
            d["straight_body"] = tuple(d["straight_body"])
        return cls(**d)


class CompileError(RuntimeError):
    """Triton or ptxas could not compile the program."""


# --------------------------------------------------------------------------- SASS parsing
# opcode classes counted with a modifier as well as on their own
_DETAIL = ("MUFU.EX2", "MUFU.LG2", "MUFU.RCP", "MUFU.RSQ", "MUFU.SQRT")


def access_bytes(opcode: str, mods: str) -> int:
    """Bytes per thread of a load/store SASS instruction from its modifiers (32-bit by default)."""
    for m, b in ((".128", 16), (".64", 8), (".U16", 2), (".S16", 2), (".U8", 1), (".S8", 1)):
        if re.search(re.escape(m) + r"(\.|$)", mods):
            return b
    return 4


_HGMMA_SHAPE = re.compile(r"^\.(\d+)x(\d+)x(\d+)")
_HMMA_SHAPE = re.compile(r"^\.(16)(8)(8|16|32)\b")


def mma_flops_per_warp(op: str, tail: str) -> float:
    """Tensor FLOPs of one warp's share of an MMA instruction from its shape modifier: a Hopper
    ``HGMMA.64x32x16`` is issued by the 4 warps of a warpgroup for a 64x32x16 product (2*M*N*K / 4
    each); an ``HMMA.16816`` (m16n8k16) is one warp's. 0 when the shape is not recognised."""
    wg = op in ("HGMMA", "QGMMA")         # QGMMA: the FP8 warpgroup MMA (e.g. 64x128x32.F32.E4M3.E4M3)
    m = (_HGMMA_SHAPE if wg else _HMMA_SHAPE).match(tail)
    if not m:
        return 0.0
    a, b, c = (int(x) for x in m.groups())
    return 2.0 * a * b * c / (4 if wg else 1)


def parse_sass(text: str, scanned: tuple | None = None) -> dict:
    """Opcode-class counts (all and in-loop), spill bytes and global access widths from nvdisasm
    (``scanned``: ``scan(text)`` when the caller has it already)."""
    listing, loops = scanned or scan(text)
    instrs = [(addr, op, mods, rest) for addr, _, op, mods, rest in listing]
    total, in_loop = Counter(), Counter()
    loads, stores = Counter(), Counter()
    spill_st = spill_ld = 0
    mma_flops = loop_loads = 0.0
    for addr, op, mods, rest in instrs:
        keys = [op] + [d for d in _DETAIL if (op + mods).startswith(d)]
        inside = any(lo <= addr <= hi for lo, hi in loops)
        for k in keys:
            total[k] += 1
            if inside:
                in_loop[k] += 1
        if inside and op in ("HGMMA", "QGMMA", "HMMA"):
            mma_flops += mma_flops_per_warp(op, mods + rest)
        if op in ("LDG", "LDGSTS"):
            loads[access_bytes(op, mods)] += 1
            if inside:
                loop_loads += access_bytes(op, mods)
        elif op == "STG":
            stores[access_bytes(op, mods)] += 1
        elif op == "STL":
            spill_st += access_bytes(op, mods)
        elif op == "LDL":
            spill_ld += access_bytes(op, mods)
    return {"loop_mma_flops": mma_flops, "loop_load_bytes": loop_loads,
            "sass": tuple(sorted(total.items())), "sass_loop": tuple(sorted(in_loop.items())),
            "global_load_widths": tuple(sorted(loads.items())), "global_store_widths": tuple(sorted(stores.items())),
            "spill_store_bytes": spill_st, "spill_load_bytes": spill_ld}


def parse_res_usage(text: str, name: str) -> dict:
    """REG and STACK of function ``name`` from ``cuobjdump -res-usage``."""
    m = re.search(r"Function " + re.escape(name) + r":\s*\n\s*(.*)", text)
    if not m:
        raise CompileError(f"cuobjdump -res-usage shows no function {name}")
    fields = dict(re.findall(r"(\w+):(\d+)", m.group(1)))
    return {"registers_per_thread": int(fields["REG"]), "stack_bytes": int(fields.get("STACK", 0))}


# --------------------------------------------------------------------------- toolchain
def _tool(name: str) -> str:
    import triton.backends.nvidia as nv

    path = os.path.join(os.path.dirname(nv.__file__), "bin", name)
    if not os.path.exists(path):
        raise CompileError(f"{name} not found in the triton wheel ({path})")
    return path


def triton_version() -> str:
    """The installed triton's version (its distribution metadata; does not import triton)."""
    from importlib.metadata import version

    return version("triton")


def available() -> bool:
    """Whether triton (with its NVIDIA toolchain) can be imported here; a GPU is not needed."""
    try:
        _tool("cuobjdump")
        _tool("nvdisasm")
    except (ImportError, CompileError):
        return False
    return True


def _ptxas_version(arch: int) -> str:
    try:
        from triton.backends.nvidia.compiler import get_ptxas_version

        out = get_ptxas_version(arch) if arch >= 90 else get_ptxas_version()
        m = re.search(r"release ([\d.]+)|Build cuda_([\d.]+)", out)
        return next(g for g in m.groups() if g) if m else out.strip().splitlines()[-1]
    except Exception:   # noqa: BLE001 -- the version string is informative only
        return "unknown"


def _jit_function(source: str, name: str):
    """A ``JITFunction`` for ``name`` in ``source`` even under TRITON_INTERPRET=1 (which makes
    ``@triton.jit`` return an interpreter object wrapping the same Python function)."""
    from triton.runtime import JITFunction

    obj = getattr(import_source(source, "compile"), name)
    return obj if isinstance(obj, JITFunction) else JITFunction(obj.fn)


def _compile(source: str, name: str, sig_types: tuple, num_warps: int, num_stages: int, arch: int) -> CompiledResources:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = _jit_function(source, name)
    sig = dict(zip(fn.arg_names, sig_types))
    aligned = {(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig_types) if t.startswith("*")}
    try:
        k = triton.compile(ASTSource(fn, sig, {}, aligned), target=GPUTarget("cuda", arch, 32),
                           options={"num_warps": num_warps, "num_stages": num_stages, "enable_fp_fusion": True})
    except Exception as e:   # noqa: BLE001 -- triton raises many kinds; all mean "did not compile"
        raise CompileError(f"{name}: {type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}") from e
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, f"{name}.cubin")
        with open(cubin, "wb") as f:
            f.write(k.asm["cubin"])
        res = subprocess.run([_tool("cuobjdump"), "-res-usage", cubin], capture_output=True, text=True, check=True).stdout
        # -ndf: no dataflow analysis, the same text (43 cubins compared) in about 0.7 of the time
        sass = subprocess.run([_tool("nvdisasm"), "-c", "-ndf", cubin], capture_output=True, text=True,
                              check=True).stdout
    scanned = scan(sass)
    return CompiledResources(kernel=name, arch=arch, num_warps=num_warps, num_stages=num_stages,
                             shared_bytes=int(k.metadata.shared), triton_version=triton.__version__,
                             ptxas_version=_ptxas_version(arch), loop_bodies=loop_bodies(sass, scanned),
                             straight_body=straight_body(sass, scanned),
                             **parse_res_usage(res, name), **parse_sass(sass, scanned))


def _compile_clean(source: str, name: str, sig_types: tuple, num_warps: int, num_stages: int, arch: int) -> dict:
    """``_compile(...).to_dict()``. Under ``TRITON_INTERPRET=1``, once the interpreter has run a kernel
    of the same source in this process, Triton's compiler fails on it ("'value' object has no
    attribute 'dtype'": the interpreter's semantics stay bound to it), so a failure there is
    retried in a child process without the interpreter, and only that answer is cached."""
    try:
        return _compile(source, name, sig_types, num_warps, num_stages, arch).to_dict()
    except CompileError:
        if not interpreting():
            raise
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    job = json.dumps([source, name, list(sig_types), num_warps, num_stages, arch])
    code = ("import json, sys\nfrom gpusim.toolchain import compile as c\n"
            "a = json.loads(sys.stdin.read())\n"
            "try:\n    print(json.dumps({'result': c._compile(a[0], a[1], tuple(a[2]), *a[3:]).to_dict()}))\n"
            "except c.CompileError as e:\n    print(json.dumps({'error': str(e)}))\n")
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([pkg_root] + [x for x in env.get("PYTHONPATH", "").split(os.pathsep) if x])
    out = subprocess.run([sys.executable, "-c", code], input=job, capture_output=True, text=True, env=env)
    try:
        ans = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise CompileError(f"{name}: the compile in a child process failed: "
                           f"{(out.stderr.strip().splitlines() or ['no output'])[-1]}") from None
    if "error" in ans:
        raise CompileError(ans["error"])
    return ans["result"]


# --------------------------------------------------------------------------- cached entry points
_MEMO: dict = {}


def _key_text(source: str, name: str, sig_types: tuple, num_warps: int, num_stages: int, arch: int) -> str:
    import triton

    return json.dumps({"source": source, "name": name, "signature": list(sig_types), "num_warps": num_warps,
                       "num_stages": num_stages, "arch": arch, "triton": triton.__version__, "format": FORMAT},
                      sort_keys=True)


def _from_disk(key_text: str):
    """The cache entry for ``key_text`` (a dict with "result" or "error"), or None."""
    path = os.path.join(cache_dir("resources"), f"{digest(key_text)}.json")
    try:
        with open(path) as f:
            entry = json.load(f)
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) and entry.get("key") == key_text else None


def compile_source(source: str, name: str, sig_types: tuple, num_warps: int, num_stages: int,
                   arch: int = 90, *, cached_only: bool = False):
    """Resources of kernel ``name`` in ``source``; compiled at most once per content (per process,
    and across processes through the disk cache). Raises CompileError (also cached).
    ``cached_only``: return None instead of compiling what is not cached yet."""
    key_text = _key_text(source, name, sig_types, num_warps, num_stages, arch)
    key = digest(key_text)
    if key not in _MEMO:
        entry = _from_disk(key_text)
        if entry is None:
            if cached_only:
                return None
            try:
                entry = {"key": key_text, "result": _compile_clean(source, name, sig_types, num_warps, num_stages, arch)}
            except CompileError as e:
                entry = {"key": key_text, "error": str(e)}
            write_atomic(os.path.join(cache_dir("resources"), f"{key}.json"), json.dumps(entry, sort_keys=True))
        _MEMO[key] = CompiledResources.from_dict(entry["result"]) if "result" in entry else CompileError(entry["error"])
    out = _MEMO[key]
    if isinstance(out, CompileError):
        raise out
    return out


def compile_program(program: ir.Program, grid: tuple | None = None, arch: int = 90, *, cached_only: bool = False):
    """Resources of ``program`` as lowered for ``grid`` (the source a launch would run)."""
    src = lower(program, grid)
    sig_types = tuple(POINTER_TYPE[t.dtype] for t in program.params)
    return compile_source(src, kernel_name(program), sig_types, program.num_warps, launch_stages(program), arch,
                          cached_only=cached_only)
