#!/bin/bash
# Experiments (run from run72.sh with OUT set): the K-grouped row-wise FP8 long-group case over every variant, the same
# product dense, and e4m3 few waves at N 640-1024 (run 2 of runs/2026-12-07-h100-e4m3-narrow-n: no tile reached cuBLAS)
# with stream-K over 128 x 128 and 128 x 160.
L=$OUT/x; mkdir -p $L; T0=$(date +%s)
left() { echo $(( ${DEADLINE:-400} - ($(date +%s) - T0) )); }
step() { local name=$1 t=$2; shift 2; local l; l=$(left); [ "$l" -lt 15 ] && { echo "$name skipped" | tee -a $L/summary.txt; return; }; [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" | tee -a $L/summary.txt; }
export PTXGEN_CACHE_DIR=/tmp/pc72
MID=6000x768x4096,4000x896x6144,7000x640x3072,5000x1024x4096
W="--dtype e4m3 --a kmajor-sw128 --b kmajor-sw128 --a-order k --b-order k --bk 128 --acc f32 --out-dtype bf16 --schedule persistent --iters 20 --json"
step auto 60 sh -c "python3 -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes $MID > $L/auto.json"
for sk in 1 2 3; do
  step c128sk$sk 50 sh -c "python3 -m ptxgen bench $W --bm 128 --bn 128 --stages 6 --epilogue tma --stream-k $sk --shapes $MID > $L/c128sk$sk.json"
done
for sk in 1 2; do
  step c160sk$sk 50 sh -c "python3 -m ptxgen bench $W --bm 128 --bn 160 --stages 5 --epilogue direct --raster-group 16 --stream-k $sk --shapes $MID > $L/c160sk$sk.json"
done
step kfp8 150 python3 tools/bench_grouped.py --cases fk-8x7168x2048/65536 --variants all --rounds 6 --json $L/kfp8_long.jsonl
step dense 60 python3 -m ptxgen bench --dtype e4m3 --iters 20 --shapes 7168x2048x8192
python3 - <<PY
import json
rows = {}
for f in ("auto", "c128sk1", "c128sk2", "c128sk3", "c160sk1", "c160sk2"):
    try: d = json.load(open("$L/%s.json" % f))
    except Exception as e: print(f, "unreadable", e); continue
    for s in d["shapes"]: rows.setdefault((s["m"], s["n"], s["k"]), {})[f] = (round(s.get("ratio") or 0, 3), s.get("checked_ok"))
for k, v in rows.items(): print(k, v)
PY
grep -E "ratio|variant|fk-" $L/kfp8.log | tail -14 | cut -c1-200; tail -4 $L/dense.log | cut -c1-200
tar czf $OUT/x.tgz -C $OUT x
