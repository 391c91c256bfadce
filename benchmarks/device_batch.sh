#!/usr/bin/env bash
# Validate a list of scenarios, each within its own wall-clock budget, on the GPU machine; run from the
# repository root. No scenario can starve the others: each gets exactly the seconds given for it.
#
# usage: benchmarks/device_batch.sh [--no-ncu] [--reference] [--gpu CONFIG] [--set KEY=VALUE]...
#                                   SCENARIO.yaml:SECONDS [SCENARIO.yaml:SECONDS ...]
#   SCENARIO.yaml:SECONDS  validate SCENARIO within SECONDS of wall-clock time: points stop being
#                          started 20 s before its end (recorded as skipped), ncu (if on) fits in what
#                          is left, and the process is killed at SECONDS
#   --no-ncu               no DRAM counters from ncu (saves its time)
#   --reference            also time PyTorch eager / SDPA-flash attention
#   --gpu CONFIG           GPU config to predict with (default configs/h200.yaml)
#   --set K=V              passed to every `gpusim validate`
# Writes to $OUT (default ./device_out): device_batch.log (the console log) and val_batch.tar.gz (every
# val_<scenario>/ directory), packed also when interrupted. Wheels in .whl/ are installed to /tmp/site
# and put first on PYTHONPATH, as benchmarks/device_run.sh does.
set -uo pipefail

OUT=${OUT:-$PWD/device_out}
mkdir -p "$OUT"
LOG="$OUT/device_batch.log"

main() {
GPU=configs/h200.yaml
VAL_FLAGS=()
JOBS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --no-ncu) VAL_FLAGS+=("--no-ncu") ;;
        --reference) VAL_FLAGS+=("--reference") ;;
        --gpu) GPU="$2"; shift ;;
        --set) VAL_FLAGS+=("--set" "$2"); shift ;;
        -h|--help) sed -n '2,16p' "$0"; return 0 ;;
        *:*) JOBS+=("$1") ;;
        *) echo "device_batch.sh: argument '$1': expected SCENARIO.yaml:SECONDS (or an option, see --help)"; return 2 ;;
    esac
    shift
done
if [ ${#JOBS[@]} -eq 0 ]; then
    echo "device_batch.sh: no SCENARIO.yaml:SECONDS given (see --help)"; return 2
fi
for job in "${JOBS[@]}"; do
    sc=${job%:*}; secs=${job##*:}
    if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -lt 20 ]; then
        echo "device_batch.sh: '$job': SECONDS must be an integer >= 20"; return 2
    fi
    [ -f "$sc" ] || { echo "device_batch.sh: '$job': scenario file $sc not found"; return 2; }
done

T0=$(date +%s)
WORK=$(mktemp -d /tmp/gpusim_device_batch.XXXXXX)
stamp() { echo "=== [$(date +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }

PACKED=0
pack() {
    [ "$PACKED" = 1 ] && return
    PACKED=1
    local dirs=()
    for d in "$WORK"/val_*; do [ -d "$d" ] && dirs+=("$(basename "$d")"); done
    if [ ${#dirs[@]} -eq 0 ]; then
        stamp "no validation output to pack"
    else
        tar -czf "$OUT/val_batch.tar.gz" -C "$WORK" "${dirs[@]}" && stamp "packed ${dirs[*]} into $OUT/val_batch.tar.gz"
    fi
    ls -la "$OUT"
}
trap pack EXIT
trap 'stamp "interrupted"; exit 130' INT TERM

stamp "gpusim device batch: ${JOBS[*]} (OUT=$OUT, gpu $GPU, flags: ${VAL_FLAGS[*]+${VAL_FLAGS[*]}})"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || stamp "WARNING: wheel install failed"
    export PYTHONPATH=/tmp/site:$PWD
else
    stamp "no .whl/ here: using the installed packages"
    export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv \
    || stamp "WARNING: nvidia-smi failed"
python3 -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)' \
    || stamp "WARNING: environment check failed"

for job in "${JOBS[@]}"; do
    sc=${job%:*}; secs=${job##*:}
    name=$(basename "$sc"); name=${name%.yaml}; name=${name%.yml}; name=$(echo "$name" | tr -c 'A-Za-z0-9._\n-' '_')
    stamp "validate $sc with $GPU -> val_$name (${secs}s)"
    GPUSIM_DEADLINE=$(( $(date +%s) + secs - 20 )) \
        timeout --kill-after=5 "$secs" python3 -m gpusim validate "$sc" --gpu "$GPU" --out "$WORK/val_$name" \
        ${VAL_FLAGS[@]+"${VAL_FLAGS[@]}"}
    stamp "validate $sc exit code $?"
done
pack
stamp "done"
}

main "$@" 2>&1 | tee -a "$LOG"
exit "${PIPESTATUS[0]}"
