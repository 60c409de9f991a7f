#!/usr/bin/env bash
# Issue 17 on the H200, one lease: the fused epilogue ops against float64 (tests/test_epilogue_ops.py), the
# compute-sanitizer flagship, and the bench (fused bias+gelu vs plain vs torch eager; FP8 per-row output).
# Logs go to $OUT (at most 7 files: env17.txt, epilogue_ops_pytest.log, sanitizer17.log, bench17.log, two .jsonl,
# block_fp8_promotion.json). Usage: tools/gpu_issue17.sh [tests] [sanitizer] [bench]   (default: all three)
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_ARTIFACTS=$OUT
STEPS=${*:-tests sanitizer bench}
{ date -u +"%Y-%m-%dT%H:%M:%SZ"; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"; git log --oneline -1 2>/dev/null; } > "$OUT/env17.txt" 2>&1
for step in $STEPS; do
  case $step in
    tests)
      XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4")
      timeout 420 python3 -m pytest tests/test_epilogue_ops.py -m gpu -q -rs -p no:cacheprovider $XDIST > "$OUT/epilogue_ops_pytest.log" 2>&1
      tail -15 "$OUT/epilogue_ops_pytest.log" ;;
    sanitizer)
      SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
      for tool in memcheck racecheck synccheck; do
        echo "=== $tool" >> "$OUT/sanitizer17.log"
        timeout 240 "$SAN" --tool $tool --error-exitcode 99 python3 tools/fused_flagship.py >> "$OUT/sanitizer17.log" 2>&1
        rc=$?; echo "=== $tool rc=$rc" >> "$OUT/sanitizer17.log"; echo "$tool rc=$rc"
      done
      grep -a "SUMMARY\|max error" "$OUT/sanitizer17.log" ;;
    bench)
      timeout 300 python3 tools/bench_epilogue.py 8192x8192x8192 4096x4096x4096 --fp8 --rounds 30 --json "$OUT/bench_epilogue.jsonl" >> "$OUT/bench17.log" 2>&1
      timeout 240 python3 tools/bench_blockfp8.py 4096x7168x16384 8192x8192x8192 2048x7168x4096 --rounds 20 --json "$OUT/bench_blockfp8.jsonl" >> "$OUT/bench17.log" 2>&1
      cat "$OUT/bench17.log" ;;
  esac
done
