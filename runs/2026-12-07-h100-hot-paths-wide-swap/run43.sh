#!/bin/bash
# compact: the hot paths on the GPU (attention's and the author layer's: tests, host us), swapped 192-row tiles
export PYTHONUNBUFFERED=1
L=/tmp/x43_$$; mkdir -p $L; T0=$(date +%s)
left() { echo $(( ${DEADLINE:-240} - ($(date +%s) - T0) )); }
step() {  # NAME SECONDS CMD...
  local name=$1 t=$2; shift 2
  local l; l=$(left); [ "$l" -lt 15 ] && { echo "$name skipped (no time)" >> $L/summary.txt; return; }
  [ "$t" -gt "$l" ] && t=$l
  local s=$(date +%s); timeout $t "$@" > $L/$name.log 2>&1; echo "$name exit $? ($(( $(date +%s) - s )) s)" >> $L/summary.txt
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total,driver_version --format=csv > $L/env.txt 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> $L/env.txt 2>&1
echo "tree ${TREE:-?}" >> $L/env.txt
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || step build_ext 90 python3 setup.py -q build_ext --inplace
export PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc43
step pytest 90 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_tailzero.py tests/test_author.py tests/test_attention_gpu.py -k "launched_key or prepared_launch or out_and_scale or bshd or graph or torch_op or tail or example"
step hostcall 30 python3 .exp/hostcall2.py
step swap192 100 env SHAPES=2 python3 .exp/swap192_time.py
step actgrad 40 python3 -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_actgrad.py
tar czf $OUT/logs.tgz -C $L .
cat $L/summary.txt; cat $L/env.txt; tail -n 8 $L/pytest.log; cat $L/hostcall.log | tail -6
grep -E "TIME|FAILED|err" $L/swap192.log | head -20; tail -n 4 $L/actgrad.log
