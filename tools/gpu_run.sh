#!/usr/bin/env bash
# Everything that needs the GPU, in named steps, for one device call:
#   OUT=dir [BUDGET=570] tools/gpu_run.sh STEP...      e.g. tools/gpu_run.sh tests selftest bench-gemm bench-fused
#   tools/gpu_run.sh --list                            the steps, one line each
#   DRY_RUN=1 tools/gpu_run.sh STEP...                 print each command instead of running it (no GPU needed)
# Steps run in the order given; each command has a timeout and the whole call keeps to $BUDGET seconds (a command that
# would not fit is skipped and says so). The logs are written under /tmp, then packed into two files under $OUT (a device
# call brings back at most 8): $OUT/gpu_run.tgz (every log and JSON report) and $OUT/summary.txt (each command's exit
# status and the last lines of its log). Exit status: 0 when every command exited 0, 1 otherwise, 2 for an unknown step.
set -u
cd "$(dirname "$0")/.."

STEPS_HELP="\
tests           the whole gpu tier: python -m pytest -m gpu -n 8 tests/
selftest        python -m ptxgen selftest: the ordered ladder on the GPU present
chosen          the kernels the chooser picks (tests/test_gpu.py chosen_jobs) against float64
probe           python -m ptxgen probe: which bytes wgmma reads, where TMA writes
validate        tools/gpu_validate.py: the validation jobs in one batch that survives hangs
sanitizer       compute-sanitizer memcheck, racecheck and synccheck on tools/fused_flagship.py and tools/grouped_flagship.py
bench-gemm      ptxgen bench with no tile flags: the tuned six (bf16), unaligned and few-wave shapes, small M, e4m3 classes, 20 held-out shapes
bench-api       ptxgen bench --api (host time per call against torch) and tools/host_breakdown.py
bench-fused     tools/bench_epilogue.py: the fused bias+gelu chain (FP8 output too) against the plain kernel
bench-blockfp8  tools/bench_blockfp8.py and tools/bench_blockfp8_api.py (both recipes): block FP8 against torch's blockwise _scaled_mm
bench-grouped   tools/bench_grouped.py (M-grouped, and the K-grouped doors' 16-bit and row-wise FP8 cases), tools/bench_grouped_blockfp8.py and tools/bench_batched.py against torch
bench-stores    tools/bench_mstore.py and tools/bench_f32store.py: the TMA-store epilogues against the direct stores
power           tools/power_probe.py: clocks, power and energy per call of the block-FP8 kernels back to back
doors           ptxgen bench --api --op OP for every door (fused, gemm, batched, grouped, scaled_grouped, bfp8) at three shapes
attention       tools/bench_attention.py (SDPA flash and cuDNN) and compute-sanitizer memcheck (its tests: step tests)
training        tools/bench_training.py: an MLP and a MoE training step against torch eager and torch.compile; tools/profile_training.py: where their steps' time goes
distributed     torchrun --standalone over the visible GPUs: tests/distributed_train.py (DDP, FSDP2, torch.compile)
calibrate       ptxgen tune --calibrate into the logs (calibration.json), then the 30 held-out shapes under it (bf16; e4m3 with N rounded up to 16)
referee         tests/test_torch_referee.py alone: PyTorch's own cases through ptxgen's equivalents, summary in referee.gw*.json
accumulation    tools/accumulation_model.py --probe: which way the tf32 and bf16 kernels' f32 accumulator rounds
fp8-training    the FP8 training forms of 2026-12-08: the gpu tests of the float8 expert bank and scaled_grouped_gemm's autograd (tests/test_training_gpu.py -k 'scaled_grouped or float8') and of the K-grouped 1D1D kernel with its sanitizers (tests/test_kgrouped_1d1d.py), tools/bench_grouped.py --kgrouped-1d1d (against torch's blockwise recipe a group at a time), tools/bench_training.py --model moe --ablate (ptxgen-fp8 and ptxgen-fp8-bwd beside the bf16 banks)
few-wave        issue 35's e4m3 few-wave class: the wide ping-pong tiles against float64 (tests/test_gpu.py), cuBLAS's kernels on the gap shapes (tools/cublas_kernels.py), every candidate timed there (tools/exp_candidates_run.py)"

usage() { echo "usage: OUT=dir [BUDGET=seconds] [DRY_RUN=1] tools/gpu_run.sh STEP... | --list | --help"; echo; echo "$STEPS_HELP"; }
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --list) echo "$STEPS_HELP"; exit 0 ;;
  "") usage >&2; exit 2 ;;
esac
known=$(echo "$STEPS_HELP" | awk '{print $1}')
for s in "$@"; do
  echo "$known" | grep -qx -- "$s" || { echo "gpu_run.sh: unknown step '$s' (tools/gpu_run.sh --list)" >&2; exit 2; }
done

OUT=${OUT:-out}
BUDGET=${BUDGET:-570}
DRY=${DRY_RUN:-}
if [ -n "$DRY" ]; then
  LOGS=${LOGS:-/tmp/gpu_run.logs}  # named in the printed commands only; nothing is written
else
  LOGS=${LOGS:-$(mktemp -d /tmp/gpu_run.XXXXXX)}
  mkdir -p "$OUT" "$LOGS"
fi
. tools/gpu_common.sh
export LOGS PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PTXGEN_ARTIFACTS=$LOGS PTXGEN_CACHE_DIR=${PTXGEN_CACHE_DIR:-/tmp/ptxgen-gpu-run-cache}
FAILED=0

# run LOG SECONDS CMD...: CMD (bounded by SECONDS and the budget) into $LOGS/LOG, its exit status in summary.txt
run() {
  local log=$1 secs=$2; shift 2
  if [ -n "$DRY" ]; then echo "[$STEP] timeout $secs $* > $log"; return 0; fi
  t "$secs" "$@" > "$LOGS/$log" 2>&1
  local rc=$?
  echo "exit $rc" >> "$LOGS/$log"
  [ "$rc" = 0 ] || FAILED=1
  { echo "== $STEP: $log exit $rc ($SECONDS s)"; tail -n "${TAIL:-8}" "$LOGS/$log" | cut -c1-240; } | tee -a "$LOGS/summary.txt"
}
pack() {
  [ -n "$DRY" ] && return 0
  cp "$LOGS/summary.txt" "$OUT/summary.txt" 2>/dev/null
  tar czf "$OUT/gpu_run.tgz" -C "$LOGS" .
}

TUNED=4096x4096x4096,8192x8192x8192,16384x16384x4096,2048x2048x8192,8192x8192x1024,4096x4096x16384
UNALIGNED=5000x5000x5000,3000x7000x5000,1500x9000x3000,4096x4096x5000,333x8192x8192,12000x1000x6000,2500x10000x4000
SMALLM=$(for m in 1 16 64 128; do for nk in 4096x4096 7168x16384 16384x4096; do printf '%sx%s,' $m $nk; done; done)
SMALLM=${SMALLM%,}
FP8=5120x5120x5120,4096x4096x5008,5120x5120x5008,3008x7008x5008,1504x9008x3024,16x4096x4096,64x7168x16384,128x16384x4096,336x8192x8192,12000x1008x6000,2512x10000x4000,8192x8192x8192,4096x4096x4096
BFP8_SHAPES="4096x7168x16384 8192x8192x8192 2048x7168x4096"
BFP8_VARIANTS=${BFP8_VARIANTS:-m192-n128-s4-tma-tmasf,n192-s4-tma,plain-n192-s4-tma}
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

step_tests() {  # the referee's cases are in the tier: their summary per worker in referee.gw*.json
  run pytest_gpu.log "${T_GPU:-300}" env PTXGEN_REFEREE_JSON="$LOGS/referee.json" python3 -m pytest -m gpu -n 8 -q -rs \
    -p no:cacheprovider tests/
}
step_selftest() { run selftest.log 200 python3 -m ptxgen selftest --json "$LOGS/selftest.json"; }
step_chosen() { run chosen.log 200 python3 -c "
import os, sys
sys.path.insert(0, 'tests')
from pathlib import Path
from test_gpu import chosen_jobs
from ptxgen.runtime.check.batch import run_batch
results = run_batch(chosen_jobs('sm_90a'), Path(os.environ['LOGS']) / 'chosen.jsonl', timeout_s=90)
bad = [r for r in results if not r['passed']]
print(f'chosen kernels: {len(results) - len(bad)} of {len(results)} pass')
sys.exit(1 if bad else 0)"; }
step_probe() { run probe.log 300 python3 -m ptxgen probe --json "$LOGS/probe.json"; }
step_validate() { run validate.log 420 python3 tools/gpu_validate.py "$LOGS/validate.jsonl" --timeout 60; }
step_sanitizer() {
  local tool f
  for f in fused_flagship grouped_flagship; do
    for tool in memcheck racecheck synccheck; do
      run "sanitizer_${f}_$tool.log" 120 "$SAN" --tool $tool --error-exitcode 99 python3 "tools/$f.py"
    done
  done
}
bench() {  # NAME DTYPE SHAPES: ptxgen bench with no tile flags, JSON report
  run "bench_$1.log" 100 sh -c 'python3 -m ptxgen bench --dtype "$1" --iters 20 --json --shapes "$2" > "$0"' \
    "$LOGS/bench_$1.json" "$2" "$3"
}
step_bench_gemm() {
  bench tuned bf16 "$TUNED"
  bench unaligned bf16 "$UNALIGNED"
  bench smallm bf16 "$SMALLM"
  bench e4m3 e4m3 "$FP8"
  local held
  held=$(python3 tools/heldout_shapes.py)
  bench heldout bf16 "$held"
}
step_bench_api() {
  run bench_api.log 60 sh -c 'python3 -m ptxgen bench --api --json --shapes "$1" > "$0"' "$LOGS/bench_api.json" \
    4096x4096x4096,2048x2048x8192,1024x8192x8192,8192x8192x8192
  run host_breakdown.log 40 python3 tools/host_breakdown.py 1024x8192x8192
}
step_bench_fused() {
  run bench_epilogue.log 110 python3 tools/bench_epilogue.py 8192x8192x8192 4096x4096x4096 --fp8 --rounds 20 \
    --json "$LOGS/bench_epilogue.jsonl"
}
step_bench_blockfp8() {
  run bench_blockfp8.log 120 python3 tools/bench_blockfp8.py $BFP8_SHAPES --rounds 8 --variants "$BFP8_VARIANTS" \
    --json "$LOGS/bench_blockfp8.jsonl"
  run bench_blockfp8_api.log 60 python3 tools/bench_blockfp8_api.py $BFP8_SHAPES 64x7168x16384 128x4096x7168 32x4096x7168 \
    --rounds 10 --json "$LOGS/bench_blockfp8_api.jsonl"
  run bench_blockfp8_1d1d.log 90 python3 tools/bench_blockfp8.py $BFP8_SHAPES --rounds 6 \
    --variants m192-s4-tma-1d1d-cpasync,n192-s4-tma-1d1d-cpasync,n192-s4-tma-1d1d-cpasync-sk4,s4-tma-1d1d-cpasync-sk8 \
    --json "$LOGS/bench_blockfp8_1d1d.jsonl"
  run bench_blockfp8_columns.log 60 python3 tools/bench_blockfp8_api.py --columns $BFP8_SHAPES 64x7168x16384 \
    128x7168x16384 64x4096x7168 128x2048x7168 --rounds 10 --json "$LOGS/bench_blockfp8_columns.jsonl"
}
step_bench_grouped() {
  run bench_grouped.log 110 python3 tools/bench_grouped.py --json "$LOGS/bench_grouped.jsonl"
  run bench_kgrouped.log 90 python3 tools/bench_grouped.py --rounds 6 --json "$LOGS/bench_kgrouped.jsonl" \
    --cases k-8x4096x14336/8192,k-128x2048x1536/32768,fk-8x4096x14336/8192,fk-128x2048x1536/32768,fk-8x7168x2048/65536
  run bench_grouped_blockfp8.log 90 python3 tools/bench_grouped_blockfp8.py --json "$LOGS/bench_grouped_blockfp8.jsonl"
  run bench_batched.log 40 python3 tools/bench_batched.py --json "$LOGS/bench_batched.json"
}
step_bench_stores() {
  run bench_mstore.log 70 python3 tools/bench_mstore.py run
  run bench_f32store.log 110 python3 tools/bench_f32store.py --json "$LOGS/bench_f32store.jsonl"
}
step_power() {
  run power_probe.log 100 python3 tools/power_probe.py 4096x7168x16384 \
    --variants m192-n128-s4-tma-tmasf,m192-n128-s4-tma-tmasf-nopromo,plain-m192-n128-s4-tma --seconds 3 \
    --json "$LOGS/power_probe.jsonl" --smi-log "$LOGS/smi.csv"
}
step_doors() {
  local op shapes
  for op in fused:3000x5000x7000,2048x11008x4096,1024x4096x4096 grouped:8192x4096x4096,4096x7168x2048,2048x2048x1024 \
            scaled_grouped:8192x4096x4096,4096x7168x2048,2048x2048x1024 bfp8:2048x7168x4096,128x4096x7168,4096x4096x4096 \
            gemm:3000x5000x7000,2048x11008x4096,1024x4096x4096 batched:1024x1024x1024,512x4096x4096,2048x2048x512; do
    shapes=${op#*:}; op=${op%%:*}
    run "doors_$op.log" 120 sh -c 'python3 -m ptxgen bench --api --op "$1" --shapes "$2" --iters 10 --json > "$0"' \
      "$LOGS/doors_$op.json" "$op" "$shapes"
  done
}
step_attention() {  # its gpu tests are in the tier (step tests)
  run bench_attention.log 150 python3 tools/bench_attention.py --seqlens 512,2048,8192,16384 --repeats 5 \
    --json "$LOGS/bench_attention.json"
  run attention_memcheck.log 60 "$SAN" --tool memcheck python3 -c "
import torch
from ptxgen.attention.launch import attention
q, k, v = (torch.randn(1, 2, 300, 128, device='cuda', dtype=torch.bfloat16) for _ in range(3))
attention(q, k, v, causal=True); attention(q, k[:, :1], v[:, :1]); torch.cuda.synchronize(); print('done')"
}
step_training() {  # its gpu tests are in the tier (step tests)
  run bench_training.log 200 python3 tools/bench_training.py --model mlp,moe --tokens 8192 --rounds 10 \
    --json "$LOGS/bench_training.jsonl"
  run profile_training.log 150 python3 tools/profile_training.py --model mlp,moe --tokens 8192 --out "$LOGS/profile_training"
}
step_distributed() {
  local n
  n=$(nvidia-smi -L 2>/dev/null | wc -l)
  run distributed.log 200 torchrun --standalone --nproc_per_node="${n:-1}" tests/distributed_train.py
}
step_calibrate() {
  run calibrate.log 330 python3 -m ptxgen tune --calibrate --budget-s "${CAL_S:-300}" --out "$LOGS/calibration.json"
  local held
  held=$(python3 tools/heldout_shapes.py --set 30)
  bench heldout30 bf16 "$held"
  bench heldout30_e4m3 e4m3 "$(python3 tools/heldout_shapes.py --set 30 --e4m3)"
}
step_referee() {
  run referee.log 400 env PTXGEN_REFEREE_JSON="$LOGS/referee.json" python3 -m pytest tests/test_torch_referee.py -n 8 -q \
    -p no:cacheprovider -rs
}

GAPS="e4m3:5753x800x4224 e4m3:6000x768x4096 e4m3:5000x1024x4096 e4m3:12453x128x14800 e4m3:200x1312x2640 \
bf16:3000x7000x5000 bf16:1500x9000x3000 bf16:2500x10000x4000 bf16:838x1309x8000"  # issue 35's lowest ratios on the H100
step_few_wave() {
  run wide_pingpong.log 150 python3 -m pytest -m gpu tests/test_gpu.py -k wide_pingpong -q \
    -p no:cacheprovider
  run cublas_kernels.log 60 python3 tools/cublas_kernels.py $GAPS --json "$LOGS/cublas_kernels.jsonl"
  run candidates_few_wave.log 200 python3 tools/exp_candidates_run.py --out "$LOGS/candidates" --budget-s 190 \
    --only e4m3:6000x768,e4m3:4000x896,e4m3:7000x640,e4m3:5000x1024
}
step_fp8_training() {
  run fp8_training_tests.log 150 python3 -m pytest -m gpu tests/test_training_gpu.py -k "scaled_grouped or float8" -q \
    -p no:cacheprovider
  run kgrouped_1d1d_tests.log 300 python3 -m pytest -m gpu tests/test_kgrouped_1d1d.py -q -p no:cacheprovider
  run bench_kgrouped_1d1d.log 120 python3 tools/bench_grouped.py --kgrouped-1d1d --rounds 10 \
    --json "$LOGS/bench_kgrouped_1d1d.jsonl"
  run bench_fp8_moe.log 200 python3 tools/bench_training.py --model moe --tokens 8192 --rounds 10 --ablate \
    --json "$LOGS/bench_fp8_moe.jsonl"
}
step_accumulation() { run accumulation.log 120 env PYTHONPATH="$PWD" python3 tools/accumulation_model.py --probe; }

if [ -z "$DRY" ]; then
  trap pack EXIT
  env_header "$LOGS/env.txt"
  # the compiled launcher, built with this machine's python3 (the ctypes path runs where this fails)
  STEP=setup run build_ext.log 120 python3 setup.py -q build_ext --inplace
fi
for STEP in "$@"; do
  "step_${STEP//-/_}"
done
[ -n "$DRY" ] || echo "== gpu_run.sh $*: done in $SECONDS s, logs in $OUT/gpu_run.tgz" | tee -a "$LOGS/summary.txt"
exit $FAILED
