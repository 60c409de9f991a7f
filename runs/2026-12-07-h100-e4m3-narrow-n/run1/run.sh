#!/bin/bash
# ptxgen bench with no tile flags (every class) and a fresh calibration with the held-out 30 under it
[ -f ptxgen/runtime/launch/_launcher.abi3.so ] || python3 setup.py -q build_ext --inplace > /dev/null 2>&1
OUT=$OUT BUDGET=570 bash tools/gpu_run.sh bench-gemm calibrate
# heldout30_e4m3_form.json: the e4m3 form (--set 30 --e4m3), step e4m3held of runs/2026-12-07-h100-rowwise-scale-loads/run1/run.sh
