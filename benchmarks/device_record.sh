#!/usr/bin/env bash
# On the GPU machine, from the repository root: record points (benchmarks/record_points.py) while
# the other cores simulate the same points with this checkout (benchmarks/sim_points.py), each
# within its budget. The GPU's own config predicts (h200 when the device is an H200, else h100).
#
# usage: benchmarks/device_record.sh RECORD_SECONDS SIM_SECONDS [--skip-measured F] [--skip-sim F] SCENARIO.yaml ...
# Writes $OUT/measured.jsonl, $OUT/compile.jsonl, $OUT/sim.jsonl and the logs. Wheels in .whl/ (simpy,
# pydantic) are installed to /tmp/site first. SIM_SECONDS 0: no simulation there (every core but one
# prepares points for the recorder; simulate them later where the predictions are made), and numba
# need not be carried.
set -uo pipefail
OUT=${OUT:-$PWD/device_out}; mkdir -p "$OUT"
RB=$1; SB=$2; shift 2
SKIPM=(); SKIPS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --skip-measured) SKIPM=(--skip "$2"); shift 2 ;;
        --skip-sim) SKIPS=(--skip "$2"); shift 2 ;;
        *) break ;;
    esac
done
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD
fi
# recording alone simulates nothing: where numba (the L2 model's compiler, whose llvmlite is too large to
# carry beside the tree) is missing, an njit that returns the function lets the package import
if [ "$SB" = 0 ] && ! python3 -c "import numba" 2>/dev/null; then
    mkdir -p /tmp/site/numba
    printf 'def njit(*a, **k):\n    return a[0] if a and callable(a[0]) else (lambda f: f)\n' > /tmp/site/numba/__init__.py
    export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in *H200*) GPU=h200 ;; *) GPU=h100 ;; esac
NCPU=$(nproc); JOBS=$(( NCPU > 8 ? NCPU - 6 : 2 ))
SIM=""; WORKERS=$(( NCPU - 1 ))
if [ "$SB" != 0 ]; then
    (cd benchmarks && python3 sim_points.py --gpu "$GPU" --out "$OUT/sim.jsonl" --jobs "$JOBS" --budget-s "$SB" \
        "${SKIPS[@]}" "${@/#/../}") > "$OUT/sim.log" 2>&1 &
    SIM=$!; WORKERS=4
fi
python3 benchmarks/record_points.py --out "$OUT" --budget-s "$RB" --jobs "$WORKERS" "${SKIPM[@]}" "$@" 2>&1 | tee "$OUT/record.log"
if [ -n "$SIM" ]; then wait $SIM; tail -3 "$OUT/sim.log"; fi
wc -l "$OUT"/*.jsonl
