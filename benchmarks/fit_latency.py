"""Check (or fit) the dependent-instruction latencies of a GPU config (``dependent_latency_cycles``)
against the dependent-chain microbenchmarks recorded on the GPU, and show how well the warp
scoreboard (``backends/sim/warp.py``) predicts each of them.

Since round 15 the shipped latencies are measured one by one (``benchmarks/latency_chains.py``),
and this script is their check: ``--check-all`` schedules every recorded chain's loop body with
the config's latencies. The microbenchmarks (``benchmarks/micro_fidelity.py latency``,
``reduction`` and ``chains``) ran one warp per SM (FMA and EX2 chains) or one CTA per SM (a chain
through a row reduction of an R x C tile, 1 to 16 warps), so nothing hides their latency. Each
kernel is compiled here for sm_90 as the JIT compiles it on the GPU (the same Triton source,
pointers 16-byte aligned), or its body read from ``--bodies``. Without ``--check-all`` the
latencies are fitted (coordinate descent on the mean relative error, from published values):
an exploration, not what the configs ship.

    PYTHONPATH=$PWD python benchmarks/fit_latency.py --check-all [--gpu configs/h200.yaml] [--json OUT]
    PYTHONPATH=$PWD python benchmarks/fit_latency.py [--json OUT]          (fit)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gpusim.backends.sim import warp  # noqa: E402
from gpusim.toolchain import compile as C  # noqa: E402
from gpusim.toolchain.sass_deps import loop_bodies  # noqa: E402

# SM-wide rates per clock (H200: 15.9 special-function ops measured; 32 shuffles and 128 shared-memory
# bytes from the CUDA programming guide's throughput table)
RATES = {"mufu": 16.0, "shfl": 32.0, "shared": 128.0}


BODIES: dict = {}      # (kernel, constexprs, warps) -> loop body recorded elsewhere (--bodies)


def _key(fn, constexprs: dict, num_warps: int) -> str:
    return json.dumps([fn.__name__, sorted(constexprs.items()), num_warps])


def _body(fn, signature: dict, constexprs: dict, num_warps: int) -> tuple:
    """The kernel's last loop body: from --bodies when recorded there, else compiled here."""
    key = _key(fn, constexprs, num_warps)
    if key not in BODIES:
        BODIES[key] = loop_bodies(_sass(fn, signature, constexprs, num_warps))[-1]
    return tuple(BODIES[key])


def _sass(fn, signature: dict, constexprs: dict, num_warps: int) -> str:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = dict(signature)
    sig.update({k: "constexpr" for k in constexprs})
    # as the JIT launches it on torch tensors, and as gpusim's own compile does: pointers 16-byte
    # aligned. Without that hint ptxas schedules a reduction's rows one after the other (a 4x
    # longer chain than the kernel that ran; round 15), and the default stages
    aligned = {(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig.values()) if t.startswith("*")}
    k = triton.compile(ASTSource(fn, sig, constexprs, aligned), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": num_warps})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.cubin")
        with open(path, "wb") as f:
            f.write(k.asm["cubin"])
        return subprocess.run([C._tool("nvdisasm"), "-c", path], capture_output=True, text=True, check=True).stdout


def cases(micro_dir: str) -> list:
    """(label, loop body, measured cycles per iteration) of every recorded chain row."""
    os.environ.pop("TRITON_INTERPRET", None)
    import micro_fidelity as mf     # noqa: E402  (benchmarks/ is on sys.path when run as a script)

    out = []
    fid = json.load(open(os.path.join(micro_dir, "micro_fidelity.json")))
    for row in fid["latency"]:
        if row.get("chain") not in ("fma", "ex2") or row.get("warps_per_sm") != 1:
            continue
        fn = mf._fma_chain if row["chain"] == "fma" else mf._ex2_chain
        sig = ({"out_ptr": "*fp32", "a": "fp32", "b": "fp32", "T": "i32"} if row["chain"] == "fma"
               else {"out_ptr": "*fp32", "c": "fp32", "T": "i32"})
        body = _body(fn, sig, {"BLOCK": 32}, 1)
        out.append((f"{row['chain']} chain, 1 warp", body, row["cycles_per_iter"]))
    red = json.load(open(os.path.join(micro_dir, "micro_reduction.json")))
    ops = {"max": 0, "sum": 1, "none": 2}
    for row in red["reduction"]:
        if "cycles_per_iter" not in row:
            continue
        body = _body(mf._reduce_chain, {"out_ptr": "*fp32", "c": "fp32", "T": "i32"},
                     {"R": row["R"], "C": row["C"], "OP": ops[row["op"]]}, row["num_warps"])
        out.append((f"{row['op']} {row['R']}x{row['C']}, {row['num_warps']} warps", body, row["cycles_per_iter"]))
    return out


def _warps(label: str) -> int:
    return int(label.split(", ")[-1].split()[0])


def held_out(path: str) -> list:
    """(label, loop body, measured cycles) of the ``chains`` rows (micro_fidelity.py chains)."""
    import micro_fidelity as mf     # noqa: E402

    kern = {"max": (mf._reduce_chain, 0), "sum": (mf._reduce_chain, 1), "exp2-max": (mf._softmax_chain, 0),
            "sum-exp2": (mf._softmax_chain, 1), "softmax": (mf._softmax_chain, 2)}
    out = []
    for row in json.load(open(path))["chains"]:
        if "cycles_per_iter" not in row:
            continue
        fn, op = kern[row["op"]]
        body = _body(fn, {"out_ptr": "*fp32", "c": "fp32", "T": "i32"}, {"R": row["R"], "C": row["C"], "OP": op},
                     row["num_warps"])
        out.append((f"{row['op']} {row['R']}x{row['C']}, {row['num_warps']} warps", body, row["cycles_per_iter"]))
    return out


def row_sweep(path: str) -> list:
    """(label, loop body, measured cycles) of the one-warp row-count sweep (benchmarks/reduce_rows.py)."""
    import micro_fidelity as mf     # noqa: E402
    import reduce_rows as rr        # noqa: E402

    out = []
    for row in json.load(open(path))["rows"]:
        op = 0 if row["op"] == "max" else 2
        if row["kernel"] == "_warp_max":
            body = _body(rr._warp_max, {"out_ptr": "*fp32", "c": "fp32", "T": "i32"}, {"OP": op}, 1)
        else:
            body = _body(mf._reduce_chain, {"out_ptr": "*fp32", "c": "fp32", "T": "i32"},
                         {"R": row["R"], "C": row["C"], "OP": op}, 1)
        out.append((f"{row['op']} {row['R']}x{row['C']} ({row['kernel'].strip('_')}), 1 warps", body,
                    row["cycles_per_iter"]))
    return out


def all_chains(micro_dir: str) -> list:
    """Every recorded chain: the fit rows, ``micro_chains.json`` and, when recorded, the row sweep."""
    rows = cases(micro_dir) + held_out(os.path.join(micro_dir, "micro_chains.json"))
    sweep = os.path.join(micro_dir, "micro_reduce_rows.json")
    return rows + (row_sweep(sweep) if os.path.exists(sweep) else [])


def errors(rows: list, lat: dict) -> list:
    return [warp.iteration_cycles(body, lat, RATES, _warps(label)) / meas - 1.0
            for label, body, meas in rows]


def _score(rows: list, lat: dict) -> float:
    e = errors(rows, lat)
    return sum(abs(x) for x in e) / len(e)


# held fixed: 4-cycle dependent FP32 and integer arithmetic (published for Volta..Hopper: Jia et al.
# 2018, Luo et al. 2024), and the SFU's 20 = the EX2 chain's 24 cycles per FMUL + MUFU.EX2 less the
# FMUL's 4; fitted: the classes only the reduction chains show, from these starting values
FIXED = {"fp32": 4, "int": 4, "mufu": 20}
START = {"shfl": 24, "shared": 30, "shared_store": 30, "barrier": 20, "branch": 4}


def fit(rows: list) -> dict:
    """Coordinate descent on the mean |relative error|, one fitted class at a time over 0..300
    cycles, two rounds from ``START``."""
    lat = dict(FIXED, **START)
    for _ in range(2):
        for k in START:
            lat[k] = min(range(0, 301), key=lambda v: _score(rows, dict(lat, **{k: v})))
    return lat


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--micro-dir", default=os.path.join(ROOT, "data", "h200", "micro"))
    ap.add_argument("--json", help="write the fitted latencies and per-row errors here")
    ap.add_argument("--check", help="instead of fitting, predict the held-out chains of this micro_fidelity.py "
                                    "chains JSON with the latencies of --gpu")
    ap.add_argument("--check-all", action="store_true",
                    help="predict every recorded chain (fit rows and micro_chains.json) with the latencies of --gpu")
    ap.add_argument("--gpu", default=os.path.join(ROOT, "configs", "h200.yaml"))
    ap.add_argument("--chains", help="also fit to the chains of this micro_fidelity.py chains JSON")
    ap.add_argument("--bodies", help="loop bodies recorded with the GPU machine's compiler (--dump there); "
                                     "default: compile here")
    ap.add_argument("--dump", help="compile every microbenchmark kernel (fit rows and, with --check, held-out "
                                   "rows) and write their loop bodies here, then stop")
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    if args.bodies:
        BODIES.update(json.load(open(args.bodies))["bodies"])
    if args.dump:
        import triton

        if args.check_all:
            all_chains(args.micro_dir)
        else:
            cases(args.micro_dir)
            if args.check:
                held_out(args.check)
        with open(args.dump, "w") as f:
            json.dump({"triton": triton.__version__, "bodies": BODIES}, f)
        print(f"wrote {len(BODIES)} loop bodies (triton {triton.__version__}) to {args.dump}")
        return 0
    if args.check or args.check_all:
        from gpusim.hardware import load_gpu

        lat = load_gpu(args.gpu).dependent_latency_cycles
        rows = all_chains(args.micro_dir) if args.check_all else held_out(args.check)
        errs = errors(rows, lat)
        res = []
        for (label, body, meas), e in zip(rows, errs):
            res.append({"case": label, "instructions": len(body), "measured_cycles": meas,
                        "predicted_cycles": meas * (1 + e), "error_pct": 100 * e})
            print(f"  {label:28s} {len(body):4d} instr  measured {meas:8.1f}  predicted {meas * (1 + e):8.1f}  {100 * e:+6.1f}%")
        a = sorted(abs(x) for x in errs)
        summary = {"chains": len(a), "median_abs_error_pct": 100 * a[len(a) // 2],
                   "p90_abs_error_pct": 100 * a[int(0.9 * len(a))], "max_abs_error_pct": 100 * a[-1],
                   "mean_error_pct": 100 * sum(errs) / len(errs)}
        print(f"chains: {summary['chains']}, median |error| {summary['median_abs_error_pct']:.1f}%, "
              f"p90 {summary['p90_abs_error_pct']:.1f}%, max {summary['max_abs_error_pct']:.1f}%, "
              f"mean {summary['mean_error_pct']:+.1f}%  (latencies of {args.gpu}: {lat})")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"gpu": os.path.relpath(args.gpu, ROOT), "dependent_latency_cycles": lat, "summary": summary, "rows": res}, f, indent=1)
        return 0
    rows = cases(args.micro_dir) + (held_out(args.chains) if args.chains else [])
    lat = fit(rows)
    print("fitted dependent_latency_cycles:", lat)
    res = []
    for (label, body, meas), e in zip(rows, errors(rows, lat)):
        pred = meas * (1 + e)
        res.append({"case": label, "instructions": len(body), "measured_cycles": meas, "predicted_cycles": pred,
                    "error_pct": 100 * e})
        print(f"  {label:28s} {len(body):4d} instr  measured {meas:8.1f}  predicted {pred:8.1f}  {100 * e:+6.1f}%")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dependent_latency_cycles": lat, "rows": res}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
