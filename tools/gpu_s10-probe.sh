#!/usr/bin/env bash
# s10 (issue 17): (1) the review's re-plumbed prepared launch of fp8blocks.gemm (ptxgen.api.fp8launch on
# launchplan.build_params) on the GPU: its gpu tests and the block-FP8 tests that go through it; (2) does TMA multicast
# lower the energy per call at 4096x7168x16384 (tools/power_probe.py): the 128 x 192 kernels and their per-tensor twins
# with and without 2-CTA clusters, beside tma_scales_spec with raster groups 8 and 16.
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s10-probe.sh
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-330}
. tools/gpu_common.sh
gpu_begin s10probe
PTXGEN_ARTIFACTS=$OUT gpu_pytest pytest_prepared_gpu.log ${T_API:-120} $XDIST tests/test_blockfp8_prepared.py tests/test_epilogue_ops.py tests/test_blockfp8_streamk.py \
  -k "${K_EXPR:-prepared or single_round or gemm_without_a_spec or (stream_k and tmasf)}"
VARIANTS=${VARIANTS:-m192-n128-s4-tma-tmasf,m192-n128-s4-tma-tmasf-g16,n192-s4-tma,n192-s4-tma-c2x1,n192-s4-tma-c1x2,plain-n192-s4-tma,plain-n192-s4-tma-c1x2}
t 200 python3 tools/power_probe.py ${SHAPE:-4096x7168x16384} --variants "$VARIANTS" --seconds ${SECS:-3} --json "$OUT/power_probe.jsonl" \
  --smi-log "$OUT/smi.csv" > "$OUT/power_probe.log" 2>&1
echo "exit $?" >> "$OUT/power_probe.log"
cat "$OUT/power_probe.log"; gzip -f "$OUT/smi.csv"
echo "== 2026-12-02-blockfp8-tile-model done: $SECONDS s"
