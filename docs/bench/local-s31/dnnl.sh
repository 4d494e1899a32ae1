#!/bin/sh
# Session 31: tandem's AMX int8 GEMM (bf16 y) beside oneDNN 2.6's (Debian libdnnl-dev, brg:avx512_core_amx_int8)
# on the prefill shapes, 2 threads, the tile peak beside. Two conditions: warm (one weight copy, one y: what
# GEMM benchmarks usually show) and engine-like (weights cycled through 128 MiB, y through 256 MiB).
# Three rounds, interleaved. Run from the repo root after `make build/kbench` and
#   cc -O2 -std=c11 -o /tmp/dnnl_gemm tools/dnnl_gemm.c -ldnnl
for round in 1 2 3; do
  for s in "512 1152 896" "512 896 896" "512 9728 896" "512 896 4864" "512 3072 2048" "512 2048 2048" "512 16384 2048" "512 2048 8192"; do
    for cond in warm cold; do
      if [ $cond = warm ]; then km=""; dm="0 0"; else km="-m 128 -y 256"; dm="128 256"; fi
      echo "== round $round $cond $s"
      build/kbench -t 2 -s 0.1 -p 3 -Y 1 $km -v amx gemm int8 $s 2>&1 | grep -E "^v3|paired|alternative build"
      OMP_NUM_THREADS=2 /tmp/dnnl_gemm $s 0.1 bf16 $dm
    done
  done
done
build/kbench -t 2 peak 2>&1 | tail -1
