"""Build the tidy table of every point recorded on a GPU: data/points.csv.gz (the ``gpu`` column names
the config the point is predicted with, ``device`` the GPU it ran on).

Rows of the calibration recorder (``benchmarks/record_points.py``), kept as
``data/<gpu>/recorded/*.jsonl.gz``, one row per point: scenario file, set (``train`` or
``heldout``), parameters, measured time, check. Rows of ``gpusim validate``: from every
``data/h200/**/validation.json.gz`` (the recorded scenarios
``val_*``, the held-out ``heldout/val_*`` and the microbenchmarks ``micro/val_*``), with the
prediction stored when the scenario was last re-baselined (``validation.csv.gz`` beside it) and
where that prediction came from (``data/h200/provenance.json``: round, commit, model, resources view;
derived once from git history when the records left docs/validation/h200: the commit that added
each validation.json, the last one that rewrote its validation.csv, and that commit's message).

usage: python benchmarks/build_points_table.py [--root data/h200] [--out data/points.csv.gz]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim.hw.validate.rows import load_rows, load_validation, rows_from_json, validation_file  # noqa: E402

COLUMNS = ["scenario", "set", "round", "point", "kernel", "params", "dtype", "num_warps", "num_stages", "group",
           "gpu", "device", "measured_us", "measured_spread_pct", "timing_method", "triton", "torch", "cuda",
           "recorded_at", "status", "check", "max_rel_err", "tolerance", "recorded_predicted_us",
           "recorded_sim_seconds", "stored_predicted_us", "stored_error_pct", "stored_prediction_view", "stored_prediction_model",
           "stored_prediction_commit", "stored_prediction_date"]
TIMING = "triton.testing.do_bench median (warmup 25 ms, rep 100 ms), median over seeds"


def _set_of(name: str) -> str:
    return name.split("/")[0] if "/" in name else "recorded"


def _stored(d: Path) -> dict:
    """Point index -> the prediction stored at the last re-baseline (validation.csv.gz)."""
    f = d / "validation.csv.gz"
    if not f.is_file():
        return {}
    return {int(r["point"]): r.get("predicted_us") for r in load_rows(f) if r.get("scope") == "point"}


def scenario_rows(d: Path, name: str, prov: dict) -> list:
    data = load_validation(d)
    env = data.get("environment") or {}
    by_index = {p["index"]: p for p in data["points"]}
    stored = _stored(d)
    out = []
    for r in rows_from_json(d):
        if r.get("scope") != "point":
            continue
        i = int(r["point"])
        p = by_index[i]
        params = p["params"]
        sp = stored.get(i)
        meas = r.get("measured_us")
        out.append({
            "scenario": name, "set": _set_of(name), "round": prov.get("round"), "point": i,
            "kernel": p["kernel"], "params": json.dumps(params, sort_keys=True), "dtype": params.get("dtype"),
            "num_warps": params.get("num_warps"), "num_stages": params.get("num_stages"), "group": p.get("group"),
            "gpu": data.get("gpu"), "device": env.get("device"), "measured_us": meas,
            "measured_spread_pct": r.get("measured_spread_pct"), "timing_method": TIMING,
            "triton": env.get("triton"), "torch": env.get("torch"), "cuda": env.get("cuda"),
            "recorded_at": data.get("started"), "status": p.get("status"), "check": p.get("check"),
            "max_rel_err": p.get("max_rel_err"), "tolerance": p.get("tolerance"),
            "recorded_predicted_us": (p.get("predicted") or {}).get("total_us"),
            "recorded_sim_seconds": (p.get("predicted") or {}).get("sim_seconds"), "stored_predicted_us": sp,
            "stored_error_pct": (100.0 * (sp - meas) / meas) if sp and meas else None,
            **{k: prov.get(k) for k in ("stored_prediction_view", "stored_prediction_model",
                                        "stored_prediction_commit", "stored_prediction_date")}})
    return out


def build(root: Path) -> pd.DataFrame:
    prov = json.loads((root / "provenance.json").read_text())
    rows = []
    for f in sorted(root.glob("**/validation.json*")):
        if validation_file(f.parent) != f:
            continue
        name = f.parent.relative_to(root).as_posix()
        rows += scenario_rows(f.parent, name, prov.get(name, {}))
    df = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("round", "num_warps", "num_stages"):
        df[c] = df[c].astype("Int64")
    return df


GPU_OF_DEVICE = (("H200", "h200"), ("H100", "h100"), ("A100", "a100"))


STOPPED = "preparing workers stopped"    # record_points.py's timing method since the workers stop while it times


def recorder_rows(data: Path) -> list:
    """Rows of every ``data/<gpu>/recorded/*.jsonl.gz`` (benchmarks/record_points.py's output). A point
    recorded more than once on one GPU is one row: the mean of its times, their spread (max - min, in
    % of the mean) in ``measured_spread_pct``. Where some of its recordings were timed with the
    recorder's workers stopped (``STOPPED`` in the timing method) and some not, only those count: a
    worker compiling the next point delayed the launches of short multi-launch kernels (round 46's
    GEMVs: 4 of 30 measured at 1.6-7x their time with the workers stopped)."""
    import gzip

    out, seen = [], {}
    for f in sorted(data.glob("*/recorded/*.jsonl.gz")):
        with gzip.open(f, "rt") as fh:
            for line in fh:
                r = json.loads(line)
                p = r["params"]
                gpu = next((g for k, g in GPU_OF_DEVICE if k in r["device"]), f.parent.parent.name)
                rnd = r["scenario"].rsplit("round", 1)[-1].split(".")[0] if "round" in r["scenario"] else \
                    r["scenario"].rsplit("_r", 1)[-1].split("_")[0]
                out.append({"scenario": r["scenario"], "set": r["set"], "round": int(rnd) if rnd.isdigit() else None,
                            "point": r["point"], "kernel": r["kernel"], "params": json.dumps(p, sort_keys=True),
                            "dtype": p.get("dtype"), "num_warps": p.get("num_warps"), "num_stages": p.get("num_stages"),
                            "gpu": gpu, "device": r["device"], "measured_us": r.get("measured_us"),
                            "timing_method": r["timing_method"], "triton": r["triton"], "torch": r["torch"],
                            "cuda": r["cuda"], "recorded_at": r["recorded_at"], "status": r["status"],
                            "check": r.get("check"), "max_rel_err": r.get("max_rel_err"), "tolerance": r.get("tolerance")})
                key = (r["scenario"], r["point"], gpu)
                if key in seen:
                    seen[key].append(out.pop())
                else:
                    seen[key] = [out[-1]]
    for key, rows in seen.items():
        stopped = [x for x in rows if STOPPED in x["timing_method"]]
        if stopped and len(stopped) < len(rows):    # timed with the workers stopped: the others go
            row = rows[0]
            row.update({k: v for k, v in stopped[0].items() if k not in ("scenario", "set", "round", "point")})
            rows = seen[key] = [row] + stopped[1:]
        times = [x["measured_us"] for x in rows if x["status"] == "ok" and x["measured_us"]]
        if len(rows) > 1 and len(times) == len(rows):
            mean = sum(times) / len(times)
            rows[0]["measured_us"] = mean
            rows[0]["measured_spread_pct"] = 100.0 * (max(times) - min(times)) / mean
        elif len(rows) > 1:
            rows[0].update(status="mixed", measured_us=None)    # recorded more than once, not ok every time
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(ROOT / "data" / "h200"))
    ap.add_argument("--out", default=str(ROOT / "data" / "points.csv.gz"))
    args = ap.parse_args(argv)
    df = build(Path(args.root))
    extra = recorder_rows(ROOT / "data")
    if extra:
        df = pd.concat([df, pd.DataFrame(extra, columns=COLUMNS)], ignore_index=True)
        for c in ("round", "num_warps", "num_stages"):
            df[c] = df[c].astype("Int64")
    df.to_csv(args.out, index=False, compression={"method": "gzip", "mtime": 0}, float_format="%.6g")
    print(f"wrote {args.out}: {len(df)} points ({', '.join(f'{k} {v}' for k, v in df['set'].value_counts().items())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
