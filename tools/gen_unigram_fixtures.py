#!/usr/bin/python3
"""tools/gen_unigram_fixtures.py: writes tests/data/tokenizers/unigram-{nfkc,bytes}/{tokenizer.json,tests.json},
fixtures of the Unigram model and the Precompiled normalizer, in the conformance set's tests.json format.

The ids come from SentencePiece itself (Debian's python3-sentencepiece, Google's C++ library), not from
tandem: two unigram models are trained here on the repository's docs plus a multilingual paragraph, then
written as tokenizer.json the way transformers' SpmConverter lays out a T5-style tokenizer (Precompiled
normalizer from the model's own charsmap, then " {2,}" -> " "; Metaspace; the pieces and scores as a
Unigram vocab; "$A </s>"). The texts avoid where HF's pipeline and SentencePiece knowingly differ:
leading, trailing and repeated spaces (spm's remove_extra_whitespaces), special tokens' text (HF
matches added tokens first) and clusters a charsmap rule only starts (HF's whole-cluster replacement,
tested by hand in tests/test_tokenizer.c). The decoded strings
follow HF's decoders (Metaspace; or Replace, ByteFallback, Fuse, Strip), checked against spm's own
decode wherever no unk is involved.

  apt-get install sentencepiece python3-sentencepiece
  /usr/bin/python3 tools/gen_unigram_fixtures.py     # from the repository root; needs spm_train
"""
import base64
import json
import os
import subprocess
import tempfile

import sentencepiece as spm
import sentencepiece.sentencepiece_model_pb2 as pb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARAGRAPH = """Le café est très bon à Paris, où l'été est chaud. Ça va? Über die Brücke gehen wir schön langsam.
El niño comió mañana una piña. Ελληνικά γράμματα και λέξεις. Русский язык и слова для проверки.
日本語のテキストと漢字、ひらがな、カタカナ。中文文本和汉字测试。한국어 텍스트 시험.
Fullwidth ＡＢＣ ａｂｃ １２３ and ligatures ﬁ ﬂ ﬀ, the ℌ and ① symbols, ½ and ™.
"""
# a small rule set for the byte-fallback model (code points in hex, as spm's normalization_rule_tsv)
RULES = ([("%X" % (0xFF21 + i), "%X" % (0x41 + i)) for i in range(26)] +
         [("%X" % (0xFF41 + i), "%X" % (0x61 + i)) for i in range(26)] +
         [("FB01", "66 69"), ("FB02", "66 6C"), ("65 301", "E9"), ("61 300", "E0"), ("2460", "31"), ("2461", "32"),
          ("A0", "20"), ("9", "20"), ("A", "20"), ("D", "20"), ("3000", "20")])
TEXTS = [
    "Hello world",
    "The package holds the tokenizer, the chat template and the weights.",
    "Prefill runs in fixed-size chunks; decode reads the KV cache page by page.",
    "tandem convert turns a Hugging Face model directory into one package file.",
    "Numbers: 12345, 3.14159 and 2048 x 8192 (int8).",
    "Le café est très bon à Paris",
    "Über die Brücke gehen wir schön langsam",
    "El niño comió mañana una piña",
    "Ελληνικά γράμματα και λέξεις",
    "Русский язык и слова",
    "日本語のテキストと漢字",
    "中文文本和汉字测试",
    "한국어 텍스트",
    "Fullwidth ＡＢＣ ａｂｃ １２３",
    "ligatures ﬁ ﬂ ﬀ and ① ½ ™ ℌ",
    "an e\u0301 and an a\u0300 composed",
    "tab\tand\nnewline and\u00a0no-break space",
    "ideographic\u3000space",
    "emoji 🙂 and 🚀 rockets",
    "rare ☃ snowman ⌘ and ǅ",
    "unseen zyzzyva qwxjkv",
    "a",
    "",
    "x" * 40,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
]


def train(corpus, prefix, extra):
    subprocess.run(["spm_train", "--input=" + corpus, "--model_prefix=" + prefix, "--vocab_size=800",
                    "--model_type=unigram", "--seed_sentencepiece_size=20000"] + extra,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    m = pb.ModelProto()
    with open(prefix + ".model", "rb") as f:
        m.ParseFromString(f.read())
    return m, spm.SentencePieceProcessor(model_file=prefix + ".model")


def tokenizer_json(m, byte_fallback):
    pieces = [[p.piece, p.score] for p in m.pieces]
    specials = [(i, p.piece) for i, p in enumerate(m.pieces) if p.type in (2, 3)]  # UNKNOWN, CONTROL
    meta = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    if byte_fallback:
        decoder = {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    else:
        decoder = meta
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, s in specials],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled",
             "precompiled_charsmap": base64.b64encode(m.normalizer_spec.precompiled_charsmap).decode()},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
        "pre_tokenizer": meta,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "</s>", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 0}},
                                    {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                           "special_tokens": {"</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}},
        "decoder": decoder,
        "model": {"type": "Unigram", "unk_id": m.trainer_spec.unk_id, "vocab": pieces, "byte_fallback": byte_fallback},
    }


def hf_decode(m, ids, byte_fallback, skip):
    special = {i for i, p in enumerate(m.pieces) if p.type in (2, 3)}
    toks = [m.pieces[i].piece for i in ids if not (skip and i in special)]
    if not byte_fallback:  # Metaspace, prepend_scheme always: the first piece's leading space dropped
        out = "".join(t.replace("\u2581", " ") for t in toks)
        return out[1:] if out.startswith(" ") else out
    parts, run = [], []
    for t in toks + [None]:
        if t is not None and len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            run.append(int(t[3:5], 16))
            continue
        if run:
            try:
                parts.append(bytes(run).decode("utf-8"))
            except UnicodeDecodeError:
                parts.append("\ufffd" * len(run))
            run = []
        if t is not None:
            parts.append(t.replace("\u2581", " "))
    out = "".join(parts)
    return out[1:] if out.startswith(" ") else out


def main():
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w") as f:
            for name in sorted(os.listdir(os.path.join(ROOT, "docs"))):
                if name.endswith(".md"):
                    with open(os.path.join(ROOT, "docs", name)) as d:
                        f.write(d.read())
            f.write(PARAGRAPH * 8)
        rules = os.path.join(tmp, "rules.tsv")
        with open(rules, "w") as f:
            for a, b in RULES:
                f.write("%s\t%s\n" % (a, b))
        for name, extra, bf in (
                ("unigram-nfkc", ["--normalization_rule_name=nmt_nfkc", "--character_coverage=0.9995"], False),
                ("unigram-bytes", ["--normalization_rule_tsv=" + rules, "--character_coverage=0.98",
                                   "--byte_fallback=true"], True)):
            m, sp = train(corpus, os.path.join(tmp, name), extra)
            cases = []
            for text in TEXTS:
                ids = sp.encode(text)
                dec = hf_decode(m, ids, bf, False)
                if 0 not in ids and dec != sp.decode(ids):
                    raise SystemExit("%s: %r: HF-style decode %r, spm %r" % (name, text, dec, sp.decode(ids)))
                cases.append({"text": text, "ids": ids, "ids_with_special_tokens": ids + [2], "decoded": dec,
                              "decoded_skip_special": hf_decode(m, ids + [2], bf, True)})
            out = os.path.join(ROOT, "tests", "data", "tokenizers", name)
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, "tokenizer.json"), "w") as f:
                json.dump(tokenizer_json(m, bf), f, ensure_ascii=False)
            with open(os.path.join(out, "tests.json"), "w") as f:
                json.dump({"source": "sentencepiece %s (spm_train, python3-sentencepiece)" % spm.__version__,
                           "vocab_size_with_added": len(m.pieces), "cases": cases}, f, ensure_ascii=False, indent=1)
            print(name, len(m.pieces), "pieces,", len(cases), "cases")


if __name__ == "__main__":
    main()
