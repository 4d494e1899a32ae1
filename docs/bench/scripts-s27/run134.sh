#!/bin/bash
# session 27, run 134: transformers 5 fixtures for GPT-OSS (regenerated: its description), DeepSeek-V3 (regenerated:
# its routing correction bias perturbed), a DeepSeek-V3 variant (YaRN with mscale, rotate-half RoPE, biases, 4
# groups) and a DeepSeek-V2 variant (q_lora, group_limited_greedy) (run from the repository root)
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"
python3 tools/gen_refs.py /tmp/refs gpt_oss deepseek_v3 deepseek_v3_yarn deepseek_v2_group 2>&1 | tail -40
cd /tmp && tar czf $OUT/r134.tgz refs && ls -la $OUT
