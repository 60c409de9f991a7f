#!/usr/bin/env bash
# s8 (issue 17): the block-FP8 consumer loop's forms (tools/probe_loop.py) against torch's blockwise call, then ncu's
# tensor-pipe activity of each at 4096x7168x16384 (one launch, no clock control).
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s8-loop.sh
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-400}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
FORMS=${FORMS:-nonuni,uni,uniu,uniu2,uniu4,plain-nonuni,plain-uni}
NCU_FORMS=${NCU_FORMS:-nonuni uni uniu2 uniu4}
. tools/gpu_common.sh
gpu_begin s8loop
t 260 python3 tools/probe_loop.py bench $SHAPES --rounds 8 --forms "$FORMS" > "$OUT/probe_loop.log" 2>&1
echo "exit $?" >> "$OUT/probe_loop.log"; cat "$OUT/probe_loop.log"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
MET=sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum
for f in $NCU_FORMS; do
  echo "=== $f 4096x7168x16384" >> "$OUT/ncu_loop.log"
  t 40 "$NCU" --clock-control none --metrics "$MET" -k regex:ptxgen --launch-skip 3 --launch-count 1 \
    python3 tools/probe_loop.py once 4096x7168x16384 "$f" >> "$OUT/ncu_loop.log" 2>&1
  echo "ncu exit $?" >> "$OUT/ncu_loop.log"
done
grep -vE "^==PROF==" "$OUT/ncu_loop.log" | grep -E "===|sm__|gpu__|smsp__|exit"
echo "== s8-loop done: $SECONDS s"
