// tools/gen_tok_fixtures.mjs: writes tests/data/tokenizers/<name>/{tokenizer.json,tests.json}, the
// fixtures of tokenizer pipelines the shared conformance set does not cover (WordPiece with the
// BERT normalizer, pre-tokenizer and decoder), in the conformance set's tests.json format.
//
// The expectations come from Tokenizers.js (@huggingface/tokenizers, an independent
// implementation by Hugging Face), not from tandem. Before writing anything this script checks
// that Tokenizers.js reproduces every case of the three shared conformance tokenizers (made by
// the Rust `tokenizers`) and stops if it does not. Where Tokenizers.js is known to differ from
// the Rust library, the texts avoid the difference and tests/test_tokenizer.c checks the Rust
// behaviour by hand instead: characters beyond the BMP next to CJK handling (it walks UTF-16
// units), lowercasing a final capital sigma (it lowercases in context), the order of accent
// stripping and lowercasing, unassigned code points (Cn), an empty WordPiece prefix.
//
//   npm install --prefix /tmp/tokjs @huggingface/tokenizers@0.2.0
//   TOKJS=/tmp/tokjs node tools/gen_tok_fixtures.mjs [SHARED_DIR]
import fs from "fs";
import path from "path";

const here = path.dirname(new URL(import.meta.url).pathname);
const root = path.resolve(here, "..");
const shared = process.argv[2] || path.resolve(root, "../shared");
const { Tokenizer } = await import(
  path.resolve(process.env.TOKJS || "/tmp/tokjs", "node_modules/@huggingface/tokenizers/dist/tokenizers.mjs"));
const VERSION = "@huggingface/tokenizers 0.2.0";

function cases(tok, texts) {
  return texts.map((text) => {
    const ids = tok.encode(text, { add_special_tokens: false }).ids;
    const sp = tok.encode(text).ids;
    const dec = (v, skip) => v.length ? tok.decode(v, { skip_special_tokens: skip, clean_up_tokenization_spaces: false }) : "";
    return { text, ids, ids_with_special_tokens: sp, decoded: dec(ids, false), decoded_skip_special: dec(sp, true) };
  });
}

// 1. the oracle against the Rust library's own expectations
for (const name of ["llama-bpe", "qwen2", "llama-spm"]) {
  const dir = path.join(shared, "conformance/tokenizers", name);
  const want = JSON.parse(fs.readFileSync(path.join(dir, "tests.json")));
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"))),
                            JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"))));
  const got = cases(tok, want.cases.map((c) => c.text));
  const keys = ["ids", "ids_with_special_tokens", "decoded", "decoded_skip_special"];
  const bad = got.filter((g, i) => keys.some((k) => JSON.stringify(g[k]) !== JSON.stringify(want.cases[i][k])));
  if (bad.length) throw new Error(`${VERSION} differs from the Rust tokenizers on ${name}: ${bad.length} cases`);
  console.log(`${name}: ${got.length} cases agree with the Rust tokenizers`);
}

// 2. a WordPiece vocabulary laid out as BERT's: [PAD] 0, [unusedN], [UNK] [CLS] [SEP] [MASK], then
//    single characters, "##" + characters, whole words and word pieces
const specials = ["[PAD]", "[unused0]", "[unused1]", "[unused2]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
const chars = [..."!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~0123456789abcdefghijklmnopqrstuvwxyz" +
               "ABCDEFGHIJKLMNOPQRSTUVWXYZéöüßñåαβγσ中国人的日本語世界こんにちは한국어"];
const cont = [..."abcdefghijklmnoprstuvwxyz0123456789éöüßñαβγσ"].map((c) => "##" + c); // no "##q"
const words = ["the", "quick", "brown", "fox", "jump", "over", "lazy", "dog", "hello", "world", "token", "##izer",
  "##ization", "##s", "##ed", "##ing", "##ly", "##er", "##ers", "un", "##aff", "##able", "play", "it", "is", "isn",
  "a", "an", "and", "of", "to", "in", "for", "on", "with", "that", "this", "was", "not", "do", "don", "we", "they",
  "you", "are", "how", "re", "ve", "ll", "can", "easy", "naive", "cafe", "resume", "ang", "##str", "##om", "straße",
  "Hello", "World", "The", "John", "Smith", "New", "York", "new", "york", "##ork", "19", "##99", "2024", "100",
  "##00", "000", "50", "mail", "john", "example", "com", "test", "here", "space", "tab", "##s", "line", "new",
  "##lines", "zero", "width", "bell", "char", "leading", "trailing", "spaces", "replacement", "vs", "ideographic",
  "nbsp", "Café", "naïve", "résumé", "Ångström", "αβγ", "xyzzy", "plug", "##h", "日本", "##語"];
const vocab = {};
for (const t of [...specials, ...chars, ...cont, ...words]) if (!(t in vocab)) vocab[t] = Object.keys(vocab).length;

function tokenizerJson(lower) {
  return {
    version: "1.0", truncation: null, padding: null,
    added_tokens: specials.map((c) => ({ id: vocab[c], content: c, single_word: false, lstrip: false, rstrip: false,
                                         normalized: false, special: true })),
    normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null,
                  lowercase: lower },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: { type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
               { SpecialToken: { id: "[SEP]", type_id: 0 } }],
      pair: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
             { SpecialToken: { id: "[SEP]", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } },
             { SpecialToken: { id: "[SEP]", type_id: 1 } }],
      special_tokens: { "[CLS]": { id: "[CLS]", ids: [vocab["[CLS]"]], tokens: ["[CLS]"] },
                        "[SEP]": { id: "[SEP]", ids: [vocab["[SEP]"]], tokens: ["[SEP]"] } } },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 24,
             vocab },
  };
}

const texts = ["Hello World!", "The quick brown fox jumps over the lazy dog.", "unaffable", "Tokenization isn't easy, is it?",
  "I'm playing; they've played. We're players!", "  leading and trailing spaces  ", "tab\tand\nnewlines\r\nhere",
  "Café naïve résumé Ångström", "cafe\u0301 vs café", "中国人的日本語", "こんにちは世界", "한국어 hello",
  "zero\u200Bwidth and soft\u00ADhyphen", "bell\u0007char", "replacement \uFFFD char", "ideographic\u3000space nbsp\u00A0here",
  "xyzzy plugh", "aq qa", "averyveryveryveryverylongword and a 24charsword24charsword1",
  "exactly24charactersword", "[CLS] hello [SEP] [MASK]", "hello[MASK]world", "", " ", "1999 2024 100,000.50",
  "e-mail: john@example.com (test)", "ΑΒΓ αβγ", "Straße STRASSE", "Hello , world . How are you ?",
  "don't do not can't won't", "New York, new-york & NewYork...", "x\u0301\u0302 stacked marks", "日本語のテキスト",
  "Ωμέγα", "HELLO hello HeLLo", "(a) [b] {c} <d>", "\u00e5ngstr\u00f6m", "multiple   spaces\t\ttabs"];

for (const [name, lower] of [["wordpiece-uncased", true], ["wordpiece-cased", false]]) {
  const tj = tokenizerJson(lower);
  const tok = new Tokenizer(tj, {});
  const out = {
    tokenizer: name, built_from: "tools/gen_tok_fixtures.mjs (a synthetic BERT-style vocabulary)",
    versions: { oracle: VERSION }, vocab_size_with_added: Object.keys(vocab).length, cases: cases(tok, texts),
  };
  const dir = path.join(root, "tests/data/tokenizers", name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(tj, null, 1) + "\n");
  fs.writeFileSync(path.join(dir, "tests.json"), JSON.stringify(out, null, 1) + "\n");
  console.log(`${name}: ${out.cases.length} cases written`);
}
