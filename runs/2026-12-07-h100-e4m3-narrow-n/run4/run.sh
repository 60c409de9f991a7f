#!/bin/bash
# e4m3 small-n kernel with stream-K where its tiles leave SMs idle (one partial round, long K): non-held-out shapes
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc64
mkdir -p $OUT/l; L=$OUT/l
nvidia-smi --query-gpu=name --format=csv,noheader > $L/smi.txt
SH=6000x96x12288,10000x128x16384,15000x112x12288,9008x128x8192,7000x128x8192,11000x96x16384
W="--dtype e4m3 --a kmajor-sw128 --b kmajor-sw128 --a-order k --b-order k --bk 128 --acc f32 --out-dtype bf16 --arch sm_90a --schedule persistent --epilogue tma --bm 128 --bn 128 --stages 6 --iters 20 --json"
for s in 1 2 3 4; do timeout 80 sh -c "python3 -m ptxgen bench $W --stream-k $s --shapes $SH > $L/sk$s.json" 2> $L/sk$s.err; echo "sk$s exit $?"; done
timeout 60 sh -c "python3 -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes $SH > $L/auto.json"
tar czf $OUT/logs.tgz -C $OUT l
python3 - <<PY
import json
rows = {}
for f in ("sk1", "sk2", "sk3", "sk4", "auto"):
    try: d = json.load(open("$L/%s.json" % f))
    except Exception as e: print(f, "unreadable", e); continue
    for s in d["shapes"]: rows.setdefault((s["m"], s["n"], s["k"]), {})[f] = (round(s.get("ratio") or 0, 3), s.get("checked_ok"))
for k, v in rows.items(): print(k, v)
PY
