#!/bin/sh
# CPU host time of ptxgen.gemm's hot call with the driver's entry points stubbed (README.md); run from the repository
# root with the compiled launcher built in place (python setup.py build_ext --inplace).
set -e
dir=runs/2026-12-06-cpu-workspace-launch
gcc -O2 -shared -fPIC -o /tmp/libnoop.so $dir/noop.c
python $dir/host_cpu.py /tmp/libnoop.so
