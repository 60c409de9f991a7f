#!/usr/bin/env bash
# Issue 17 part 1, why any fused chain costs ~5% (runs/2026-12-01-fused-bias-gelu/run2): ncu on the plain, alpha-only and
# bias+gelu kernels at 4096^3 (one launch each after warm-up; clocks not locked), then the stall table per SASS line.
# Logs to $OUT: ncu_details.log, ncu_source.csv.gz, ncu_raw.log, exp_twin.log, exp_twin.jsonl
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_CACHE_DIR=/tmp/ptxgen-cache-s3fused
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 240 "$NCU" --clock-control none --profile-from-start off --section SpeedOfLight --section WarpStateStats \
  --section SchedulerStats --section LaunchStats --section SourceCounters --section InstructionStats -f -o /tmp/s3f_prof \
  python3 tools/exp_fused.py 4096x4096x4096 --ncu --variants plain,alpha,fused > "$OUT/ncu_raw.log" 2>&1
echo "ncu rc=$?"; tail -5 "$OUT/ncu_raw.log"
timeout 60 "$NCU" -i /tmp/s3f_prof.ncu-rep --page details > "$OUT/ncu_details.log" 2>&1
timeout 60 "$NCU" -i /tmp/s3f_prof.ncu-rep --page source --csv --print-source sass 2>&1 | gzip > "$OUT/ncu_source.csv.gz"
ls -la "$OUT"
grep -E "ptxgen_|Duration|SM Frequency|Compute \(SM\) Throughput|Stall|Issued Ipc|No Eligible|Warp Cycles Per Issued" "$OUT/ncu_details.log" | head -120
# the control: the plain kernel twice (two modules) next to alpha-only and bias+gelu, same method as run 2
timeout 120 python3 tools/exp_fused.py 8192x8192x8192 4096x4096x4096 --rounds 20 --variants plain,plain_twin,alpha,fused \
  --json "$OUT/exp_twin.jsonl" > "$OUT/exp_twin.log" 2>&1
echo "exp twin rc=$?"; cat "$OUT/exp_twin.log"
