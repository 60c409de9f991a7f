#!/bin/bash
# the authoring layer's gpu tests by name; the e4m3 form of the held-out 30; ncu on K-grouped FP8 (ours, torch) and bf16
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc60
mkdir -p $OUT/l; T0=$(date +%s); L=$OUT/l
left() { echo $(( ${DEADLINE:-560} - ($(date +%s) - T0) )); }
step() { local name=$1 t=$2; shift 2; local l; l=$(left); [ "$l" -lt 15 ] && { echo "$name skipped" | tee -a $L/summary.txt; return; }; [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" | tee -a $L/summary.txt; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv | tee $L/smi.txt
git rev-parse HEAD > $L/tree.txt; git status --short >> $L/tree.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
step author 150 python3 -m pytest -m gpu -n 4 -v -rA -p no:cacheprovider tests/test_author.py tests/test_authoring_doc.py tests/test_author_fa3_pieces.py
step e4m3held 90 sh -c "python3 -m ptxgen bench --dtype e4m3 --iters 20 --json --shapes $(python3 tools/heldout_shapes.py --set 30 --e4m3) > $L/heldout30_e4m3.json"
for v in tma-n256 tma torch; do
  step ncu_$v 90 $NCU --profile-from-start off --set full --import-source yes -o $L/kg_$v python3 .exp/kg_ncu.py $v
done
step ncu_bf16 90 $NCU --profile-from-start off --set full -o $L/kg_bf16 python3 .exp/kg_ncu.py tma-n256 bf16
for r in $L/kg_*.ncu-rep; do b=${r%.ncu-rep}; $NCU --import $r --page details > $b.details.txt 2>&1; $NCU --import $r --page source --csv --print-source sass 2>/dev/null | gzip > $b.sass.csv.gz; done
tar czf $OUT/logs.tgz -C $OUT l; cat $L/summary.txt
grep -E "passed|failed" $L/author.log | tail -2
python3 -c "
import json; d=json.load(open('$L/heldout30_e4m3.json')); rs=[s['ratio'] for s in d['shapes'] if s.get('ratio')]
print('e4m3 held-out', len(rs), 'geomean', round(d['geomean_ratio'],3), 'min', round(min(rs),3))
for s in d['shapes']:
  if s.get('ratio') and s['ratio']<0.97: print(s['m'],s['n'],s['k'],round(s['ratio'],3),s['kernel'][:90])"
for b in $L/kg_*.details.txt; do echo "== $b"; grep -E "^  [a-zA-Z_]|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Registers Per|Achieved Occ|Issue Slots Busy|No Eligible" $b | head -14; done
