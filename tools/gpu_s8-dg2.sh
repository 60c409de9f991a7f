#!/usr/bin/env bash
# s8's second look at DeepGEMM on the H200 (issue 17), one command. Needs .gpu/s8-dgref/{dg-headers.tar.gz,prebuilt}
# carried (tools/ref/gpu_deepgemm.sh's inputs).
# 1. tools/ref/bench_deepgemm.py with 25 ms batches: DeepGEMM's configurations plus 128x192 without a cluster, against
#    ours: the default, with a 2x1 cluster (B multicast), with A scales by TMA, and with raster groups of 16;
# 2. ncu (no clock control) on one launch each at 4096x7168x16384: DeepGEMM 128x192 c1x1 and c2x1, ours default.
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s8-dg2.sh
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-420}
SHAPES=${SHAPES:-4096x7168x16384 8192x8192x8192 2048x7168x4096}
OURS=${OURS:-n192-s4-tma,n192-s4-tma-c2x1,n192-s4-tma-tmasf,n192-s4-tma-g16}
. tools/gpu_common.sh
gpu_begin s8dg2
DG=/tmp/dgref
mkdir -p "$DG" && tar xzf .gpu/s8-dgref/dg-headers.tar.gz -C "$DG" && cat "$DG/VERSIONS" >> "$OUT/env.txt"
B="--dg-include $DG/deepgemm/include --cutlass-include $DG/cutlass/include --build-dir .gpu/s8-dgref/prebuilt --jobs 16"
t 220 python3 tools/ref/bench_deepgemm.py $SHAPES --rounds 8 --passes 1 --batch-ms 25 --extra 128x192-c1x1 --ours "$OURS" $B \
  --json "$OUT/bench_deepgemm.jsonl" --smi "$OUT/smi.csv" > "$OUT/bench_deepgemm.log" 2>&1
echo "bench exit $?" >> "$OUT/bench_deepgemm.log"; cat "$OUT/bench_deepgemm.log"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
MET=sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,lts__t_sectors_op_read.sum,smsp__inst_executed.sum
for sel in dg-128x192-c1x1-s4 dg-128x192-c2x1-s4 ours; do
  echo "=== $sel 4096x7168x16384" >> "$OUT/ncu.log"
  if [ "$sel" = ours ]; then filt=regex:ptxgen; args="--only none --ours n192-s4-tma"; else filt=regex:sm90_fp8; args="--only $sel --no-ours"; fi
  t 60 "$NCU" --clock-control none --section WarpStateStats --metrics "$MET" -k "$filt" --launch-skip 3 --launch-count 1 \
    python3 tools/ref/bench_deepgemm.py 4096x7168x16384 --rounds 1 --batch-ms 1 --extra 128x192-c1x1 $args $B >> "$OUT/ncu.log" 2>&1
  echo "ncu exit $?" >> "$OUT/ncu.log"
done
grep -vE "^==PROF==" "$OUT/ncu.log" | grep -E "===|sm__|gpu__|dram__|lts__|smsp__|Stall|Warp Cycles|exit" | head -60
gzip -f "$OUT/smi.csv" 2>/dev/null
echo "== s8-dg2 done: $SECONDS s"
