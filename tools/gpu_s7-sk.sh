#!/usr/bin/env bash
# 2026-12-02 s7 (issue 17): why is the block-FP8 stream-K kernel slower where its last round does not split (s6: 8-17%
# at 8192^3 and 2048x7168x4096, where it runs whole tiles only, in the default's order)? One call:
# 1. tools/bench_blockfp8.py at those two shapes, default against -sk4, alternating with torch;
# 2. ncu (no clock control) on one launch of each at 8192^3: duration, SM clock, tensor pipe, L2 hit rate, DRAM bytes,
#    registers, grid, active warps.
# Usage (device machine, repository root): OUT=$OUT BUDGET=240 bash tools/gpu_s7-sk.sh
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-240}
. tools/gpu_common.sh
gpu_begin s7
t 110 python3 tools/bench_blockfp8.py 8192x8192x8192 2048x7168x4096 --rounds 8 --variants n192-s4-tma,n192-s4-tma-sk4 \
  --json "$OUT/bench_sk.jsonl" > "$OUT/bench_sk.log" 2>&1; echo "bench exit $?" >> "$OUT/bench_sk.log"; cat "$OUT/bench_sk.log"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex_op_read.sum,smsp__inst_executed.sum
for v in n192-s4-tma n192-s4-tma-sk4; do
  echo "=== $v 8192x8192x8192" >> "$OUT/ncu_sk.log"
  t 60 "$NCU" --clock-control none --metrics "$M" -k regex:ptxgen --launch-skip 3 --launch-count 1 \
    python3 tools/bench_blockfp8.py 8192x8192x8192 --rounds 1 --variants "$v" >> "$OUT/ncu_sk.log" 2>&1
  echo "ncu exit $?" >> "$OUT/ncu_sk.log"
done
grep -vE "^==PROF==" "$OUT/ncu_sk.log" | grep -E "===|sm__|gpu__|lts__|dram__|launch__|smsp__|exit" | head -40
