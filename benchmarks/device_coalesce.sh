#!/usr/bin/env bash
# The L2 request-coalescing microbenchmarks (benchmarks/micro_fidelity.py coalesce, or SECTION=coalescek) on a machine with an
# NVIDIA GPU, run from the repository root: timed, then under ncu (each config launched once) for the L2
# sectors read against the bytes the SMs received, then again with the L2 request coalescer's (lrc__)
# counters this ncu knows. Writes to $OUT (default ./device_out): micro_$SECTION.json, ncu_$SECTION.csv,
# ncu_${SECTION}_lrc.csv (and their .err) and metrics_lrc.txt. Wheels in .whl/ go to /tmp/site first.
set -uo pipefail
SECTION=${SECTION:-coalesce}     # the micro_fidelity.py section: coalesce (lags) or coalescek (sharers)
OUT=${OUT:-$PWD/device_out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
"$NCU" --query-metrics > /tmp/allm.txt 2>&1
grep -iE "^(lrc|lts__t_(sectors|requests)_srcunit|l1tex__m_xbar2l1tex)" /tmp/allm.txt > "$OUT/metrics_lrc.txt"
timeout 200 python3 benchmarks/micro_fidelity.py "$OUT/micro_${SECTION}.json" "$SECTION" 2>&1 | tail -n 20
BASE=gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,l1tex__m_xbar2l1tex_read_bytes.sum,lts__t_bytes.sum
MICRO_ONCE=1 timeout 150 "$NCU" --clock-control none --metrics "$BASE" --csv --print-units base \
    python3 benchmarks/micro_fidelity.py /tmp/x.json "$SECTION" > "$OUT/ncu_${SECTION}.csv" 2> "$OUT/ncu_${SECTION}.err"
echo "ncu rc $?"
LRC=$(awk '/^lrc__/{print $1}' /tmp/allm.txt | grep -E "sectors|requests" | head -n 12 | sed 's/$/.sum/' | paste -sd, -)
if [ -n "$LRC" ]; then
    MICRO_ONCE=1 timeout 150 "$NCU" --clock-control none --metrics "$BASE,$LRC" --csv --print-units base \
        python3 benchmarks/micro_fidelity.py /tmp/y.json "$SECTION" > "$OUT/ncu_${SECTION}_lrc.csv" 2> "$OUT/ncu_${SECTION}_lrc.err"
    echo "ncu with lrc counters rc $?"
fi
