#!/usr/bin/env bash
# Calibrate the GPU of this machine and validate scenarios against it; run from the repository root
# on the GPU machine. Everything that must come back is written to $OUT, in at most 8 top-level files:
#   $OUT/device_run.log           the whole console log (nvidia-smi, calibration table, validation tables)
#   $OUT/<config>.yaml / .json    the measured GPU config and its raw measurements (when calibrating)
#   $OUT/val_<scenario>.tar.gz    one tarball per validated scenario (up to 5; with more, one val_all.tar.gz)
#
# usage: benchmarks/device_run.sh [--quick] [--no-calibrate] [--gpu CONFIG] [--budget SECONDS]
#                                 [--no-ncu] [--reference] [--set KEY=VALUE]... [SCENARIO.yaml ...]
#   --quick         calibrate with the quick plan (~1-2 min instead of ~3-5)
#   --no-calibrate  skip calibration; validate with --gpu CONFIG (default configs/h200.yaml, else h200)
#   --gpu CONFIG    config used for validation when not calibrating in this run
#   --budget S      wall-clock budget of the whole script (default 570 s): steps get what is left, and
#                   validation stops starting points 20 s before the end so the tarballs are always written
#   --set K=V       passed to every `gpusim validate` (e.g. --set sweep.seq_len=[1024,2048])
# environment: OUT (default ./device_out), GPUSIM_NCU_MAX (ncu points per scenario, default 24)
set -uo pipefail

OUT=${OUT:-$PWD/device_out}
mkdir -p "$OUT"
LOG="$OUT/device_run.log"

main() {
QUICK=""
CALIBRATE=1
GPU=""
BUDGET=570
VAL_FLAGS=()
SCENARIOS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK="--quick" ;;
        --no-calibrate) CALIBRATE=0 ;;
        --gpu) GPU="$2"; shift ;;
        --budget) BUDGET="$2"; shift ;;
        --no-ncu) VAL_FLAGS+=("--no-ncu") ;;
        --reference) VAL_FLAGS+=("--reference") ;;
        --set) VAL_FLAGS+=("--set" "$2"); shift ;;
        -h|--help) sed -n '2,19p' "$0"; return 0 ;;
        *) SCENARIOS+=("$1") ;;
    esac
    shift
done

T0=$(date +%s)
END=$((T0 + BUDGET))
WORK=$(mktemp -d /tmp/gpusim_device_run.XXXXXX)
stamp() { echo "=== [$(date +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( END - $(date +%s) )); }

PACKED=0
pack() {
    [ "$PACKED" = 1 ] && return
    PACKED=1
    local dirs=()
    for d in "$WORK"/val_*; do [ -d "$d" ] && dirs+=("$(basename "$d")"); done
    if [ ${#dirs[@]} -eq 0 ]; then
        stamp "no validation output to pack"
    elif [ ${#dirs[@]} -le 5 ]; then
        for d in "${dirs[@]}"; do tar -czf "$OUT/$d.tar.gz" -C "$WORK" "$d" && stamp "packed $OUT/$d.tar.gz"; done
    else
        tar -czf "$OUT/val_all.tar.gz" -C "$WORK" "${dirs[@]}" && stamp "packed $OUT/val_all.tar.gz"
    fi
    stamp "files in \$OUT:"; ls -la "$OUT"
}
trap pack EXIT
trap 'stamp "interrupted"; exit 130' INT TERM
N_SC=${#SCENARIOS[@]}

stamp "gpusim device run: budget ${BUDGET}s, OUT=$OUT, scenarios: ${SCENARIOS[*]+${SCENARIOS[*]}}"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || stamp "WARNING: wheel install failed"
    export PYTHONPATH=/tmp/site:$PWD
else
    stamp "no .whl/ here: using the installed packages"
    export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
nvidia-smi || stamp "WARNING: nvidia-smi failed"
python3 -c 'import sys, torch, triton, simpy, pydantic; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "simpy", simpy.__version__, "pydantic", pydantic.__version__, "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)' \
    || stamp "WARNING: environment check failed"
command -v ncu >/dev/null && stamp "ncu: $(command -v ncu)" || stamp "ncu not on PATH: DRAM counters will be skipped"

if [ "$CALIBRATE" = 1 ]; then
    CFG="$OUT/h200-measured.yaml"
    stamp "calibrate $QUICK -> $CFG ($(left)s left)"
    limit=$(( $(left) - 25 )); [ "$limit" -lt 30 ] && limit=30
    GPUSIM_DEADLINE=$((END - 60 - 60 * N_SC)) \
        timeout --kill-after=10 "$limit" python3 -m gpusim calibrate --base h200 --out "$CFG" $QUICK
    rc=$?
    stamp "calibrate exit code $rc"
    if [ -f "$CFG" ]; then GPU="$CFG"; else stamp "WARNING: no measured config written"; fi
fi
if [ -z "$GPU" ]; then
    if [ -f configs/h200.yaml ]; then GPU=configs/h200.yaml; else GPU=h200; fi
fi

i=0
for sc in ${SCENARIOS[@]+"${SCENARIOS[@]}"}; do
    i=$((i + 1))
    name=$(basename "$sc"); name=${name%.yaml}; name=${name%.yml}; name=$(echo "$name" | tr -c 'A-Za-z0-9._\n-' '_')
    remaining=$(left)
    if [ "$remaining" -lt 45 ]; then
        stamp "skipping $sc: only ${remaining}s left"
        continue
    fi
    # later scenarios get a share of what is left
    share=$(( (remaining - 25) / (N_SC - i + 1) ))
    stamp "validate $sc with $GPU -> $WORK/val_$name (${share}s of ${remaining}s)"
    GPUSIM_DEADLINE=$(( $(date +%s) + share - 20 )) \
        timeout --kill-after=10 "$share" python3 -m gpusim validate "$sc" --gpu "$GPU" --out "$WORK/val_$name" \
        ${VAL_FLAGS[@]+"${VAL_FLAGS[@]}"}
    stamp "validate $sc exit code $?"
done
pack
stamp "done"
}

main "$@" 2>&1 | tee -a "$LOG"
exit "${PIPESTATUS[0]}"
