/* text/tokenizer.h: Hugging Face `tokenizer.json` tokenizers, exactly as the
 * `tokenizers` library runs them (encode, decode, streaming decode).
 *
 *   tm_err err = {0};
 *   tm_tokenizer *tok;
 *   if (tm_tok_load(&tok, "model/tokenizer.json", &err) != TM_OK) { puts(err.msg); ... }
 *   int32_t *ids; size_t n;
 *   tm_tok_encode(tok, "Hello world", 11, 1, &ids, &n, &err);   // [128000, 9906, 1917]
 *   char *text; size_t len;
 *   tm_tok_decode(tok, ids, n, 1, &text, &len, &err);            // "Hello world"
 *   free(ids); free(text);
 *
 *   tm_detok_stream *s = tm_detok_stream_new(tok, 1);             // streaming, one id at a time
 *   for (each generated id) {
 *       char *piece; size_t plen;
 *       tm_detok_stream_push(s, id, &piece, &plen, &err);         // complete UTF-8 only, maybe ""
 *       fwrite(piece, 1, plen, stdout); free(piece);
 *   }
 *   tm_detok_stream_flush(s, &piece, &plen, &err); ... tm_detok_stream_free(s);
 *   tm_tok_free(tok);
 *
 * Supported pipeline (anything else is rejected at load time with an error that
 * names the component type and its JSON path, never silently mis-tokenized):
 *   model:          BPE (byte-level or SentencePiece-style: byte_fallback, fuse_unk,
 *                   unk_token, ignore_merges, continuing_subword_prefix,
 *                   end_of_word_suffix; merges as "a b" strings or ["a","b"] pairs)
 *   normalizer:     NFC NFD NFKC NFKD Replace Prepend Lowercase Strip StripAccents Sequence
 *   pre_tokenizer:  Split ByteLevel Metaspace Digits Whitespace WhitespaceSplit
 *                   Punctuation BertPreTokenizer CharDelimiterSplit Sequence
 *   post_processor: TemplateProcessing ByteLevel RobertaProcessing BertProcessing Sequence
 *   decoder:        ByteLevel Metaspace ByteFallback Fuse Strip Replace BPEDecoder Sequence
 *   added_tokens:   matched in the raw (or, if `normalized`, the normalized) text, with
 *                   lstrip / rstrip / single_word; longest match wins.
 *
 * Text passed to tm_tok_encode must be valid UTF-8 (an error otherwise).
 * A loaded tokenizer is immutable: encode/decode may run concurrently from
 * several threads. A tm_detok_stream belongs to one thread at a time.
 * See docs/tokenizer.md. */
#ifndef TM_TEXT_TOKENIZER_H
#define TM_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct tm_tokenizer tm_tokenizer;

/* tm_tok_load: read and compile a tokenizer.json file. */
int tm_tok_load(tm_tokenizer **out, const char *tokenizer_json_path, tm_err *err);

/* tm_tok_load_from_string: the same from JSON text in memory (json[0..len),
 * no NUL needed); name_for_errors prefixes error messages (e.g. the package
 * name). Packages that embed tokenizer.json use this. */
int tm_tok_load_from_string(tm_tokenizer **out, const char *json, size_t len,
                            const char *name_for_errors, tm_err *err);

void tm_tok_free(tm_tokenizer *t);

/* tm_tok_encode: text[0..len) -> *ids[*n_ids] (malloc'd, free() it; NULL when
 * *n_ids == 0 is allowed). add_special = HF add_special_tokens (the
 * post-processor's template, e.g. BOS). */
int tm_tok_encode(const tm_tokenizer *t, const char *text, size_t len, int add_special,
                  int32_t **ids, size_t *n_ids, tm_err *err);

/* tm_tok_decode: ids[n] -> *text (malloc'd, NUL-terminated, *len bytes without
 * the NUL). Unknown ids are skipped, as in HF. skip_special drops special tokens. */
int tm_tok_decode(const tm_tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                  char **text, size_t *len, tm_err *err);

/* tm_tok_decode_keep: tm_tok_decode, but with skip_special the special ids keep[n_keep] stay (a
 * reply format's markup, such as harmony's channel tokens). */
int tm_tok_decode_keep(const tm_tokenizer *t, const int32_t *ids, size_t n, int skip_special, const int32_t *keep,
                       int n_keep, char **text, size_t *len, tm_err *err);

/* tm_tok_token_bytes: the bytes id adds to a decoded text in the middle of it: the decoder's
 * rules for a text's first or last token do not apply, and bytes are kept as they are (a
 * byte-level or byte-fallback token that is part of a UTF-8 character gives that byte, not
 * U+FFFD). An unknown id gives "". *bytes: malloc'd, NUL-terminated, *len bytes without the NUL. */
int tm_tok_token_bytes(const tm_tokenizer *t, int32_t id, char **bytes, size_t *len, tm_err *err);

/* tm_tok_vocab_size: one past the largest id (model vocabulary and added tokens). */
int tm_tok_vocab_size(const tm_tokenizer *t);

/* tm_tok_id_to_piece: the vocabulary string of an id (e.g. "Ġworld"), NULL if none.
 * Valid as long as the tokenizer lives. */
const char *tm_tok_id_to_piece(const tm_tokenizer *t, int32_t id);

/* tm_tok_piece_to_id: id of a vocabulary string (added tokens first), -1 if none. */
int32_t tm_tok_piece_to_id(const tm_tokenizer *t, const char *piece);

/* tm_tok_is_special: 1 if id is a special added token (skipped by skip_special). */
int tm_tok_is_special(const tm_tokenizer *t, int32_t id);

/* Streaming detokenizer: push ids one at a time and get back only complete
 * UTF-8 text; the concatenation of all pieces (pushes, then flush) equals
 * tm_tok_decode of all ids. */
typedef struct tm_detok_stream tm_detok_stream;

tm_detok_stream *tm_detok_stream_new(const tm_tokenizer *t, int skip_special); /* NULL on OOM */
/* tm_detok_stream_keep: with skip_special, these special ids (at most TM_DETOK_KEEP) stay, as in
 * tm_tok_decode_keep. Call it before the first push. */
#define TM_DETOK_KEEP 16
void tm_detok_stream_keep(tm_detok_stream *s, const int32_t *ids, int n);
/* *piece: malloc'd NUL-terminated text (possibly ""), *len its length. */
int tm_detok_stream_push(tm_detok_stream *s, int32_t id, char **piece, size_t *len, tm_err *err);
/* tm_detok_stream_flush: whatever is held back (e.g. an incomplete byte sequence,
 * decoded as HF would, with U+FFFD); the stream can then be reused from scratch. */
int tm_detok_stream_flush(tm_detok_stream *s, char **piece, size_t *len, tm_err *err);
void tm_detok_stream_free(tm_detok_stream *s);

/* tm_tok_bench: encode text[0..len) `reps` times and return MB/s of this
 * thread's CPU time, i.e. the speed of one core (<0 on error). */
double tm_tok_bench(const tm_tokenizer *t, const char *text, size_t len, int reps, tm_err *err);

#endif
