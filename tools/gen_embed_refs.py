#!/usr/bin/env python3
"""tools/gen_embed_refs.py: sentence-transformers' own embeddings of the conformance models, the
oracle tests/test_embed.c's section 6 checks tandem's against (tests/data/embed_refs.json).

    python3 tools/gen_embed_refs.py CONFORMANCE_MODELS_DIR OUT.json

Needs torch, transformers and sentence-transformers (the lent GPU machine's image has them; this
machine has none, so the file is generated there and committed). For each conformance model
(a tiny random-weight checkpoint of a real architecture) it builds a sentence-transformers model the
library's own way (Transformer -> Pooling -> optional Normalize, rotating the pooling mode over the
models), saves it, reloads it from disk as a user would, and encodes a few texts one at a time (no
padding: the tiny tokenizers have no pad token) in float32 on the CPU. The JSON keeps, per model,
the configuration files sentence-transformers wrote (modules.json, the Pooling module's config,
sentence_bert_config.json) verbatim, so the test rebuilds the same directory beside the checkpoint,
and per text the token ids and the vector.
"""
import json
import os
import sys
import tempfile

import torch
import sentence_transformers as st
import transformers
from sentence_transformers import SentenceTransformer, models

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Embeddings turn text into vectors.",
    "Ünïcödé, emoji 🦊 and tabs\tand\nnewlines",
    "a",
    " ".join(["A longer text that spans more than one prefill chunk of the engine, repeated."] * 14),
]
# (pooling mode, normalize) rotated over the models
PLANS = [("mean", True), ("lasttoken", True), ("cls", False), ("mean", False), ("lasttoken", False)]


def main():
    src, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    res = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                        "sentence_transformers": st.__version__},
           "texts": TEXTS, "models": {}}
    names = sorted(n for n in os.listdir(src) if os.path.isdir(os.path.join(src, n, "hf")))
    for i, name in enumerate(names):
        mode, norm = PLANS[i % len(PLANS)]
        hf = os.path.join(src, name, "hf")
        try:
            res["models"][name] = one(hf, mode, norm)
        except Exception as e:  # one model's failure is reported, the others still run
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
            continue
        r = res["models"][name]
        print(f"{name}: {mode}{' + normalize' if norm else ''}, dim {len(r['vectors'][0])}, "
              f"tokens {[len(x) for x in r['ids']]}", flush=True)
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, ensure_ascii=False, indent=None)
    os.replace(tmp, out)


def one(hf, mode, norm):
    tr = models.Transformer(hf)
    mods = [tr, models.Pooling(tr.get_embedding_dimension() if hasattr(tr, "get_embedding_dimension") else tr.get_word_embedding_dimension(), pooling_mode=mode)]
    if norm:
        mods.append(models.Normalize())
    with tempfile.TemporaryDirectory() as d:
        SentenceTransformer(modules=mods, device="cpu").save(d)
        files = {}
        for f in ("modules.json", "sentence_bert_config.json", "1_Pooling/config.json"):
            p = os.path.join(d, f)
            if os.path.exists(p):
                files[f] = open(p).read()
        m = SentenceTransformer(d, device="cpu").float().eval()
        tok = m.tokenizer
        if tok.pad_token is None:  # encode pads its batch (of one here): any token will do, none is added
            tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.convert_ids_to_tokens(0)
        ids, vecs = [], []
        for t in TEXTS:
            if hasattr(m, "tokenize"):
                ids.append(m.tokenize([t])["input_ids"][0].tolist())
            else:
                ids.append(m.tokenizer(t)["input_ids"])
            with torch.no_grad():
                vecs.append(m.encode([t], batch_size=1, convert_to_numpy=True)[0].astype("float64").tolist())
    return {"pooling": mode, "normalize": norm, "files": files, "ids": ids, "vectors": vecs}


if __name__ == "__main__":
    main()
