#!/bin/bash
# session 27, run 133: transformers 5 fixtures for GPT-OSS, DeepSeek-V3 and DeepSeek-V2-Lite (MLA), and their
# modeling sources, the MoE integration and the MXFP4 conversion (run from the repository root)
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"
python3 tools/gen_refs.py /tmp/refs gpt_oss deepseek_v3 deepseek_v2_lite 2>&1 | tail -60
mkdir -p /tmp/src
T=$(python3 -c "import transformers, os; print(os.path.dirname(transformers.__file__))")
for m in gpt_oss deepseek_v3 deepseek_v2; do cp $T/models/$m/modeling_$m.py $T/models/$m/configuration_$m.py /tmp/src/ 2>/dev/null; done
cp $T/integrations/moe.py $T/integrations/mxfp4.py $T/conversion_mapping.py /tmp/src/ 2>/dev/null
ls $T/integrations > /tmp/src/integrations.txt
cd /tmp && tar czf $OUT/r133.tgz refs src && ls -la $OUT
