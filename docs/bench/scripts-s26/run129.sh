#!/bin/bash
# session 26, run 129: transformers 5 fixtures for the q/k LayerNorms (Persimmon, Phi qk_layernorm, Cohere
# use_qk_norm, StableLM qk_layernorm), with the modeling sources (run from the repository root)
python3 tools/gen_refs.py /tmp/refs persimmon phi_qk cohere_qk stablelm_qk > /tmp/refs.log 2>&1
tail -30 /tmp/refs.log
mkdir -p /tmp/src; T=$(python3 -c "import transformers, os; print(os.path.dirname(transformers.__file__))")
for m in persimmon phi cohere stablelm; do cp $T/models/$m/modeling_$m.py $T/models/$m/configuration_$m.py /tmp/src/ 2>/dev/null; done
cd /tmp && tar czf $OUT/r129.tgz refs src refs.log && ls -la $OUT
