#!/usr/bin/env bash
# 2026-12-02 s7 probe (issue 17), one device call:
# 1. compute-sanitizer racecheck on the default block-FP8 kernel with the per-warp stage release (as built) and with a
#    per-thread release (tools/probe_release.py rewrites two lines of the rendered source), and on the TMA-scale form
#    with the per-thread release: do the hazards s6/s7-first found go away when every reading thread arrives?
# 2. tools/probe_release.py bench: per-warp vs per-thread release vs torch, alternating rounds, at the three shapes;
# 3. ncu (no clock control): WarpStateStats and a few counters for the default (TMA store) and the direct-epilogue form
#    at 2048x7168x4096 (the direct one measured 0.63-0.73 of torch against 0.99), and the tensor pipe of BM = 192 with
#    TMA-loaded scales at 4096x7168x16384.
# Usage (device machine, repository root): OUT=$OUT BUDGET=330 bash tools/gpu_s7-probe.sh  (NO_BENCH=1, NO_NCU=1: skip 2, 3)
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-330}
. tools/gpu_common.sh
gpu_begin s7
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
# warm the kernel cache first (the racecheck runs compile nothing then)
t 120 python3 tools/probe_release.py case warp 256 384 256 > "$OUT/warm.log" 2>&1
t 120 python3 tools/probe_release.py case thread tmasf 256 384 256 >> "$OUT/warm.log" 2>&1
t 120 python3 tools/probe_release.py case thread 256 384 256 >> "$OUT/warm.log" 2>&1
cat "$OUT/warm.log"
for v in "warp" "thread" "thread tmasf" "warp tmasf"; do
  ( t 150 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 99 python3 tools/probe_release.py case $v 1500 3000 400 \
      > "$OUT/racecheck_${v// /_}.log" 2>&1; echo "exit $?" >> "$OUT/racecheck_${v// /_}.log" ) &
done
wait
for f in "$OUT"/racecheck_*.log; do echo "== $f"; grep -E "SUMMARY|passed|exit|Error" "$f" | head -8; done
[ "${NO_BENCH:-0}" = 1 ] || t 90 python3 tools/probe_release.py bench 4096x7168x16384 8192x8192x8192 2048x7168x4096 --rounds 8 > "$OUT/release_bench.log" 2>&1
echo "bench exit $?" >> "$OUT/release_bench.log"; cat "$OUT/release_bench.log"
[ "${NO_NCU:-0}" = 1 ] && exit 0
for v in n192-s4-tma n192-s5-direct; do
  echo "=== $v 2048x7168x4096" >> "$OUT/ncu_direct.log"
  t 70 "$NCU" --clock-control none --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --metrics sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors_op_write.sum,dram__bytes_write.sum,smsp__inst_executed_op_global_st.sum \
    -k regex:ptxgen --launch-skip 3 --launch-count 1 \
    python3 tools/bench_blockfp8.py 2048x7168x4096 --rounds 1 --variants "$v" >> "$OUT/ncu_direct.log" 2>&1
  echo "ncu exit $?" >> "$OUT/ncu_direct.log"
done
for v in m192-n128-s4-tma-tmasf n192-s4-tma; do
  echo "=== $v 4096x7168x16384" >> "$OUT/ncu_tensor.log"
  t 60 "$NCU" --clock-control none --metrics sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second \
    -k regex:ptxgen --launch-skip 3 --launch-count 1 \
    python3 tools/bench_blockfp8.py 4096x7168x16384 --rounds 1 --variants "$v" >> "$OUT/ncu_tensor.log" 2>&1
  echo "ncu exit $?" >> "$OUT/ncu_tensor.log"
done
grep -vE "^==PROF==" "$OUT/ncu_tensor.log" | grep -E "===|sm__|gpu__|exit" | head -20
grep -vE "^==PROF==" "$OUT/ncu_direct.log" | grep -E "===|Stall|stall|Duration|Throughput|Warp Cycles|sm__|lts__|dram__|smsp__|exit|Issued" | head -80
