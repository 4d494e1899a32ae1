#!/bin/bash
# session 25, run 118: transformers 5 fixtures for the LayerNorm families, and their modeling sources
cd "$(dirname "$0")/.." || exit 1
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"
python3 tools/gen_refs.py /tmp/refs phi starcoder2 stablelm stablelm_par gpt_neox gpt_neox_seq 2>&1 | tail -40
mkdir -p /tmp/src
T=$(python3 -c "import transformers, os; print(os.path.dirname(transformers.__file__))")
for m in phi starcoder2 stablelm gpt_neox; do cp $T/models/$m/modeling_$m.py $T/models/$m/configuration_$m.py /tmp/src/ 2>/dev/null; done
cp $T/modeling_rope_utils.py /tmp/src/
cd /tmp && tar czf $OUT/r118.tgz refs src && ls -la $OUT
