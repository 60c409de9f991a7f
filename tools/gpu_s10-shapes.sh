#!/usr/bin/env bash
# s10: block FP8 off the issue's three shapes. DeepSeek-V3's GEMMs (N x K of its projections; M = tokens 64, 128, 512,
# 4096) through tools/bench_blockfp8.py: each tile variant against torch's blockwise _scaled_mm in the same process,
# alternating rounds, outputs checked. Which tile (and stream-K) fits which shape: what fp8blocks.chosen_spec should pick.
# Usage (device machine, repository root): OUT=$OUT bash tools/gpu_s10-shapes.sh
set -u
OUT=${OUT:-out}
BUDGET=${BUDGET:-400}
. tools/gpu_common.sh
gpu_begin s10shapes
MS=${MS:-64 128 512 4096}
NKS=${NKS:-2112x7168 24576x1536 32768x512 7168x16384 4096x7168 7168x2048}
SHAPES=$(for m in $MS; do for nk in $NKS; do printf "%sx%s " "$m" "$nk"; done; done)
VARIANTS=${VARIANTS:-m192-n128-s4-tma-tmasf,m192-n128-s4-tma-tmasf-sk8,n192-s4-tma-tmasf,s5-tma-tmasf,s5-tma-tmasf-sk8,m64-n128-s6-tma-tmasf,m64-n128-s6-tma-tmasf-sk8,m128-n64-s6-tma-tmasf}
t 60 python3 tools/bench_blockfp8.py --compile-only --jobs 12 --variants "$VARIANTS" > "$OUT/compile.log" 2>&1
tail -2 "$OUT/compile.log"
T_BENCH=$(( $(left) - 20 )) ROUNDS=${ROUNDS:-5} bfp8_bench shapes > /dev/null
tail -3 "$OUT/bench_blockfp8_shapes.log"
python3 - "$OUT/bench_blockfp8_shapes.jsonl" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault(r["shape"], {})[r["variant"]] = r["ratio"]
vs = sorted({r["variant"] for r in rows})
print("shape " + " ".join(v.replace("-tma-tmasf", "") for v in vs))
for s, d in by.items():
    print(s, " ".join(f"{d.get(v, float('nan')):.3f}" for v in vs), "best", max(d, key=d.get))
for v in vs:
    xs = [d[v] for d in by.values() if v in d]
    print(v, "geomean", round(math.exp(sum(map(math.log, xs)) / len(xs)), 4), "n", len(xs))
PY
echo "== s10-shapes done: $SECONDS s"
