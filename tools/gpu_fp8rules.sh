#!/bin/bash
# fp8rules (issue 16 item 5): the e4m3 small-m / split-k rule on the H200, explicit-spec variants, the split-K gpu test.
# Launch (no rsync on the host): rm -rf /work/main/.gpu/fp8rules && mkdir -p /work/main/.gpu/fp8rules &&
#   git -C /work/wt/fp8rules ls-files -co --exclude-standard | tar -C /work/wt/fp8rules -cf - -T - | tar -C /work/main/.gpu/fp8rules -xf -
# then run (carry .gpu/fp8rules): cd .gpu/fp8rules && export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 && bash tools/gpu_fp8rules.sh
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
F="--bk 128 --a kmajor-sw128 --b kmajor-sw128 --dtype e4m3 --out-dtype bf16 --acc f32 --arch sm_90a --schedule tile --raster-group 8 --consumers cooperative --epilogue direct --cluster 1x1 --iters 20 --json"
timeout 90 python3 -m pytest -m gpu -q tests/test_splitk.py 2>&1 | tail -15 | tee "$O/pytest_splitk_gpu.log"
timeout 150 python3 -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes 16x7168x16384,64x7168x16384,128x7168x16384,16x4096x4096,128x16384x4096,4096x4096x4096 > "$O/bench_fp8_rule.json" 2> "$O/bench_fp8_rule.err"; echo "rule rc=$?" | tee -a "$O/variants.log"
v() { echo "== $*" >> "$O/variants.jsonl"; timeout 40 python3 -m ptxgen bench $F "$@" >> "$O/variants.jsonl" 2>&1; echo "rc=$?" >> "$O/variants.jsonl"; }
v --bm 64 --bn 128 --stages 8 --split-k 1 --m 16 --n 7168 --k 16384
v --bm 64 --bn 64 --stages 8 --split-k 2 --m 16 --n 7168 --k 16384
v --bm 64 --bn 128 --stages 6 --split-k 2 --m 128 --n 7168 --k 16384
v --bm 64 --bn 64 --stages 8 --split-k 2 --m 16 --n 4096 --k 4096
v --bm 64 --bn 128 --stages 8 --split-k 1 --m 64 --n 16384 --k 4096
tail -3 "$O/variants.jsonl"
