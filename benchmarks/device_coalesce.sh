python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
NCU=$(which ncu || echo /usr/local/cuda/bin/ncu)
$NCU --query-metrics > /tmp/allm.txt 2>&1; grep -iE "^(lrc|lts__t_(sectors|requests)_srcunit|l1tex__m_xbar2l1tex)" /tmp/allm.txt > $OUT/metrics_lrc.txt; wc -l /tmp/allm.txt $OUT/metrics_lrc.txt
timeout 200 python3 benchmarks/micro_fidelity.py $OUT/micro_coalesce.json coalesce 2>&1 | tail -20
BASE=gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,l1tex__m_xbar2l1tex_read_bytes.sum,lts__t_bytes.sum
MICRO_ONCE=1 timeout 150 $NCU --clock-control none --metrics $BASE --csv --print-units base python3 benchmarks/micro_fidelity.py /tmp/x.json coalesce > $OUT/ncu_coalesce.csv 2>$OUT/ncu_coalesce.err; echo ncu rc $?
LRC=$(awk '/^lrc__/{print $1}' /tmp/allm.txt | grep -E "sectors|requests" | head -12 | sed 's/$/.sum/' | paste -sd, -)
echo "LRC=$LRC"
[ -n "$LRC" ] && MICRO_ONCE=1 timeout 150 $NCU --clock-control none --metrics $BASE,$LRC --csv --print-units base python3 benchmarks/micro_fidelity.py /tmp/y.json coalesce > $OUT/ncu_coalesce_lrc.csv 2>$OUT/ncu_coalesce_lrc.err; echo ncu lrc rc $?
tail -3 $OUT/ncu_coalesce.err $OUT/ncu_coalesce_lrc.err
