#!/bin/bash
# session 26, run 126: transformers 5 fixtures for ALiBi (BLOOM, MPT, Falcon-RW), GPTBigCode, GPT-Neo and
# OLMo 1, and their modeling sources (run from the repository root)
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"
python3 tools/gen_refs.py /tmp/refs bloom mpt falcon_alibi gpt_bigcode gpt_bigcode_mha gpt_neo olmo olmo_clip 2>&1 | tail -60
mkdir -p /tmp/src
T=$(python3 -c "import transformers, os; print(os.path.dirname(transformers.__file__))")
for m in bloom mpt falcon gpt_bigcode gpt_neo olmo; do cp $T/models/$m/modeling_$m.py $T/models/$m/configuration_$m.py /tmp/src/ 2>/dev/null; done
cp $T/masking_utils.py /tmp/src/
cd /tmp && tar czf $OUT/r126.tgz refs src && ls -la $OUT
