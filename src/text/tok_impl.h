/* text/tok_impl.h: the tokenizer's private structures, shared by the tok_*.c
 * files only. Nothing here is public API.
 *
 * Layout of the encode pipeline (HF `TokenizerImpl::encode_single_sequence`):
 *
 *   text ─► added tokens (raw text) ─► per gap: normalizer ─► added tokens
 *        (normalized) ─► pre-tokenizer ─► model (BPE, WordPiece) ─► ids ─► post-processor
 *
 * Text moves through the pipeline as "pieces": byte ranges of a per-call
 * scratch buffer (tok_work.text). A split only creates new ranges; a
 * transformation appends its output to the buffer and re-points the piece.
 * Everything in tm_tokenizer is read-only after load, so encode/decode are
 * re-entrant; per-call state lives in tok_work. */
#ifndef TM_TEXT_TOK_IMPL_H
#define TM_TEXT_TOK_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "text/tokenizer.h"

/* ---- limits against hostile files and inputs ---------------------------- */
#define TOK_MAX_DEPTH 16           /* nesting of Sequence components */
#define TOK_MAX_PATTERN (64 * 1024) /* bytes of one regex / literal pattern */
#define TOK_MAX_ID (1 << 26)       /* largest token id accepted */
#define TOK_MATCH_LIMIT 5000000u   /* PCRE2 match limit per search */
#define TOK_BL_CHARS 324          /* byte-level chars are < U+0144 */
#define TOK_GROWTH 16              /* pipeline text may grow to 16x input + 1 MiB */

/* ---- growable byte buffer ------------------------------------------------ */
typedef struct tok_buf {
    char *p;     /* [len] bytes (+1 spare for a NUL), owned */
    size_t len;
    size_t cap;
} tok_buf;

int tok_buf_reserve(tok_buf *b, size_t extra); /* TM_OK or TM_E_NOMEM */
int tok_buf_append(tok_buf *b, const void *s, size_t n);
void tok_buf_free(tok_buf *b);

/* ---- arena of immutable strings (stable pointers) ------------------------ */
typedef struct tok_arena_chunk tok_arena_chunk;
typedef struct tok_arena {
    tok_arena_chunk *head;
    size_t next; /* size of the next chunk: grows from 4 KiB to 1 MiB */
} tok_arena;
/* copy s[0..n) and a NUL into the arena; NULL on OOM */
char *tok_arena_strndup(tok_arena *a, const char *s, size_t n);
void tok_arena_free(tok_arena *a);

/* ---- string -> int32 hash map (keys point into an arena) ------------------ */
typedef struct tok_strmap_slot {
    const char *key; /* NULL = empty */
    uint32_t len;
    int32_t val;
} tok_strmap_slot;
typedef struct tok_strmap {
    tok_strmap_slot *slots; /* [mask + 1] */
    size_t mask;
    size_t n;
} tok_strmap;

uint64_t tok_hash(const char *s, size_t n);
int tok_strmap_init(tok_strmap *m, size_t expected);
/* insert or overwrite (later wins, like a serde HashMap); key must outlive map */
int tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t val);
/* value or -1 */
int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len);
void tok_strmap_free(tok_strmap *m);

/* ---- (id, id) -> (rank, new id) map for BPE merges ----------------------- */
typedef struct tok_pair_slot {
    uint64_t key;   /* (a << 32) | b, UINT64_MAX = empty */
    uint32_t rank;
    int32_t new_id;
} tok_pair_slot;
typedef struct tok_pairmap {
    tok_pair_slot *slots; /* [mask + 1] */
    size_t mask;
    size_t n;
} tok_pairmap;

int tok_pairmap_init(tok_pairmap *m, size_t expected);
int tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t new_id);
const tok_pair_slot *tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b);
void tok_pairmap_free(tok_pairmap *m);

/* ---- UTF-8 and Unicode predicates (Rust `char` semantics) ---------------- */
/* decode one code point of valid UTF-8 at s (n > 0 bytes); *adv = its length */
uint32_t tok_utf8_dec(const char *s, size_t n, size_t *adv);
size_t tok_utf8_enc(uint32_t cp, char out[4]);
size_t tok_utf8_len(unsigned char lead); /* 1..4 from a valid lead byte */
/* 1 if s[0..n) is valid UTF-8, else 0 with *bad = offset of the first bad byte */
int tok_utf8_valid(const char *s, size_t n, size_t *bad);
/* String::from_utf8_lossy: invalid sequences -> U+FFFD (maximal subparts) */
int tok_utf8_lossy(tok_buf *out, const unsigned char *s, size_t n);
int tok_is_whitespace(uint32_t cp); /* char::is_whitespace (White_Space) */
int tok_is_numeric(uint32_t cp);    /* char::is_numeric (N*) */
int tok_is_word(uint32_t cp);       /* regex \w: Alphabetic, M, Nd, Pc, Join_Control */
int tok_is_punct(uint32_t cp);      /* is_ascii_punctuation || P* */

/* ---- patterns: a regex (Oniguruma syntax, translated) or a literal string -- */
typedef struct tok_regex {
    pcre2_code *code; /* JIT-compiled where available */
} tok_regex;

/* One piece of a pattern's find_matches: [start, end) and whether it matched. */
typedef struct tok_match {
    size_t start, end;
    int is_match;
} tok_match;

typedef struct tok_matches {
    tok_match *v;
    size_t n, cap;
} tok_matches;

/* ---- a piece of text in flight ------------------------------------------- */
typedef struct tok_piece {
    size_t off, len; /* bytes [off, off+len) of tok_work.text */
    size_t ins;      /* leading bytes inserted by the pipeline (no original text) */
    int at_start;    /* the piece's original offset is 0 (Metaspace prepend "first") */
} tok_piece;

typedef struct tok_pieces {
    tok_piece *v;
    size_t n, cap;
} tok_pieces;

int tok_pieces_push(tok_pieces *p, tok_piece x);

/* ---- per-call scratch ---------------------------------------------------- */
typedef struct tok_sym {
    int32_t id;
    int32_t prev, next; /* linked list over the word's symbols, -1 = none */
    uint32_t len;       /* bytes; 0 = merged away */
} tok_sym;

typedef struct tok_heap_ent {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
} tok_heap_ent;

/* per-call cache of BPE results: word -> ids (words repeat a lot in text) */
#define TOK_CACHE_MAX_WORD 64
#define TOK_CACHE_MAX_ENTRIES 65536
typedef struct tok_cache {
    tok_strmap map;        /* word (in keys) -> entry index */
    tok_arena keys;
    int32_t *ids;          /* all cached ids [n_ids] */
    size_t n_ids, cap_ids;
    uint32_t *ent_off;     /* [n_ent] first id of an entry in ids */
    uint32_t *ent_len;     /* [n_ent] */
    size_t n_ent, cap_ent;
} tok_cache;

typedef struct tok_work {
    tok_buf text;                 /* piece storage */
    size_t limit;                 /* max text.len (growth guard) */
    tok_pieces pa, pb;            /* ping-pong piece lists */
    tok_matches m;                /* pattern matches */
    tok_matches m2;               /* split ranges */
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
    int32_t *ids;                 /* output [n_ids] */
    size_t n_ids, cap_ids;
    tok_sym *syms;                /* BPE word symbols [n_syms] */
    size_t n_syms, cap_syms;
    tok_heap_ent *heap;           /* BPE merge queue */
    size_t n_heap, cap_heap;
    struct tok_uni_node *uni;     /* Unigram lattice [n + 1] (tok_unigram.c) */
    size_t cap_uni;
    tok_cache cache;              /* BPE word cache */
    const char *name;             /* for messages */
    int raw_bytes;                /* decoders keep bytes as they are: ByteLevel and ByteFallback do not
                                     replace invalid UTF-8 with U+FFFD (tm_tok_token_bytes) */
} tok_work;

int tok_work_init(tok_work *w, size_t input_len, const char *name, tm_err *err);
void tok_work_free(tok_work *w);
int tok_work_push_id(tok_work *w, int32_t id);
/* a piece whose text is appended to w->text (copied from s[0..n)) */
int tok_work_add_text(tok_work *w, const char *s, size_t n, tok_piece *out, tm_err *err);

/* ---- regex --------------------------------------------------------------- */
/* compile an HF pattern: regex (translated from Oniguruma/Rust syntax) or,
 * if literal, the escaped string. `where` names the JSON field for errors. */
int tok_regex_compile(tok_regex *re, const char *pat, size_t len, int literal,
                      const char *name, const char *where, tm_err *err);
void tok_regex_free(tok_regex *re);
/* HF Pattern::find_matches on s[0..n): the whole string as alternating
 * (gap, match) pieces; empty input gives one empty non-match. */
int tok_regex_find(const tok_regex *re, tok_work *w, const char *s, size_t n, tok_matches *out,
                   tm_err *err);
int tok_matches_push(tok_matches *m, size_t s, size_t e, int is_match);

/* ---- pipeline components ------------------------------------------------- */
typedef enum tok_split_behavior {
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_MERGED_PREV,
    TOK_SPLIT_MERGED_NEXT,
    TOK_SPLIT_CONTIGUOUS,
} tok_split_behavior;

typedef enum tok_norm_type {
    TOK_NORM_SEQUENCE,
    TOK_NORM_NFC,
    TOK_NORM_NFD,
    TOK_NORM_NFKC,
    TOK_NORM_NFKD,
    TOK_NORM_REPLACE,
    TOK_NORM_PREPEND,
    TOK_NORM_LOWERCASE,
    TOK_NORM_STRIP,
    TOK_NORM_STRIP_ACCENTS,
    TOK_NORM_BERT,
    TOK_NORM_PRECOMPILED,
    TOK_NORM_NMT,
} tok_norm_type;

typedef struct tok_normalizer {
    tok_norm_type type;
    struct tok_normalizer *items; /* Sequence: [n_items] */
    size_t n_items;
    tok_regex re;                 /* Replace */
    char *content;                /* Replace: replacement; Prepend: prefix */
    size_t content_len;
    int left, right;              /* Strip */
    int clean, chinese, accents, lower; /* BertNormalizer: clean_text, handle_chinese_chars, strip_accents
                                           (null: as lowercase), lowercase */
    uint32_t *pc_units;           /* Precompiled: the double array [pc_n] (tok_precompiled.c) */
    size_t pc_n;
    char *pc_norm;                /* Precompiled: the replacement strings [pc_norm_len] + NUL */
    size_t pc_norm_len;
} tok_normalizer;

typedef enum tok_pretok_type {
    TOK_PRE_SEQUENCE,
    TOK_PRE_SPLIT,
    TOK_PRE_BYTELEVEL,
    TOK_PRE_METASPACE,
    TOK_PRE_DIGITS,
    TOK_PRE_WHITESPACE,
    TOK_PRE_WHITESPACE_SPLIT,
    TOK_PRE_PUNCTUATION,
    TOK_PRE_BERT,
    TOK_PRE_CHAR_DELIM,
} tok_pretok_type;

typedef enum tok_prepend_scheme { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER } tok_prepend_scheme;

typedef struct tok_pretok {
    tok_pretok_type type;
    struct tok_pretok *items;     /* Sequence: [n_items] */
    size_t n_items;
    tok_regex re;                 /* Split, Whitespace; ByteLevel (use_regex): GPT-2 regex */
    tok_split_behavior behavior;  /* Split, Punctuation */
    int invert;                   /* Split */
    int add_prefix_space;         /* ByteLevel */
    int use_regex;                /* ByteLevel */
    uint32_t ch;                  /* Metaspace replacement, CharDelimiterSplit delimiter */
    tok_prepend_scheme prepend;   /* Metaspace */
    int split;                    /* Metaspace */
    int individual_digits;        /* Digits */
} tok_pretok;

typedef enum tok_dec_type {
    TOK_DEC_SEQUENCE,
    TOK_DEC_BYTELEVEL,
    TOK_DEC_METASPACE,
    TOK_DEC_BYTE_FALLBACK,
    TOK_DEC_FUSE,
    TOK_DEC_STRIP,
    TOK_DEC_REPLACE,
    TOK_DEC_BPE,
    TOK_DEC_WORDPIECE,
} tok_dec_type;

typedef struct tok_decoder {
    tok_dec_type type;
    struct tok_decoder *items; /* Sequence: [n_items] */
    size_t n_items;
    tok_regex re;              /* Replace */
    char *content;             /* Replace: replacement; BPEDecoder: suffix; WordPiece: prefix */
    size_t content_len;
    uint32_t ch;               /* Strip: content; Metaspace: replacement */
    size_t start, stop;        /* Strip */
    tok_prepend_scheme prepend; /* Metaspace */
    int cleanup;               /* WordPiece */
} tok_decoder;

typedef enum tok_post_type { TOK_POST_SEQUENCE, TOK_POST_TEMPLATE, TOK_POST_NOOP } tok_post_type;

typedef struct tok_post {
    tok_post_type type;
    struct tok_post *items; /* Sequence: [n_items] */
    size_t n_items;
    /* Template (single): ids to emit; -1 marks the sequence A */
    int32_t *tmpl;          /* [n_tmpl] */
    size_t n_tmpl;
} tok_post;

/* ---- added tokens' and Unigram's byte trie ------------------------------- */
typedef struct tok_trie {
    tok_pairmap edges;     /* (node, byte) -> child node (stored in new_id) */
    int32_t *node_id;      /* [n_nodes] id of the token ending at a node, -1 = none; node 0 = root */
    size_t n_nodes, cap_nodes;
    uint8_t first_byte[256]; /* 1 if some pattern starts with this byte */
    size_t n_patterns;
} tok_trie;

/* ---- the model: BPE, WordPiece or Unigram --------------------------------- */
typedef enum tok_model_type { TOK_MODEL_BPE, TOK_MODEL_WORDPIECE, TOK_MODEL_UNIGRAM, TOK_MODEL_WORDLEVEL } tok_model_type;

typedef struct tok_model {
    tok_model_type type;
    tok_strmap vocab;        /* piece -> id */
    size_t vocab_entries;    /* distinct pieces (HF get_vocab_size) */
    char *unk;               /* unk_token or NULL */
    char *prefix;            /* continuing_subword_prefix or NULL */
    size_t prefix_len;
    /* BPE */
    tok_pairmap merges;      /* (left id, right id) -> (rank, merged id) */
    char *suffix;            /* end_of_word_suffix or NULL */
    size_t suffix_len;
    int fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_ids[256];   /* id of "<0xXX>" or -1 (byte fallback) */
    /* WordPiece */
    size_t max_chars;        /* max_input_chars_per_word: longer words are unk */
    /* Unigram (byte_fallback and byte_ids above too) */
    const char **upiece;     /* [n_upiece] the piece at each index (duplicates kept: HF id_to_token) */
    uint32_t *ulen;          /* [n_upiece] */
    double *score;           /* [n_upiece] log probabilities */
    size_t n_upiece;
    int32_t unk_id;          /* -1: none */
    double unk_score;        /* the lowest score less 10 (HF K_UNK_PENALTY) */
    tok_trie utrie;          /* every piece -> its id (the vocabulary's: the last of duplicates) */
} tok_model;

/* ---- added tokens (HF AddedVocabulary) ------------------------------------ */

typedef struct tok_added {
    int32_t id;
    char *content;
    size_t len;
    uint8_t single_word, lstrip, rstrip, normalized, special;
} tok_added;

/* ---- the tokenizer ------------------------------------------------------- */
struct tm_tokenizer {
    char name[256];          /* for error messages */
    tok_arena arena;         /* all vocabulary strings */
    tok_model model;
    tok_normalizer *normalizer;  /* NULL = none */
    tok_pretok *pretok;          /* NULL = none */
    tok_post *post;              /* NULL = none */
    tok_decoder *decoder;        /* NULL = join with " " */
    /* added vocabulary */
    tok_added *added;        /* [n_added] HF added_tokens_map_r: one per id, latest definition */
    size_t n_added, cap_added;
    tok_strmap added_map;    /* content -> id */
    tok_strmap special_set;  /* contents of special tokens -> 1 */
    tok_trie trie_raw;       /* non-normalized added tokens */
    tok_trie trie_norm;      /* normalized added tokens (normalized content) */
    int32_t *added_index;    /* [n_added_index] id -> index into added[], -1 = not added */
    size_t n_added_index;
    /* id -> piece */
    const char **pieces;     /* [n_ids], NULL where no token */
    uint32_t *piece_len;     /* [n_ids] */
    uint8_t *is_special;     /* [n_ids] */
    size_t n_ids;            /* one past the largest id */
    /* GPT-2 byte <-> unicode tables (ByteLevel) */
    char bl_utf8[256][2];    /* byte -> UTF-8 of its char (bl_len bytes) */
    uint8_t bl_len[256];
    int16_t bl_byte[TOK_BL_CHARS]; /* code point -> byte, -1 = not a byte char */
};

void tok_byte_level_tables(tm_tokenizer *t);

/* loading (tok_load*.c) */
int tok_load_model(tm_tokenizer *t, const void *model_json, tm_err *err); /* by model.type */
int tok_load_bpe(tm_tokenizer *t, const void *model_json, tm_err *err);
int tok_load_wordpiece(tm_tokenizer *t, const void *model_json, tm_err *err);
int tok_load_unigram(tm_tokenizer *t, const void *model_json, tm_err *err);
int tok_load_wordlevel(tm_tokenizer *t, const void *model_json, tm_err *err);
void tok_unigram_free(tok_model *m);
/* model.vocab, an object of piece -> id, into t->model.vocab */
int tok_model_vocab(tm_tokenizer *t, const void *vocab_json, tm_err *err);
/* optional model.KEY: a bool (null or absent: *out unchanged), a string (null or absent: NULL) */
int tok_model_bool(const tm_tokenizer *t, const void *model_json, const char *key, int *out, tm_err *err);
int tok_model_str(tm_tokenizer *t, const void *model_json, const char *key, char **out, size_t *len, tm_err *err);
int tok_load_added(tm_tokenizer *t, const void *added_json, tm_err *err);
int tok_load_normalizer(tm_tokenizer *t, tok_normalizer *n, const void *json, const char *path,
                        int depth, tm_err *err);
int tok_load_pretok(tm_tokenizer *t, tok_pretok *p, const void *json, const char *path, int depth,
                    tm_err *err);
int tok_load_decoder(tm_tokenizer *t, tok_decoder *d, const void *json, const char *path, int depth,
                     tm_err *err);
int tok_load_post(tm_tokenizer *t, tok_post *p, const void *json, const char *path, int depth,
                  tm_err *err);
void tok_normalizer_free(tok_normalizer *n);
void tok_pretok_free(tok_pretok *p);
void tok_decoder_free(tok_decoder *d);
void tok_post_free(tok_post *p);

/* Precompiled (tok_precompiled.c): the charsmap from its base64 into x; one piece normalized */
int tok_precompiled_load(tm_tokenizer *t, tok_normalizer *x, const char *b64, const char *path, tm_err *err);
int tok_precompiled_apply(const tok_normalizer *x, tok_work *w, tok_piece *p, tm_err *err);

/* running (one file per concept) */
int tok_normalize(const tm_tokenizer *t, const tok_normalizer *n, tok_work *w, tok_piece *p,
                  tm_err *err);
int tok_pretokenize(const tm_tokenizer *t, const tok_pretok *pt, tok_work *w, tok_pieces *in,
                    tok_pieces *out, tm_err *err);
/* one pre-token through the model: its ids appended to w->ids */
int tok_model_encode(const tok_model *m, tok_work *w, const char *s, size_t n, tm_err *err);
int tok_bpe_encode(const tok_model *b, tok_work *w, const char *s, size_t n, tm_err *err);
int tok_wordpiece_encode(const tok_model *m, tok_work *w, const char *s, size_t n, tm_err *err);
int tok_unigram_encode(const tok_model *m, tok_work *w, const char *s, size_t n, tm_err *err);
int tok_wordlevel_encode(const tok_model *m, tok_work *w, const char *s, size_t n, tm_err *err);
int tok_bpe_build_merges(tm_tokenizer *t, const void *merges_json, tm_err *err);

/* added tokens: trie + HF find_matches (leftmost-longest, with the flags) */
int tok_trie_add(tok_trie *tr, const char *s, size_t n, int32_t id);
void tok_trie_free(tok_trie *tr);
/* split s[0..n) on the trie's tokens: out gets (start, end, id-or--1) triples
 * via tok_matches (is_match holds the id + 1, 0 for text). */
int tok_added_split(const tm_tokenizer *t, const tok_trie *tr, const char *s, size_t n,
                    tok_matches *out);

/* decoders: run over a list of token strings */
typedef struct tok_strs {
    tok_buf buf;        /* string bytes */
    size_t *off, *len;  /* [n] */
    size_t n, cap;
} tok_strs;
int tok_strs_push(tok_strs *s, const char *p, size_t n);
void tok_strs_free(tok_strs *s);
int tok_decode_chain(const tm_tokenizer *t, const tok_decoder *d, tok_work *w, tok_strs *toks, tm_err *err);

/* a code point written into a tok_buf */
int tok_buf_put_cp(tok_buf *b, uint32_t cp);

#endif
