"""Command line: ``gpusim gpus | kernels | run | triton-source | calibrate | validate``.

Bad input exits with code 2 and a one-line message; nothing already computed is lost.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


class UsageError(Exception):
    pass


def _cmd_gpus(args):
    from .hardware import available_gpus, load_gpu

    print(f"{'gpu':<14}{'SMs':>5}{'clock GHz':>10}{'SRAM/SM KiB':>12}{'L2 MiB':>8}{'HBM TB/s':>9}"
          f"{'fp16 TFLOP/s':>13}{'fp32 TFLOP/s':>13}{'ridge F/B':>10}  description")
    for name in available_gpus():
        c = load_gpu(name)
        print(f"{name:<14}{c.sm_count:>5}{c.clock_hz / 1e9:>10.2f}{c.sram_bytes_per_sm / 1024:>12.0f}"
              f"{c.l2_bytes / 2**20:>8.0f}{c.hbm_read_bandwidth_bytes_per_s / 1e12:>9.2f}"
              f"{c.tensor_flops_per_s['fp16'] / 1e12:>13.0f}{c.fp32_flops_per_s / 1e12:>13.1f}"
              f"{c.ridge_flop_per_byte():>10.0f}  {c.description}")
    return 0


def _cmd_kernels(args):
    from .kernels import KERNELS

    for spec in KERNELS.values():
        print(f"{spec.name}: {spec.help}")
        for p in spec.params:
            allowed = f" [{', '.join(map(str, p.choices))}]" if p.choices else ""
            print(f"    {p.name:<11} {p.kind.__name__:<5} default {str(p.default):<9} {p.help}{allowed}")
    return 0


def _cmd_run(args):
    from .scenario import format_table, load_scenario, run_scenario

    sc = load_scenario(args.scenario, args.set)
    out = Path(args.out or Path("results") / Path(args.scenario).stem)
    if args.timeline and len(sc.points) != 1:
        raise UsageError(f"{args.scenario}: --timeline needs a single point, the scenario has {len(sc.points)}; "
                         f"narrow it with --set (e.g. --set sweep={{}})")
    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
    print(f"gpusim run {sc.name}: {len(sc.points)} point(s) -> {out}", file=sys.stderr)
    rows, krows = run_scenario(sc, out, jobs=jobs, force=args.force, executor=args.executor,
                               scheduler=args.scheduler)
    print(format_table(rows, sc.param_names))
    written = [out / "results.csv", out / "kernels.csv", out / "manifest.json"]
    if not args.no_plots:
        try:
            from . import report
        except ImportError:
            report = None
        if report is not None and hasattr(report, "make_reports"):
            written += report.make_reports(out, sc, rows, krows, fmt=args.format)
    if args.timeline:
        from .scenario import run_point

        _, _, result = run_point(sc.points[0], timeline=True)
        if result is not None and result.status == "ok":
            from . import timeline

            written += timeline.write_timeline(result, out, fmt=args.format)
    print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
    return 0 if all(r.get("status") == "ok" for r in rows) or rows else 1


def _parse_sets(pairs):
    params = {}
    import yaml

    for a in pairs or []:
        if "=" not in a:
            raise UsageError(f"--set {a!r}: expected NAME=VALUE, e.g. --set seq_len=1024")
        k, v = a.split("=", 1)
        params[k.strip().removeprefix("params.")] = yaml.safe_load(v)
    return params


def _cmd_triton_source(args):
    from .kernels import KernelParamError, resolve_params

    params = _parse_sets(args.set)
    try:
        resolve_params(args.kernel, params)
    except KernelParamError as e:
        raise UsageError(f"triton-source: {e.field}: {e}") from None
    from .backends.triton_backend import main_triton_source

    print(main_triton_source(args.kernel, params))
    return 0


def _cmd_calibrate(args):
    from .calibrate import main as calibrate_main

    return calibrate_main(args)


def _cmd_validate(args):
    from .validate import main as validate_main

    return validate_main(args)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="gpusim", description="Cycle-approximate GPU memory-hierarchy simulator")
    from . import __version__

    ap.add_argument("--version", action="version", version=f"gpusim {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("gpus", help="list GPU configs and their key numbers").set_defaults(fn=_cmd_gpus)
    sub.add_parser("kernels", help="list built-in kernels and their parameters").set_defaults(fn=_cmd_kernels)
    r = sub.add_parser("run", help="run a scenario YAML (sweeps, CSVs, plots)")
    r.add_argument("scenario")
    r.add_argument("--out", help="output directory (default results/<scenario name>)")
    r.add_argument("--jobs", type=int, default=None, help="parallel processes (default: all cores)")
    r.add_argument("--force", action="store_true", help="recompute points that are already saved")
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a scenario field, e.g. params.head_dim=128")
    r.add_argument("--executor", choices=("local", "dask"), default="local")
    r.add_argument("--scheduler", help="dask scheduler address for --executor dask")
    r.add_argument("--timeline", action="store_true", help="write timeline.json (Chrome trace) and timeline.png")
    r.add_argument("--format", choices=("png", "svg"), default="png", help="plot format")
    r.add_argument("--no-plots", action="store_true", help="skip plots")
    r.set_defaults(fn=_cmd_run)
    t = sub.add_parser("triton-source", help="print the Triton code generated for a built-in kernel")
    t.add_argument("kernel")
    t.add_argument("--set", action="append", metavar="PARAM=VALUE")
    t.set_defaults(fn=_cmd_triton_source)
    c = sub.add_parser("calibrate", help="measure a real GPU with microbenchmarks and write a config")
    c.add_argument("--base", default="h200", help="config whose unmeasured fields are kept")
    c.add_argument("--out", required=True, help="path of the config YAML to write")
    c.add_argument("--quick", action="store_true", help="fewer repetitions")
    c.set_defaults(fn=_cmd_calibrate)
    v = sub.add_parser("validate", help="run a scenario both simulated and on the GPU")
    v.add_argument("scenario")
    v.add_argument("--gpu", default="h200-measured")
    v.add_argument("--out", required=True)
    v.add_argument("--set", action="append", metavar="KEY=VALUE")
    v.add_argument("--no-ncu", action="store_true", help="skip DRAM counters from ncu")
    v.add_argument("--reference", action="store_true", help="also time PyTorch eager and SDPA attention")
    v.set_defaults(fn=_cmd_validate)
    return ap


def main(argv=None) -> int:
    from .hardware import ConfigError
    from .kernels import KernelParamError
    from .scenario import ScenarioError

    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        return args.fn(args) or 0
    except (ScenarioError, ConfigError, UsageError) as e:
        print(f"gpusim: error: {e}", file=sys.stderr)
        return 2
    except KernelParamError as e:
        print(f"gpusim: error: {e.field}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gpusim: interrupted; finished points are saved, re-run the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
