"""The commands that run on, measure or generate code for a real GPU: ``triton-source``,
``calibrate`` and ``validate``."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from .args import UsageError, check_out, parse_sets, positive_int


def _cmd_triton_source(args):
    from ..dsl.rules import first_violation
    from ..kernels import KernelParamError, build, resolve_params

    params = parse_sets(args.set)
    try:
        resolve_params(args.kernel, params)
    except KernelParamError as e:
        raise UsageError(f"triton-source: {e.field}: {e}") from None
    try:
        workload = build(args.kernel, params)
    except ValueError as e:
        raise UsageError(f"triton-source {args.kernel}: {e}") from None
    why = first_violation(workload)
    if why:
        raise UsageError(f"triton-source {args.kernel}: Triton cannot compile it: {why}")
    from ..toolchain.lower import LoweringError, workload_source

    try:
        source = workload_source(workload)
    except LoweringError as e:
        raise UsageError(f"triton-source {args.kernel}: {e}") from None
    print(source)
    return 0


def _cmd_calibrate(args):
    if args.ops:
        if args.quick:
            raise UsageError("calibrate: --quick sizes a full calibration (--out); --ops has no quick plan")
        from ..hw.calibrate import main_ops

        return main_ops(args)
    if args.ops_stages:
        raise UsageError("calibrate: --ops-stages needs --ops OUT.json")
    from ..hw.calibrate import main as calibrate_main

    return calibrate_main(args)


def _ops_stages(text: str) -> list:
    from ..hw.calibrate.runner import OPS_STAGES

    stages = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in stages if s not in OPS_STAGES]
    if bad or not stages:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated list of {', '.join(OPS_STAGES)}")
    return stages


def _ncu_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of points, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (use --no-ncu to skip ncu), got {n}")
    return n


def _cmd_validate(args):
    modes = [m for m, on in (("SCENARIO", args.scenario), ("--reanalyze", args.reanalyze),
                             ("--ncu-points", args.ncu_points)) if on]
    if len(modes) != 1:
        raise UsageError("validate: give exactly one of SCENARIO, --reanalyze DIR, --ncu-points FILE"
                         + (f" (got {', '.join(modes)})" if modes else ""))
    if not args.scenario:
        extra = [o for o, on in (("--set", args.set), ("--no-ncu", args.no_ncu), ("--ncu-max", args.ncu_max),
                                 ("--reference", args.reference)) if on]
        if extra:
            raise UsageError(f"validate {modes[0]}: {', '.join(extra)} only apply when measuring a SCENARIO")
    if args.reanalyze:
        from ..hw.validate.rows import validation_file

        src = validation_file(args.reanalyze)
        if src is None:
            raise UsageError(f"validate --reanalyze {args.reanalyze}: no validation.json or validation.json.gz there "
                             f"(expected a directory written by gpusim validate, or its validation.json)")
        _check_json(src)
    elif args.scenario and not args.out:
        raise UsageError("validate SCENARIO needs --out DIR (where validation.json and the report go)")
    if args.out:
        check_out(args.out)
    from ..hw.validate import main as validate_main

    return validate_main(args)


MAX_VALIDATION_JSON_BYTES = 1 << 26   # a validation.json.gz unpacked: ~1.5 KB a point


def _validation_text(path: Path) -> str:
    """The text of a saved validation.json, or of a .json.gz unpacked to at most
    MAX_VALIDATION_JSON_BYTES (a file cut short or not gzip at all is a UsageError)."""
    import gzip
    import io
    import stat
    import zlib

    from ..yamlio import MAX_FILE_BYTES, read_at_most, read_text_bounded

    if path.suffix != ".gz":
        return read_text_bounded(path, "a validation.json", UsageError)
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise UsageError(f"{path}: not a regular file (a device, FIFO or socket); expected a validation.json.gz")
    data = read_at_most(path, 16 * MAX_FILE_BYTES)
    if len(data) > 16 * MAX_FILE_BYTES:
        raise UsageError(f"{path}: more than {16 * MAX_FILE_BYTES:,} bytes; not a validation.json.gz written by "
                         f"gpusim validate")
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            text = f.read(MAX_VALIDATION_JSON_BYTES + 1)
    except (EOFError, OSError, zlib.error):
        raise UsageError(f"{path}: not a complete gzip file (cut short or corrupt); "
                         f"re-run gpusim validate or restore the file") from None
    if len(text) > MAX_VALIDATION_JSON_BYTES:
        raise UsageError(f"{path}: unpacks to more than {MAX_VALIDATION_JSON_BYTES:,} bytes; "
                         f"not a validation.json.gz written by gpusim validate")
    return text.decode("utf-8")


def _check_json(path: Path) -> None:
    """One line (UsageError) for a validation.json (or .json.gz) that is no regular file, too
    large, truncated or nested absurdly deep, before the validation code reads it."""
    import json

    from ..sweep.errors import ScenarioError

    try:
        data = json.loads(_validation_text(path))
    except (ScenarioError, OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    except RecursionError:
        raise UsageError(f"{path}: nested too deeply to be a validation.json") from None
    except ValueError as e:
        raise UsageError(f"{path}: not valid JSON ({e}); was it cut short? re-run gpusim validate") from None
    if not isinstance(data, dict) or not isinstance(data.get("points"), list):
        raise UsageError(f"{path}: not a validation.json (expected an object with a list of 'points')")


def add_gpu_commands(sub) -> None:
    """The ``triton-source``, ``calibrate`` and ``validate`` subcommands."""
    t = sub.add_parser("triton-source", help="print the Triton code generated for a built-in kernel",
                       description="Print the Triton source gpusim generates from a built-in kernel's IR, one "
                                   "block per launch with its grid. Needs no GPU. A kernel that breaks a Triton "
                                   "tile rule (e.g. a dot dimension below 16) is refused with the rule.")
    t.add_argument("kernel", help="built-in kernel name (see `gpusim kernels`), e.g. attention_flash")
    t.add_argument("--set", action="append", metavar="PARAM=VALUE",
                   help="kernel parameter (YAML value), e.g. head_dim=128 or causal=true; repeatable")
    t.set_defaults(fn=_cmd_triton_source)
    c = sub.add_parser("calibrate", help="measure a real GPU with microbenchmarks and write a config",
                       description="Run microbenchmarks on a CUDA GPU. With --out: every stage (HBM, L2, latency, "
                                   "tensor tiles, SIMT, launch, overlap, CTA dispatch) and a measured config YAML "
                                   "(raw numbers beside it as .json). With --ops: only the DSL microbenchmarks "
                                   "(launch, overlap, SIMT ops, ...) written as one JSON.")
    c.add_argument("--base", default="h200",
                   help="config (name or YAML path) whose unmeasured fields are kept and whose clock_hz is "
                        "used when the driver reports none (default h200)")
    what = c.add_mutually_exclusive_group(required=True)
    what.add_argument("--out", help="path of the config YAML to write (the raw numbers go beside it as .json)")
    what.add_argument("--ops", metavar="OUT.json", help="run only the DSL op microbenchmarks and write their "
                                                        "numbers to this JSON file")
    c.add_argument("--ops-stages", type=_ops_stages, metavar="LIST",
                   help="with --ops: comma-separated stages out of launch, overlap, ctas, segments, simt_ops "
                        "(default launch,overlap,simt_ops)")
    c.add_argument("--quick", action="store_true", help="with --out: fewer sizes, shapes and repetitions")
    c.set_defaults(fn=_cmd_calibrate)
    v = sub.add_parser("validate", help="run a scenario both simulated and on the GPU",
                       description="Run every point of a scenario on a CUDA GPU (checked against float64, timed, "
                                   "DRAM bytes from ncu) and in the simulator, and write validation.json, "
                                   "validation.csv, summary.md/json and plots. --reanalyze redoes the report of a "
                                   "saved run on a CPU, re-predicting every point when --gpu is given.")
    v.add_argument("scenario", nargs="?", help="scenario YAML file (examples in scenarios/)")
    v.add_argument("--gpu", help="GPU config (name or YAML path) the simulator predicts with (default "
                                 "h200; with --reanalyze: re-predict every point on it)")
    v.add_argument("--out", help="output directory (required with SCENARIO; with --reanalyze default DIR)")
    v.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a scenario field (dotted path, YAML value); repeatable")
    v.add_argument("--no-ncu", action="store_true", help="skip DRAM counters from ncu")
    v.add_argument("--ncu-max", type=_ncu_count, metavar="N",
                   help="profile at most N points with ncu, evenly spaced (default GPUSIM_NCU_MAX or 24)")
    v.add_argument("--reference", action="store_true", help="also time PyTorch eager and SDPA attention")
    v.add_argument("--jobs", type=positive_int, default=None,
                   help="simulator worker processes (default: all cores but one or two; 1 predicts in this "
                        "process)")
    v.add_argument("--reanalyze", metavar="DIR",
                   help="recompute the report of DIR/validation.json or .json.gz (a saved run) instead of measuring")
    v.add_argument("--ncu-points", metavar="FILE",
                   help="internal, what ncu profiles: run each point listed in FILE (or inline JSON) once")
    v.set_defaults(fn=_cmd_validate)
