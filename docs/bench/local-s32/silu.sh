#!/bin/sh
# Session 32: the fused gate/up's SiLU to ~1e-4 for bf16 y (AMX_SILU_LP=1, build/tandem) against vec_exp.inc's
# (AMX_SILU_LP=0: make BUILD=/tmp/lp0 CFLAGS='-O2 -g -DAMX_SILU_LP=0' /tmp/lp0/tandem), pp512, 5 interleaved
# pairs, TANDEM_PROFILE=warm (AMX_SILU_LP was the switch's name then; AMX_ACT_LP since, covering GELU-tanh too)
sh tools/localab.sh build/tandem /tmp/lp0/tandem 5 qwen2.5-0.5b llama-3.2-1b
