#!/bin/bash
# the K-grouped row-wise FP8 cases at 128 to 8192 tokens a group, tma against tma-n256 (after the scale loads)
export PYTHONPATH=$PWD PTXGEN_CACHE_DIR=/tmp/pc61; mkdir -p $OUT
python3 tools/bench_grouped.py --cases fk-16x4096x4096/16384,fk-32x2048x7168/16384,fk-8x7168x2048/65536,fk-64x2048x1536/8192,fk-128x2048x1536/32768 --variants tma,tma-n256 --rounds 8 --json $OUT/kfp8_threshold.jsonl > $OUT/kfp8_threshold.log 2>&1
