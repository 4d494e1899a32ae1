#!/bin/bash
# session 25, run 122: transformers 5 fixtures for Cohere and GPT-J (RoPE on interleaved pairs), and their sources
cd "$(dirname "$0")/.." || exit 1
python3 tools/gen_refs.py /tmp/refs cohere gptj 2>&1 | grep -v "Loading weights\|Writing model" | tail -30
mkdir -p /tmp/src
T=$(python3 -c "import transformers, os; print(os.path.dirname(transformers.__file__))")
for m in cohere gptj; do cp $T/models/$m/modeling_$m.py $T/models/$m/configuration_$m.py /tmp/src/; done
cd /tmp && tar czf $OUT/r122.tgz refs src && ls -la $OUT
