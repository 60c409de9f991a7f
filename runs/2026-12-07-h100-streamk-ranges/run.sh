#!/bin/bash
# Stream-K in ranges (the working tree, .exp/wt) against the split layout before it (HEAD, .exp/head), H100 or H200:
# 1. the stream-K gpu tests in the new tree; 2. ptxgen bench (no tile flags) on the shapes whose pick is a stream-K
# kernel, each tree in its own process against cuBLAS / torch._scaled_mm, alternating old, new, new, old;
# 3. forced: the small-n kernels with --stream-k 4 against 1 (new tree).
export PYTHONUNBUFFERED=1
L=/tmp/r2; mkdir -p $L $OUT
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $OUT/smi.txt
for t in wt head; do (cd .exp/$t && python3 setup.py -q build_ext --inplace > $L/build_$t.log 2>&1); done
cat .exp/wt/TREE_COMMIT > $OUT/tree.txt
BF=11837x2722x9648,14949x1475x3760,200x1311x2640,5000x5000x5000,3000x7000x5000,1500x9000x3000,2500x10000x4000,838x1309x8000,1009x129x3968,2520x1702x1672
FP=14949x1488x3760,7184x8080x5680,200x1312x2640,5120x5120x5120,5120x5120x5008,3008x7008x5008,1504x9008x3024,2512x10000x4000
bench() {  # TREE NAME DTYPE SHAPES (skipped past 480 s)
  [ $SECONDS -lt 480 ] || { echo "$2 skipped ($SECONDS s)" >> $L/summary.txt; return; }
  (cd .exp/$1 && PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/kc_$1 timeout 150 python3 -m ptxgen bench --dtype $3 --iters 20 --json --shapes $4 > $L/$2.json 2> $L/$2.err; echo "$2 exit $?" >> $L/summary.txt)
}
SECONDS=0
(cd .exp/wt && PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/kc_wt timeout 180 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rs \
  tests/test_streamk.py tests/test_streamk_api.py tests/test_swap_streamk.py tests/test_blockfp8_streamk.py > $L/pytest_sk.log 2>&1; echo "pytest exit $? ($SECONDS s)" >> $L/summary.txt)
tail -3 $L/pytest_sk.log >> $L/summary.txt
bench head old1_bf16 bf16 $BF; bench wt new1_bf16 bf16 $BF; bench wt new1_e4m3 e4m3 $FP; bench head old1_e4m3 e4m3 $FP
echo "benches 1 ($SECONDS s)" >> $L/summary.txt
E8="--bm 128 --bn 128 --bk 128 --a kmajor-sw128 --b kmajor-sw128 --dtype e4m3 --acc f32 --out-dtype bf16 --stages 6 --schedule persistent --epilogue tma"
B16="--bm 128 --bn 128 --bk 64 --a kmajor-sw128 --b kmajor-sw128 --dtype bf16 --acc f32 --out-dtype bf16 --stages 6 --schedule persistent --cluster 2x1 --epilogue direct"
for s in 1 4; do
  [ $SECONDS -lt 500 ] || break
  (cd .exp/wt && PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/kc_wt timeout 90 python3 -m ptxgen bench $E8 --stream-k $s --iters 20 --json --shapes 12000x128x14336,9000x96x12288,16000x128x8192,6000x96x12288 > $L/smalln_e4m3_sk$s.json 2>&1; echo "smalln e4m3 sk$s exit $?" >> $L/summary.txt)
  (cd .exp/wt && PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/kc_wt timeout 90 python3 -m ptxgen bench $B16 --stream-k $s --iters 20 --json --shapes 12000x120x14336,9000x128x12288,6000x96x12288 > $L/smalln_bf16_sk$s.json 2>&1; echo "smalln bf16 sk$s exit $?" >> $L/summary.txt)
done
echo "forced ($SECONDS s)" >> $L/summary.txt
if [ $SECONDS -lt 330 ]; then
  bench wt new2_bf16 bf16 $BF; bench head old2_bf16 bf16 $BF; bench head old2_e4m3 e4m3 $FP; bench wt new2_e4m3 e4m3 $FP
  echo "benches 2 ($SECONDS s)" >> $L/summary.txt
fi
python3 - $L > $L/compare.txt <<'PY'
import json, sys, glob, os, math
L = sys.argv[1]
def load(n):
    try:
        return {(r["m"], r["n"], r["k"]): r for r in json.load(open(f"{L}/{n}.json"))["shapes"]}
    except Exception as e:
        return {}
for dt in ("bf16", "e4m3"):
    runs = {t: [load(f"{t}{i}_{dt}") for i in (1, 2)] for t in ("old", "new")}
    keys = sorted(set().union(*[set(d) for v in runs.values() for d in v]))
    logs = []
    for key in keys:
        r = {t: [d[key]["ratio"] for d in v if key in d] for t, v in runs.items()}
        kn = next((d[key]["kernel"][-34:] for d in runs["new"] if key in d), "")
        if r["old"] and r["new"]:
            o, n = sum(r["old"]) / len(r["old"]), sum(r["new"]) / len(r["new"])
            logs.append(math.log(n / o))
            print(f"{dt} {key[0]}x{key[1]}x{key[2]}: old {o:.3f} new {n:.3f} new/old {n / o:.3f}  {kn}")
    if logs:
        print(f"{dt}: {len(logs)} shapes, geomean new/old {math.exp(sum(logs) / len(logs)):.3f}")
for dt in ("e4m3", "bf16"):
    a, b = load(f"smalln_{dt}_sk1"), load(f"smalln_{dt}_sk4")
    for key in sorted(a):
        if key in b:
            print(f"smalln {dt} {key}: sk1 {a[key]['ratio']:.3f} sk4 {b[key]['ratio']:.3f}  sk4/sk1 {b[key]['ratio'] / a[key]['ratio']:.3f}")
PY
cat $L/summary.txt $L/compare.txt
tar czf $OUT/logs.tgz -C $L .
cp $L/compare.txt $L/summary.txt $OUT/
