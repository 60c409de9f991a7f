#!/usr/bin/env bash
# s9 (issue 17): energy per GEMM at 4096x7168x16384 (tools/power_probe.py): torch's blockwise and per-tensor calls and
# our block-FP8 kernels, each back to back for a few seconds with nvidia-smi sampling clock and power, then alone after
# idle. Tests whether the back-to-back runs are power-capped (then a kernel's speed there is its energy per call).
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s9-power.sh
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-300}
SHAPE=${SHAPE:-4096x7168x16384}
VARIANTS=${VARIANTS:-m192-n128-s4-tma-tmasf,m192-n128-s4-tma-tmasf-sk3,m256-n128-s3-tma-tmasf-cs2,n192-s4-tma,plain-n192-s4-tma}
. tools/gpu_common.sh
gpu_begin s9power
t 240 python3 tools/power_probe.py "$SHAPE" --variants "$VARIANTS" --seconds ${SECS:-4} --json "$OUT/power_probe.jsonl" \
  --smi-log "$OUT/smi.csv" > "$OUT/power_probe.log" 2>&1
echo "exit $?" >> "$OUT/power_probe.log"
cat "$OUT/power_probe.log"; gzip -f "$OUT/smi.csv"
echo "== s9-power done: $SECONDS s"
