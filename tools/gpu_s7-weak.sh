#!/usr/bin/env bash
# 2026-12-02 s7: the two bf16 shapes under 0.96 of cuBLAS in tools/gpu_s7-shapes.sh (2048x7168x4096, 4000^3): the
# chooser's pick against a few alternatives with tile flags, `ptxgen bench --iters 20` each (its own alternating rounds
# against cuBLAS). Data for the cost model, nothing chosen from it here. Usage: OUT=$OUT bash tools/gpu_s7-weak.sh
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-200}
. tools/gpu_common.sh
gpu_begin s7
COMMON="--dtype bf16 --a kmajor-sw128 --b kmajor-sw128 --bk 64 --out-dtype bf16 --iters 20 --json"
i=0
while read -r name flags; do
  i=$((i + 1))
  t 40 python3 -m ptxgen bench $COMMON --shapes 2048x7168x4096,4000x4000x4000 $flags > "$OUT/w$i.json" 2> "$OUT/w$i.err"
  bench_summary "$OUT/w$i.json" "$name" | tee -a "$OUT/weak.log"
done <<'V'
p128x256 --bm 128 --bn 256 --stages 4 --schedule persistent --epilogue tma
p128x256-c2x1 --bm 128 --bn 256 --stages 4 --schedule persistent --epilogue tma --cluster 2x1
p128x192-g16 --bm 128 --bn 192 --stages 4 --schedule persistent --epilogue tma --raster-group 16
p128x192-c2x1 --bm 128 --bn 192 --stages 4 --schedule persistent --epilogue tma --cluster 2x1
p256x128 --bm 256 --bn 128 --stages 4 --schedule persistent --epilogue tma
pp128x128 --bm 128 --bn 128 --stages 6 --schedule persistent --consumers pingpong --epilogue tma
p128x256-sk2 --bm 128 --bn 256 --stages 4 --schedule persistent --epilogue tma --stream-k 2
p128x256-sk4 --bm 128 --bn 256 --stages 4 --schedule persistent --epilogue tma --stream-k 4
V
cd "$OUT" && tar czf weak.tgz w*.json w*.err && rm -f w*.json w*.err
