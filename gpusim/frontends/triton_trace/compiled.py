"""Compiled resources of a user's Triton kernel: its own source compiled by Triton for the GPU's
architecture (no GPU needed), as the compiled view compiles the source gpusim generates for DSL
kernels, and read back the same way (``toolchain/compile.py``: registers, spills, SASS mix,
loop bodies). The signature is the one Triton's JIT would specialise for the launch: pointers
16-byte aligned, integer arguments divisible by 16 marked so, integers equal to 1 as constants.
Results are cached per process and on disk, keyed by the kernel file's text and the launch."""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field

from ...toolchain import compile as tc
from ...toolchain.cache import cache_dir, digest, write_atomic
from .trace import python_function

POINTER = {"fp16": "*fp16", "bf16": "*bf16", "fp32": "*fp32", "int32": "*i32"}


def signature(pyfn, tensors: dict, scalars: dict):
    """(types by name, constexprs by index, attributes by index) of a launch, as the JIT specialises it."""
    params = list(inspect.signature(pyfn).parameters.items())
    sig, consts, attrs = {}, {}, {}
    for i, (n, p) in enumerate(params):
        if "constexpr" in str(p.annotation):
            sig[n], consts[(i,)] = "constexpr", scalars.get(n, getattr(p.default, "value", p.default))
        elif n in tensors:
            sig[n], attrs[(i,)] = POINTER[tensors[n][0]], [["tt.divisibility", 16]]
        else:
            v = scalars[n]
            if isinstance(v, bool):
                sig[n] = "i1"
            elif isinstance(v, int) and v == 1:
                sig[n], consts[(i,)] = "constexpr", 1
            elif isinstance(v, int):
                sig[n] = "i32" if -2 ** 31 <= v < 2 ** 31 else "i64"
                if v % 16 == 0:
                    attrs[(i,)] = [["tt.divisibility", 16]]
            else:
                sig[n] = "fp32"
    return sig, consts, attrs


def _compile(pyfn, sig, consts, attrs, num_warps, num_stages, arch) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime import JITFunction

    name = pyfn.__name__
    try:
        k = triton.compile(ASTSource(JITFunction(pyfn), sig, consts, attrs), target=GPUTarget("cuda", arch, 32),
                           options={"num_warps": num_warps, "num_stages": num_stages})
    except Exception as e:   # noqa: BLE001 -- triton raises many kinds; all mean "did not compile"
        raise tc.CompileError(f"{name}: {type(e).__name__}: {(str(e).strip().splitlines() or [''])[-1]}") from e
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, f"{name}.cubin")
        with open(cubin, "wb") as f:
            f.write(k.asm["cubin"])
        res = subprocess.run([tc._tool("cuobjdump"), "-res-usage", cubin], capture_output=True, text=True,
                             check=True).stdout
        sass = subprocess.run([tc._tool("nvdisasm"), "-c", "-ndf", cubin], capture_output=True, text=True,
                              check=True).stdout
    scanned = tc.scan(sass)
    return tc.CompiledResources(
        kernel=name, arch=arch, num_warps=num_warps, num_stages=num_stages, shared_bytes=int(k.metadata.shared),
        triton_version=triton.__version__, ptxas_version=tc._ptxas_version(arch),
        loop_bodies=tc.loop_bodies(sass, scanned), straight_body=tc.straight_body(sass, scanned),
        **tc.parse_res_usage(res, name), **tc.parse_sass(sass, scanned)).to_dict()


_MEMO: dict = {}


@dataclass(frozen=True, eq=False)
class UserSource:
    """The compile step of one traced launch; ``program.meta["compile"]``, called with the arch."""

    fn: object = field(repr=False)
    tensors: dict
    scalars: dict
    num_warps: int
    num_stages: int

    def key(self, arch: int) -> str:
        import triton

        pyfn = python_function(self.fn)
        src = open(inspect.getsourcefile(pyfn)).read()
        sig, consts, attrs = signature(pyfn, self.tensors, self.scalars)
        return json.dumps({"source": src, "name": pyfn.__qualname__, "sig": sig, "consts": repr(sorted(consts.items())),
                           "attrs": repr(sorted(attrs.items())), "warps": self.num_warps, "stages": self.num_stages,
                           "arch": arch, "triton": triton.__version__, "format": tc.FORMAT}, sort_keys=True)

    def __call__(self, arch: int):
        key_text = self.key(arch)
        key = digest(key_text)
        if key not in _MEMO:
            path = os.path.join(cache_dir("resources"), f"user-{key}.json")
            entry = None
            try:
                with open(path) as f:
                    entry = json.load(f)
                entry = entry if entry.get("key") == key_text else None
            except (OSError, ValueError):
                pass
            if entry is None:
                pyfn = python_function(self.fn)
                try:
                    entry = {"key": key_text, "result": _compile(pyfn, *signature(pyfn, self.tensors, self.scalars),
                                                                 self.num_warps, self.num_stages, arch)}
                except tc.CompileError as e:
                    entry = {"key": key_text, "error": str(e)}
                write_atomic(path, json.dumps(entry, sort_keys=True))
            _MEMO[key] = tc.CompiledResources.from_dict(entry["result"]) if "result" in entry \
                else tc.CompileError(entry["error"])
        out = _MEMO[key]
        if isinstance(out, tc.CompileError):
            raise out
        return out
