"""Command line: ``gpusim gpus | kernels | run | schema | triton-source | calibrate | validate``.

Exit codes: 0 when every point is ok or infeasible; 1 when some point errored (everything is still
written) or a worker died; 2 for bad input (a one-line message naming the file, the field, the
bad value and what is allowed, never a traceback); 130 on Ctrl-C and 143 on SIGTERM. Nothing
already computed is lost: finished points are saved as they finish.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from .args import UsageError, Parser, check_out, positive_float, positive_int
from .gpu import add_gpu_commands


class _Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an exception so the run stops its workers and exits like Ctrl-C."""


def _on_sigterm(signum, frame):
    # a second SIGTERM while the run shuts down (stopping workers, writing the manifest) is
    # ignored, so it cannot interrupt the shutdown with a traceback
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise _Terminated()


def _cmd_gpus(args):
    from ..hardware import available_gpus, load_gpu

    print(f"{'gpu':<16}{'SMs':>5}{'clock GHz':>10}{'SRAM/SM KiB':>12}{'L2 MiB':>8}{'HBM TB/s':>9}"
          f"{'fp16 TFLOP/s':>13}{'fp32 TFLOP/s':>13}{'ridge F/B':>10}{'power W':>8}  description")
    for name in available_gpus():
        c = load_gpu(name)
        limit = f"{c.power_limit_w:.0f}" if c.power_limit_w and c.activity_energy_j else "-"
        print(f"{name:<16}{c.sm_count:>5}{c.clock_hz / 1e9:>10.2f}{c.sram_bytes_per_sm / 1024:>12.0f}"
              f"{c.l2_bytes / 2**20:>8.0f}{c.hbm_read_bandwidth_bytes_per_s / 1e12:>9.2f}"
              f"{c.tensor_flops_per_s['fp16'] / 1e12:>13.0f}{c.fp32_flops_per_s / 1e12:>13.1f}"
              f"{c.ridge_flop_per_byte():>10.0f}{limit:>8}  {c.description}")
    print("clock: the maximum SM clock; power W: the board limit past which the model lowers it under load "
          "(docs/model.md), - for none")
    return 0


def _cmd_tune(args):
    """gpusim tune: rank a kernel's feasible tile / warp / stage configs by predicted time."""
    from ..yamlio import parse_value
    from ..sweep.outlock import OutLock
    from ..sweep.runner import cap_jobs
    from ..tune import TuneError, count_configs, rank, report_lines, search_space, write_csv

    def pairs(items, flag):
        out = {}
        for item in (x for group in (items or []) for x in group):
            key, eq, val = item.partition("=")
            if not eq or not key:
                raise UsageError(f"tune {flag} {item!r}: expected NAME=VALUE")
            out[key] = parse_value(val, f"tune {flag} {item!r}")
        return out
    shape = pairs(args.set, "--set")
    space = {k: v if isinstance(v, list) else [v] for k, v in pairs(args.space, "--space").items()}
    if args.out and os.path.lexists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"tune --out {_printable(args.out)}: exists and is not a directory; name a directory")
    jobs, warning = cap_jobs(args.jobs)
    if warning:
        print(f"gpusim: warning: {warning}", file=sys.stderr)
    try:
        sp = search_space(args.kernel, space)
        print(f"gpusim tune {args.kernel} on {args.gpu}: {count_configs(sp)} configs of "
              + ", ".join(f"{n} {list(v)}" for n, v in sp.items()) + f"; {jobs} process(es)"
              + ("" if args.out else "; nothing is saved without --out"), file=sys.stderr)
        kw = dict(jobs=jobs, prune=not args.no_prune, progress=None)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with OutLock(args.out):
                ranking = rank(args.kernel, args.gpu, shape, space, out=args.out, **kw)
        else:
            ranking = rank(args.kernel, args.gpu, shape, space, **kw)
    except TuneError as e:
        raise UsageError(f"tune --space: {e}") from None
    if not ranking.empty:
        cols = ["rank", *sp, "time_us", "time_us_lo", "time_us_hi", "overlaps_best", "tflops", "bound"]
        shown = [c for c in cols if not (c == "overlaps_best" and ranking[c].isna().all())]
        print(ranking[shown].head(args.top).to_string(index=False))
    for line in report_lines(ranking):
        print(line)
    if args.out:
        print(f"wrote {write_csv(ranking, args.out)}")
    return 0 if not ranking.empty else 1


def _cmd_kernels(args):
    from ..kernels import KERNELS, kernels_in_module, load_kernel_file

    if args.file:
        found = kernels_in_module(load_kernel_file(args.file))
        if not found:
            raise UsageError(f"{args.file}: defines no kernels (decorate a workload builder with "
                             f"@gpusim.kernels.kernel(...))")
        for k in found:
            attr = next(a for a, v in vars(load_kernel_file(args.file)).items() if v is k)
            print(f"{args.file}:{attr} -> " + k.describe())
        return 0
    for spec in KERNELS.values():
        print(spec.describe())
    return 0


def _cmd_run(args):
    from ..output.tables import run_table
    from ..sweep import runner
    from ..sweep.scenario import load_scenario

    from ..models import scenario as model_scenario
    check_out(args.out or Path("results") / Path(args.scenario).stem)
    if model_scenario.is_model_scenario(args.scenario):   # model: and phase: instead of kernel:
        try:
            jobs, warning = runner.cap_jobs(args.jobs)
            if warning:
                print(f"gpusim: warning: {warning}", file=sys.stderr)
            df = model_scenario.run(args.scenario, Path(args.out or Path("results") / Path(args.scenario).stem),
                                    plots=not args.no_plots, overrides=args.set, jobs=jobs)
        except ValueError as e:
            raise UsageError(str(e)) from None
        return 1 if (df.status == "error").any() else 0
    executor = args.executor or ("dask" if args.scheduler else "local")
    if executor == "local" and args.scheduler:
        raise UsageError(f"--scheduler {args.scheduler}: only used with --executor dask")
    if executor == "dask" and not args.scheduler:
        raise UsageError("--executor dask needs --scheduler ADDRESS (e.g. tcp://HOST:8786)")
    sc = load_scenario(args.scenario, args.set, max_points=args.max_points)
    out = Path(args.out or Path("results") / Path(args.scenario).stem)
    if args.timeline and len(sc.points) != 1:
        raise UsageError(f"{args.scenario}: --timeline needs a single point, the scenario has {len(sc.points)}; "
                         f"narrow it with --set (e.g. --set sweep={{}})")
    runner.prepare_out(out)
    from ..sweep.outlock import OutLock

    with OutLock(out):
        return _run_locked(args, sc, out, executor, runner, run_table)


def _run_locked(args, sc, out, executor, runner, run_table):
    """The part of ``gpusim run`` done while holding ``out``'s lock."""
    if executor == "dask":
        from ..sweep.executors import check_scheduler

        check_scheduler(args.scheduler)
    removed = runner.claim_out(out, sc, force=args.force)
    if removed:
        print(f"gpusim: --force: removed {', '.join(removed)} of another scenario from {out}", file=sys.stderr)
    jobs, warning = runner.cap_jobs(args.jobs)
    if warning:
        print(f"gpusim: warning: {warning}", file=sys.stderr)
    where = f"dask at {args.scheduler}" if executor == "dask" else f"{jobs} process(es)"
    print(f"gpusim run {_printable(sc.name)}: {len(sc.points)} point(s) on {where} -> {out}", file=sys.stderr)
    rows, krows = runner.run_scenario(sc, out, jobs=jobs, force=args.force, executor=executor,
                                      scheduler=args.scheduler, dask_timeout=args.dask_timeout)
    print(run_table(rows, sc.param_names))
    written = [out / "results.csv", out / "kernels.csv", out / "manifest.json"]
    extra = []
    if not args.no_plots:
        try:
            from ..output import report
        except ImportError:
            report = None
        if report is not None and hasattr(report, "make_reports"):
            extra += report.make_reports(out, sc, rows, krows, fmt=args.format)
    if args.timeline:
        _, _, result = runner.run_point(sc.points[0], timeline=True)
        if result is not None and result.status == "ok":
            from ..output import timeline

            extra += timeline.write_timeline(result, out, fmt=args.format)
    runner.note_files(out, extra)
    print("wrote " + ", ".join(str(p) for p in written + extra), file=sys.stderr)
    errors = sum(r.get("status") == "error" for r in rows)
    if errors:
        print(f"gpusim: {errors} of {len(rows)} point(s) failed (status=error in {out / 'results.csv'})",
              file=sys.stderr)
    for bad in ("unphysical",):
        n = sum(r.get("status") == bad for r in rows)
        if n:
            print(f"gpusim: {n} of {len(rows)} point(s) are {bad} (reason in {out / 'results.csv'})", file=sys.stderr)
            errors += n
    mismatches = sum(r.get("status") == "mismatch" for r in rows)
    if mismatches:
        print(f"gpusim: {mismatches} of {len(rows)} point(s) failed the exact check "
              f"(status=mismatch in {out / 'results.csv'})", file=sys.stderr)
    return 1 if errors or mismatches else 0


def _cmd_schema(args):
    import json

    from ..models.scenario import json_schema
    from ..sweep.scenario import ScenarioFile

    # kernel scenarios and model scenarios: every file in scenarios/ validates against it
    print(json.dumps(json_schema(ScenarioFile.model_json_schema()), indent=2, sort_keys=True))
    return 0


def _add_run(sub) -> None:
    """The ``run`` subcommand and its options."""
    r = sub.add_parser("run", help="run a scenario YAML (sweeps, CSVs, plots)",
                       description="Simulate every point of a scenario YAML (a GPU, a kernel, its params and an "
                                   "optional sweep); print a table and write results.csv, kernels.csv, "
                                   "manifest.json and plots to --out. Finished points are saved as they finish, "
                                   "so an interrupted run resumes. Exit code 0 when every point is ok or "
                                   "infeasible, 1 when a point errored, 2 for bad input.")
    r.add_argument("scenario", help="scenario YAML file (examples in scenarios/)")
    r.add_argument("--out", help="output directory (default results/<scenario file name without .yaml>)")
    r.add_argument("--jobs", type=positive_int, default=None,
                   help="parallel processes (default and most: all cores; 1 runs the points in this process)")
    r.add_argument("--force", action="store_true", help="recompute points that are already saved in --out "
                   "(and remove another scenario's results there)")
    r.add_argument("--max-points", type=positive_int, default=None, metavar="N",
                   help="refuse sweeps with more points than this (default 100000)")
    r.add_argument("--dask-timeout", type=positive_float, default=60.0, metavar="SECONDS",
                   help="with dask: give up when no worker has been alive this long (default 60)")
    r.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a scenario field (dotted path, YAML value), e.g. params.head_dim=128 or "
                        "sweep.seq_len=[512,1024]; repeatable")
    r.add_argument("--executor", choices=("local", "dask"), default=None,
                   help="where points run: local processes (default) or a dask.distributed cluster")
    r.add_argument("--scheduler", metavar="ADDRESS", help="dask scheduler address, e.g. tcp://HOST:8786 "
                   "(implies --executor dask)")
    r.add_argument("--timeline", action="store_true", help="write timeline.json (Chrome trace) and timeline.png")
    r.add_argument("--format", choices=("png", "svg"), default="png", help="plot format")
    r.add_argument("--no-plots", action="store_true", help="skip plots")
    r.set_defaults(fn=_cmd_run)


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="gpusim", description="Cycle-approximate GPU memory-hierarchy simulator")
    from .. import __version__

    ap.add_argument("--version", action="version", version=f"gpusim {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    sub.add_parser("gpus", help="list GPU configs and their key numbers",
                   description="List the GPU configs in configs/ with their key numbers (SMs, clock, SRAM, L2, "
                               "HBM bandwidth, peak FLOP/s, ridge point). A scenario's gpu: takes one of these "
                               "names or a path to a GPU YAML.").set_defaults(fn=_cmd_gpus)
    k = sub.add_parser("kernels", help="list built-in kernels (or those of a kernel file) and their parameters",
                       description="List the built-in kernels (or the @gpusim.kernels.kernel functions of FILE) "
                                   "with every parameter, its type, default and allowed values (what a "
                                   "scenario's params: and sweep: take).")
    k.add_argument("file", nargs="?", help="a Python file of user kernels (@gpusim.kernels.kernel)")
    k.set_defaults(fn=_cmd_kernels)
    _add_run(sub)
    tu = sub.add_parser("tune", help="rank a kernel's tile / warp / stage configs by predicted time",
                        description="Rank the configs of KERNEL's BLOCK*, num_warps and num_stages parameters at one "
                                    "shape by simulated time and print the fastest. Configs are simulated in the "
                                    "order of a cheap lower bound of their time; those that cannot come within 5%% "
                                    "of the best are pruned unsimulated. --out saves each simulated config as it "
                                    "finishes (a re-run resumes) and the full ranking.")
    tu.add_argument("kernel", help="a built-in kernel, file.py:name or module:name")
    tu.add_argument("--gpu", default="h100", help="GPU config name or YAML (default h100)")
    tu.add_argument("--set", action="append", nargs="+", metavar="NAME=VALUE", help="shape parameter, e.g. M=4096")
    tu.add_argument("--space", action="append", nargs="+", metavar="NAME=[V,...]",
                    help="values to try for a tunable, e.g. BLOCK_M=[64,128] (default: the spec's choices)")
    tu.add_argument("--top", type=positive_int, default=5, help="configs to print (default 5)")
    tu.add_argument("--jobs", type=positive_int, default=None,
                    help="parallel processes (default and most: all cores; 1 runs the configs in this process)")
    tu.add_argument("--out", help="directory for tune.csv (the full ranking) and tune_points.jsonl (each simulated "
                                  "config, saved as it finishes: a re-run resumes)")
    tu.add_argument("--no-prune", action="store_true", help="simulate every feasible config (default: skip those "
                    "whose lower bound is more than 5%% above the best time; docs/tune.md)")
    tu.set_defaults(fn=_cmd_tune)
    sub.add_parser("schema", help="print the JSON Schema of scenario files").set_defaults(fn=_cmd_schema)
    add_gpu_commands(sub)
    return ap


def _printable(text) -> str:
    """``text`` with control characters (newlines, ANSI escapes) written as escapes, so a name in a
    file cannot forge or recolour output lines."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def main(argv=None) -> int:
    import threading

    from ..hardware import ConfigError
    from ..kernels import KernelParamError
    from ..sweep.errors import RunError, ScenarioError

    ap = build_parser()
    args = ap.parse_args(argv)
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return args.fn(args) or 0
    except (ScenarioError, ConfigError, UsageError) as e:
        print(f"gpusim: error: {_printable(e)}", file=sys.stderr)
        return 2
    except KernelParamError as e:
        print(f"gpusim: error: {_printable(e.field)}: {_printable(e)}", file=sys.stderr)
        return 2
    except RunError as e:
        print(f"gpusim: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # output piped into head & co.: stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except MemoryError:
        print("gpusim: error: out of memory; finished points are saved (use fewer --jobs or smaller points)",
              file=sys.stderr)
        return 1
    except OSError as e:
        # disk full, a file vanished under us...: the environment, not a gpusim bug
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"gpusim: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        print("gpusim: interrupted; finished points are saved, re-run the same command to resume", file=sys.stderr)
        return 143 if isinstance(e, _Terminated) else 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
