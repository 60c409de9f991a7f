#!/usr/bin/env bash
# Rebuild every checked-in kernel under generated/ (then `ptxgen check` keeps them honest).
set -euo pipefail
cd "$(dirname "$0")/.."
PTXGEN=${PTXGEN:-ptxgen}
rm -rf generated
while read -r flags; do
  [ -z "$flags" ] && continue
  $PTXGEN build $flags --out generated >/dev/null
done <<'LIST'
--bm 128 --bn 128 --bk 32 --a kmajor-sw64
--bm 128 --bn 128 --bk 32 --a kmajor-sw64 --loader cp.async
--bm 128 --bn 256 --bk 64 --a kmajor-sw128 --b kmajor-sw128 --dtype bf16 --stages 4
--bm 128 --bn 128 --bk 128 --a kmajor-sw128 --b mnmajor-sw64 --dtype e4m3
--bm 64 --bn 128 --bk 32 --a kmajor-sw128 --b mnmajor-sw128b32 --dtype tf32
--bm 128 --bn 256 --bk 64 --a kmajor-sw128 --b kmajor-sw128 --dtype bf16 --arch sm_90a --stages 4 --out-dtype bf16
--bm 128 --bn 128 --bk 64 --a kmajor-sw128 --b mnmajor-sw128 --arch sm_90a
--bm 128 --bn 128 --bk 64 --a kmajor-sw64 --b mnmajor-sw32 --arch sm_90a --stages 3 --smem-offset 384
--bm 128 --bn 128 --bk 64 --a kmajor-sw64 --b mnmajor-sw32 --arch sm_90a --stages 3 --smem-offset 384 --loader cp.async
--bm 64 --bn 64 --bk 64 --a mnmajor-sw32 --b kmajor-none --arch sm_90a --stages 3
--bm 128 --bn 256 --bk 64 --a kmajor-sw128 --b kmajor-sw128 --dtype bf16 --arch sm_90a --stages 4 --out-dtype bf16 --schedule persistent --raster-group 16
--bm 128 --bn 128 --bk 64 --a kmajor-sw128 --b kmajor-sw128 --dtype bf16 --arch sm_90a --stages 5 --out-dtype bf16 --schedule persistent --consumers pingpong
--bm 128 --bn 256 --bk 64 --a kmajor-sw128 --b kmajor-sw128 --dtype bf16 --stages 4 --out-dtype bf16 --schedule persistent --raster-group 16
--bm 128 --bn 192 --bk 64 --a kmajor-sw128 --b kmajor-sw128 --dtype bf16 --arch sm_90a --stages 4 --out-dtype bf16 --schedule persistent --raster-group 16 --epilogue tma
--bm 128 --bn 128 --bk 64 --a kmajor-sw128 --b kmajor-sw128 --dtype bf16 --arch sm_90a --stages 5 --out-dtype bf16 --schedule persistent --raster-group 16 --consumers pingpong --epilogue tma
--bm 128 --bn 256 --bk 64 --a kmajor-sw128 --b kmajor-sw128 --dtype bf16 --stages 3 --out-dtype bf16 --schedule persistent --raster-group 16 --epilogue tma
LIST
ls generated
