#!/usr/bin/env bash
# 2026-12-02 s6 probe (issue 17), one device call:
# 1. block-FP8 stream-K, built at L1/L2 in s5 and never run: its gpu tests and the bench (tools/gpu_s5-bfsk.sh) with the
#    per-tensor kernel of the same tile as a reference row, nvidia-smi sampling clocks and power meanwhile;
# 2. ncu counters (no clock control) on one launch at 4096x7168x16384 of the block kernel, its per-tensor twin and the
#    --fp8-stagger complete form: how busy the tensor pipe is, at what SM clock, how busy shared memory is.
# Usage (device machine, repository root): OUT=$OUT BUDGET=420 bash tools/gpu_s6-probe.sh
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-420}
. tools/gpu_common.sh
gpu_begin s6
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms 250 > "$OUT/smi.csv" 2>&1 &
SMI=$!
OUT=$OUT ROUNDS=${ROUNDS:-6} T_TEST=${T_TEST:-120} T_BENCH=${T_BENCH:-140} \
  VARIANTS=${VARIANTS:-n192-s4-tma,n192-s4-tma-sk4,n192-s4-tma-sk8,plain-n192-s4-tma} bash tools/gpu_s5-bfsk.sh
kill $SMI 2>/dev/null
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
t 40 "$NCU" --query-metrics --chip gh100 > "$OUT/ncu_query.txt" 2>&1
want="sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed sm__inst_executed_pipe_tensor_op_gmma.sum sm__cycles_elapsed.avg.per_second gpu__time_duration.sum sm__throughput.avg.pct_of_peak_sustained_elapsed l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed smsp__inst_executed_pipe_fma.sum smsp__issue_active.avg.pct_of_peak_sustained_active"
metrics=""
for m in $want; do
  grep -qw "${m%%.*}" "$OUT/ncu_query.txt" && metrics="$metrics${metrics:+,}$m"
done
echo "metrics: $metrics" | tee "$OUT/ncu_metrics.log"
for v in ${NCU_VARIANTS:-n192-s4-tma plain-n192-s4-tma n192-s4-tma-complete}; do
  echo "=== $v" >> "$OUT/ncu_metrics.log"
  t 60 "$NCU" --clock-control none --metrics "$metrics" -k regex:ptxgen --launch-skip 3 --launch-count 1 \
    python3 tools/bench_blockfp8.py 4096x7168x16384 --rounds 1 --variants "$v" >> "$OUT/ncu_metrics.log" 2>&1
  echo "ncu exit $?" >> "$OUT/ncu_metrics.log"
done
grep -vE "^==PROF==" "$OUT/ncu_metrics.log" | grep -E "===|metrics:|sm__|l1tex|gpu__|smsp__|exit|Error|error" | head -80
gzip -f "$OUT/ncu_query.txt"
python3 - "$OUT/smi.csv" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r and r[0][:2] == "20"]
clk = [float(r[1].split()[0]) for r in rows if r[1].strip().split()[0].replace('.', '').isdigit()]
pw = [float(r[3].split()[0]) for r in rows if r[3].strip().split()[0].replace('.', '').isdigit()]
busy = [c for c, p in zip(clk, pw) if p > 300]
print(f"smi samples {len(rows)}; under load (>300 W): {len(busy)} samples, SM clock median {statistics.median(busy) if busy else 0:.0f} MHz, "
      f"min {min(busy) if busy else 0:.0f}, power max {max(pw) if pw else 0:.0f} W")
PY
