/* tests/test_tokenizer.c: the tokenizer against Hugging Face `tokenizers`.
 *
 * 1. Conformance: every case of ../shared/conformance/tokenizers/<name>/tests.json
 *    (ids, ids_with_special_tokens, decoded, decoded_skip_special), and the
 *    streaming decoder's concatenated output against the full decode.
 * 2. The demo model's tokenizer against its reference input_ids.
 * 3. Unit tests for components the fixtures do not exercise, on small inline
 *    tokenizer.json strings; the expected outputs are derived by hand from
 *    the HF semantics (explained next to each case).
 * 4. Malformed files give clear errors; concurrent encodes agree.
 * 5. tm_tok_token_bytes: on every conformance case, the first token decoded and every later
 *    token's bytes concatenate to the decode (U+FFFD where the bytes are not UTF-8); and by hand
 *    for the byte-level, byte-fallback and WordPiece cases. */
#include "harness.h"

#include <cjson/cJSON.h>
#include <pthread.h>

#include "core/fileio.h"
#include "text/tok_impl.h"
#include "text/tokenizer.h"

/* ---- helpers ------------------------------------------------------------- */

static int ids_equal(const int32_t *a, size_t na, const cJSON *arr)
{
    if ((size_t)cJSON_GetArraySize(arr) != na) return 0;
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++)
        if (!cJSON_IsNumber(e) || (int32_t)e->valuedouble != a[i]) return 0;
    return 1;
}

static void print_ids(const char *what, const int32_t *a, size_t n, const cJSON *want)
{
    fprintf(stderr, "  %s: got [", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, "%s%d", i ? "," : "", a[i]);
    char *w = cJSON_PrintUnformatted(want);
    fprintf(stderr, "] want %s\n", w);
    free(w);
}

static int32_t *json_ids(const cJSON *arr, size_t *n)
{
    *n = (size_t)cJSON_GetArraySize(arr);
    int32_t *v = malloc((*n + 1) * sizeof *v);
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next) v[i++] = (int32_t)e->valuedouble;
    return v;
}

/* decode ids through the streaming API, one id at a time */
static char *stream_decode(const tm_tokenizer *t, const int32_t *ids, size_t n, int skip, int *ok, size_t *out_len)
{
    tm_err err = {0};
    tm_detok_stream *s = tm_detok_stream_new(t, skip);
    size_t cap = 64, len = 0;
    char *out = malloc(cap);
    *ok = s != NULL;
    for (size_t i = 0; i <= n && *ok; i++) {
        char *p;
        size_t pl;
        int rc = i < n ? tm_detok_stream_push(s, ids[i], &p, &pl, &err) : tm_detok_stream_flush(s, &p, &pl, &err);
        if (rc) {
            fprintf(stderr, "  stream error: %s\n", err.msg);
            *ok = 0;
            break;
        }
        /* every piece must be complete UTF-8 on its own */
        if (pl && (unsigned char)p[0] >= 0x80 && ((unsigned char)p[0] & 0xC0) == 0x80) *ok = 0;
        while (len + pl + 1 > cap) cap *= 2, out = realloc(out, cap);
        memcpy(out + len, p, pl);
        len += pl;
        free(p);
    }
    out[len] = 0;
    *out_len = len;
    tm_detok_stream_free(s);
    return out;
}

/* cJSON strings end at NUL, but the fixtures hold "\u0000": before parsing,
 * \u0000 is swapped for the private-use U+E0FF (absent from the fixtures),
 * and unnul() turns it back into a NUL byte with an explicit length. */
#define NUL_STANDIN "\xEE\x83\xBF"
static void protect_nul(char *js)
{
    char *p = js;
    while ((p = strstr(p, "\\u0000")) != NULL) {
        p[2] = 'E';
        p[3] = '0';
        p[4] = 'F';
        p[5] = 'F';
    }
}

static char *unnul(const char *s, size_t *len)
{
    size_t n = strlen(s), o = 0;
    char *r = malloc(n + 1);
    for (size_t i = 0; i < n;) {
        if (strncmp(s + i, NUL_STANDIN, 3) == 0) {
            r[o++] = 0;
            i += 3;
        } else {
            r[o++] = s[i++];
        }
    }
    r[o] = 0;
    *len = o;
    return r;
}

static int same(const char *a, size_t al, const char *b, size_t bl)
{
    return al == bl && memcmp(a, b, al) == 0;
}

static char *read_text(const char *path)
{
    char *s = NULL;
    tm_err err = {0};
    if (tm_read_file(path, &s, NULL, 0, &err) != TM_OK) fprintf(stderr, "%s\n", err.msg);
    return s;
}

/* ---- 1. conformance ------------------------------------------------------ */

/* dir's tokenizer.json against its tests.json; at least min_cases cases */
/* Section 5: decode(ids[0..1]) + token_bytes(ids[1]) + ... + token_bytes(ids[n-1]), made lossy
 * UTF-8 as a decoder does, against decode(ids); 1 if equal. Cases whose first token is not whole
 * UTF-8 alone (its decode then holds U+FFFD for bytes the next token completes) return -1. */
static int token_bytes_case(const tm_tokenizer *t, const int32_t *ids, size_t n, const char *want, size_t want_len)
{
    if (n == 0) return -1;
    tm_err err = {0};
    char *first = NULL, *b = NULL;
    size_t fl = 0, bl = 0;
    if (tm_tok_decode(t, ids, 1, 0, &first, &fl, &err) != TM_OK) return 0;
    int ok = 1;
    if (strstr(first, "\xEF\xBF\xBD")) ok = -1;
    tok_buf raw = {0}, lossy = {0};
    tok_buf_append(&raw, first, fl);
    for (size_t i = 1; i < n && ok == 1; i++) {
        if (tm_tok_token_bytes(t, ids[i], &b, &bl, &err) != TM_OK) ok = 0;
        else tok_buf_append(&raw, b, bl);
        free(b);
    }
    if (ok == 1) {
        tok_utf8_lossy(&lossy, (const unsigned char *)(raw.p ? raw.p : ""), raw.len);
        ok = same(lossy.p ? lossy.p : "", lossy.len, want, want_len);
        if (!ok) fprintf(stderr, "token bytes: \"%.*s\" want \"%s\"\n", (int)lossy.len, lossy.p ? lossy.p : "", want);
    }
    tok_buf_free(&raw);
    tok_buf_free(&lossy);
    free(first);
    return ok;
}

static void expect_token_bytes(const tm_tokenizer *t, const char *piece, int32_t id, const char *want, size_t want_len,
                               int line)
{
    if (piece) id = tm_tok_piece_to_id(t, piece);
    CHECKF(piece == NULL || id >= 0, "line %d: no piece %s", line, piece);
    char *b = NULL;
    size_t bl = 0;
    tm_err err = {0};
    CHECKF(tm_tok_token_bytes(t, id, &b, &bl, &err) == TM_OK, "line %d: %s", line, err.msg);
    CHECKF(b && same(b, bl, want, want_len), "line %d: token %d bytes \"%.*s\" (%zu), want \"%s\"", line, id, (int)bl,
           b ? b : "", bl, want);
    free(b);
}
#define EXPECT_TOKEN_BYTES(t, piece, want) expect_token_bytes(t, piece, -1, want, sizeof(want) - 1, __LINE__)

static void conformance_dir(const char *dir, const char *name, int min_cases)
{
    char path[600];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    tm_err err = {0};
    tm_tokenizer *t = NULL;
    int rc = tm_tok_load(&t, path, &err);
    CHECKF(rc == TM_OK, "%s: %s", name, err.msg);
    if (rc) return;
    snprintf(path, sizeof path, "%s/tests.json", dir);
    char *js = read_text(path);
    if (js) protect_nul(js);
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    free(js);
    CHECK(root != NULL);
    if (!root) {
        tm_tok_free(t);
        return;
    }
    const cJSON *vs = cJSON_GetObjectItem(root, "vocab_size_with_added");
    CHECK_EQ_INT(tm_tok_vocab_size(t), (int)vs->valuedouble);
    int n_cases = 0, bad_ids = 0, bad_special = 0, bad_dec = 0, bad_skip = 0, bad_stream = 0, bad_bytes = 0, n_bytes = 0;
    const cJSON *cases = cJSON_GetObjectItem(root, "cases");
    for (const cJSON *c = cases->child; c; c = c->next, n_cases++) {
        size_t text_len, dec_len, skip_len;
        char *text = unnul(cJSON_GetObjectItem(c, "text")->valuestring, &text_len);
        const cJSON *want = cJSON_GetObjectItem(c, "ids"), *want_sp = cJSON_GetObjectItem(c, "ids_with_special_tokens");
        char *want_dec = unnul(cJSON_GetObjectItem(c, "decoded")->valuestring, &dec_len);
        char *want_skip = unnul(cJSON_GetObjectItem(c, "decoded_skip_special")->valuestring, &skip_len);
        int32_t *ids = NULL;
        size_t n = 0;
        rc = tm_tok_encode(t, text, text_len, 0, &ids, &n, &err);
        if (rc || !ids_equal(ids, n, want)) {
            bad_ids++;
            fprintf(stderr, "%s case %d ids differ (%s) text=\"%s\"\n", name, n_cases, rc ? err.msg : "", text);
            if (!rc) print_ids("ids", ids, n, want);
        }
        free(ids);
        rc = tm_tok_encode(t, text, text_len, 1, &ids, &n, &err);
        if (rc || !ids_equal(ids, n, want_sp)) {
            bad_special++;
            fprintf(stderr, "%s case %d ids_with_special differ\n", name, n_cases);
        }
        free(ids);
        /* decode the reference ids, so decode is tested independently of encode */
        size_t nr;
        int32_t *ref = json_ids(want, &nr);
        char *dec = NULL;
        size_t dl = 0;
        rc = tm_tok_decode(t, ref, nr, 0, &dec, &dl, &err);
        if (rc || !same(dec, dl, want_dec, dec_len)) {
            bad_dec++;
            fprintf(stderr, "%s case %d decoded \"%s\" want \"%s\"\n", name, n_cases, rc ? err.msg : dec, want_dec);
        }
        free(dec);
        int tb = token_bytes_case(t, ref, nr, want_dec, dec_len);
        n_bytes += tb == 1;
        bad_bytes += tb == 0;
        rc = tm_tok_decode(t, ref, nr, 1, &dec, &dl, &err);
        if (rc || !same(dec, dl, want_skip, skip_len)) {
            bad_skip++;
            fprintf(stderr, "%s case %d decoded_skip \"%s\" want \"%s\"\n", name, n_cases, rc ? err.msg : dec, want_skip);
        }
        free(dec);
        /* streaming: pieces concatenate to the full decode, with and without specials */
        for (int skip = 0; skip < 2; skip++) {
            int ok;
            size_t sl;
            char *s = stream_decode(t, ref, nr, skip, &ok, &sl);
            if (!ok || !(skip ? same(s, sl, want_skip, skip_len) : same(s, sl, want_dec, dec_len))) {
                bad_stream++;
                fprintf(stderr, "%s case %d stream(skip=%d) \"%s\"\n", name, n_cases, skip, s);
            }
            free(s);
        }
        free(ref);
        size_t nsp;
        int32_t *sp = json_ids(want_sp, &nsp);
        rc = tm_tok_decode(t, sp, nsp, 0, &dec, &dl, &err);
        int ok;
        size_t sl;
        char *s = stream_decode(t, sp, nsp, 0, &ok, &sl);
        if (rc || !ok || !same(s, sl, dec, dl)) bad_stream++;
        free(s);
        free(dec);
        free(sp);
        free(text);
        free(want_dec);
        free(want_skip);
    }
    CHECKF(n_cases >= min_cases, "%s: only %d cases", name, n_cases);
    CHECKF(bad_ids == 0, "%s: %d/%d cases with wrong ids", name, bad_ids, n_cases);
    CHECKF(bad_special == 0, "%s: %d/%d cases with wrong ids_with_special_tokens", name, bad_special, n_cases);
    CHECKF(bad_dec == 0, "%s: %d/%d cases with wrong decoded", name, bad_dec, n_cases);
    CHECKF(bad_skip == 0, "%s: %d/%d cases with wrong decoded_skip_special", name, bad_skip, n_cases);
    CHECKF(bad_stream == 0, "%s: %d streamed decodes differ from the full decode", name, bad_stream);
    CHECKF(bad_bytes == 0 && n_bytes >= n_cases * 3 / 4, "%s: token bytes differ in %d cases, %d of %d checked", name,
           bad_bytes, n_bytes, n_cases);
    /* by hand: a byte-level or byte-fallback token of one byte of a 3-byte character gives that byte */
    if (tm_tok_piece_to_id(t, "<0xE2>") >= 0) EXPECT_TOKEN_BYTES(t, "<0xE2>", "\xE2");
    if (tm_tok_piece_to_id(t, "\xE2\x96\x81the") >= 0) EXPECT_TOKEN_BYTES(t, "\xE2\x96\x81the", " the");
    if (tm_tok_piece_to_id(t, "\xC3\xA2") >= 0 && tm_tok_piece_to_id(t, "\xC4\xA0the") >= 0) {
        EXPECT_TOKEN_BYTES(t, "\xC3\xA2", "\xE2"); /* ByteLevel's char for byte 0xE2 */
        EXPECT_TOKEN_BYTES(t, "\xC4\xA0the", " the");
    }
    expect_token_bytes(t, NULL, tm_tok_vocab_size(t) + 5, "", 0, __LINE__); /* unknown id */
    cJSON_Delete(root);
    tm_tok_free(t);
}

static void conformance(const char *name)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/conformance/tokenizers/%s", th_shared(), name);
    conformance_dir(dir, name, 41);
}

/* ---- 2. the demo model and the tiny model fixtures ------------------------ */

static void demo_model(void)
{
    tm_err err = {0};
    tm_tokenizer *t = NULL;
    int rc = tm_tok_load(&t, "models/tiny-classics-llama/tokenizer.json", &err);
    CHECKF(rc == TM_OK, "%s", err.msg);
    char *js = read_text("models/tiny-classics-llama/reference/manifest.json");
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    free(js);
    CHECK(root != NULL);
    if (rc || !root) {
        tm_tok_free(t);
        cJSON_Delete(root);
        return;
    }
    int n_cases = 0;
    for (const cJSON *c = cJSON_GetObjectItem(root, "cases")->child; c; c = c->next, n_cases++) {
        const char *prompt = cJSON_GetObjectItem(c, "prompt")->valuestring;
        int32_t *ids;
        size_t n;
        CHECK_EQ_INT(tm_tok_encode(t, prompt, strlen(prompt), 1, &ids, &n, &err), TM_OK);
        CHECKF(ids_equal(ids, n, cJSON_GetObjectItem(c, "input_ids")), "demo model prompt \"%s\"", prompt);
        free(ids);
        /* the greedy continuation decodes to the recorded text */
        size_t ng;
        int32_t *g = json_ids(cJSON_GetObjectItem(c, "greedy_ids"), &ng);
        char *text;
        size_t tl;
        CHECK_EQ_INT(tm_tok_decode(t, g, ng, 1, &text, &tl, &err), TM_OK);
        CHECK_EQ_STR(text, cJSON_GetObjectItem(c, "greedy_text")->valuestring);
        free(text);
        free(g);
    }
    CHECK(n_cases >= 2);
    cJSON_Delete(root);
    tm_tok_free(t);
}

static void fixture_models(void)
{
    static const char *names[] = {"gemma2", "llama3", "mistral", "phi3", "qwen2", "qwen3", "qwen3_moe"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/conformance/models/%s/hf/tokenizer.json", th_shared(), names[i]);
        tm_err err = {0};
        tm_tokenizer *t = NULL;
        int rc = tm_tok_load(&t, path, &err);
        CHECKF(rc == TM_OK, "%s: %s", names[i], err.msg);
        if (rc) continue;
        /* round trip through the byte-level pipeline */
        const char *text = "Hello world, 123!";
        int32_t *ids;
        size_t n;
        char *back;
        CHECK_EQ_INT(tm_tok_encode(t, text, strlen(text), 0, &ids, &n, &err), TM_OK);
        CHECK_EQ_INT(tm_tok_decode(t, ids, n, 0, &back, NULL, &err), TM_OK);
        CHECK_EQ_STR(back, text);
        free(ids);
        free(back);
        tm_tok_free(t);
    }
}

/* ---- 3. components on inline tokenizer.json ------------------------------ */

static char json_buf[1 << 16];

/* a tokenizer.json from its parts (JSON text each; "null" for none) */
static tm_tokenizer *mk(const char *added, const char *normalizer, const char *pretok, const char *post,
                        const char *decoder, const char *model)
{
    snprintf(json_buf, sizeof json_buf,
             "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":%s,"
             "\"normalizer\":%s,\"pre_tokenizer\":%s,\"post_processor\":%s,\"decoder\":%s,\"model\":%s}",
             added, normalizer, pretok, post, decoder, model);
    tm_err err = {0};
    tm_tokenizer *t = NULL;
    int rc = tm_tok_load_from_string(&t, json_buf, strlen(json_buf), "inline", &err);
    CHECKF(rc == TM_OK, "inline tokenizer: %s", err.msg);
    return t;
}

#define IDS(...) ((const int32_t[]){__VA_ARGS__}), sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)

static void expect_ids(const tm_tokenizer *t, const char *text, int special, const int32_t *want, size_t nw, int line)
{
    if (!t) {
        CHECK(t != NULL);
        return;
    }
    tm_err err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = tm_tok_encode(t, text, strlen(text), special, &ids, &n, &err);
    int ok = rc == TM_OK && n == nw && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    CHECKF(ok, "line %d: encode(\"%s\") %s", line, text, rc ? err.msg : "");
    if (!ok && !rc) {
        fprintf(stderr, "  got [");
        for (size_t i = 0; i < n; i++) fprintf(stderr, "%s%d", i ? "," : "", ids[i]);
        fprintf(stderr, "]\n");
    }
    free(ids);
}
#define EXPECT(t, text, special, ...) expect_ids(t, text, special, IDS(__VA_ARGS__), __LINE__)
#define EXPECT_NONE(t, text, special) expect_ids(t, text, special, NULL, 0, __LINE__)

static void expect_decode(const tm_tokenizer *t, const int32_t *ids, size_t n, int skip, const char *want, int line)
{
    if (!t) return;
    tm_err err = {0};
    char *s = NULL;
    int rc = tm_tok_decode(t, ids, n, skip, &s, NULL, &err);
    CHECKF(rc == TM_OK && strcmp(s, want) == 0, "line %d: decode = \"%s\", want \"%s\"", line, rc ? err.msg : s, want);
    free(s);
}
#define EXPECT_DECODE(t, want, skip, ...) expect_decode(t, IDS(__VA_ARGS__), skip, want, __LINE__)

/* Metaspace with a merge table that exposes where "▁" lands.
 * merges by rank: 0 "▁ a", 1 "▁ b", 2 "a b", 3 "▁a b". */
#define MS_MODEL "{\"type\":\"BPE\",\"vocab\":{\"<unk>\":0,\"▁\":1,\"a\":2,\"b\":3,\"▁a\":4,\"▁b\":5,\"ab\":6,\"▁ab\":7,\"<s>\":8}," \
                 "\"merges\":[\"▁ a\",\"▁ b\",\"a b\",\"▁a b\"],\"unk_token\":\"<unk>\"}"
#define MS_ADDED "[{\"id\":8,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}]"

static void test_metaspace(void)
{
    tm_tokenizer *t = mk(MS_ADDED, "null",
                         "{\"type\":\"Metaspace\",\"replacement\":\"▁\",\"prepend_scheme\":\"first\",\"split\":false}", "null",
                         "{\"type\":\"Metaspace\",\"replacement\":\"▁\",\"prepend_scheme\":\"first\",\"split\":false}", MS_MODEL);
    /* "ab ab" -> "▁ab▁ab" (space replaced, ▁ prepended at offset 0); BPE: "▁ a" (rank 0) twice,
     * then "▁a b" (rank 3) twice -> ▁ab ▁ab */
    EXPECT(t, "ab ab", 0, 7, 7);
    /* "<s>" splits first; "ab" starts at original offset 3, so "first" adds no ▁: "a b" -> ab */
    EXPECT(t, "<s>ab", 0, 8, 6);
    /* already starts with ▁ after replacing the space: nothing prepended */
    EXPECT(t, " ab", 0, 7);
    /* decoder: ▁ of the first token dropped, later ones become spaces */
    EXPECT_DECODE(t, "ab ab", 0, 7, 7);
    EXPECT_DECODE(t, "<s> ab ab", 0, 8, 7, 7); /* only token 0 loses its ▁, and token 0 is <s> (as HF) */
    EXPECT_DECODE(t, "ab ab", 1, 8, 7, 7);
    tm_tok_free(t);

    /* prepend_scheme "always": the piece after an added token gets ▁ too */
    t = mk(MS_ADDED, "null", "{\"type\":\"Metaspace\",\"replacement\":\"▁\",\"prepend_scheme\":\"always\",\"split\":true}", "null",
           "null", MS_MODEL);
    EXPECT(t, "<s>ab", 0, 8, 7);
    /* split=true, MergedWithNext: "▁a▁▁b" -> "▁a" "▁" "▁b" */
    EXPECT(t, "a  b", 0, 4, 1, 5);
    tm_tok_free(t);

    /* legacy add_prefix_space=false means "never" */
    t = mk(MS_ADDED, "null", "{\"type\":\"Metaspace\",\"replacement\":\"▁\",\"add_prefix_space\":false}", "null", "null", MS_MODEL);
    EXPECT(t, "ab", 0, 6);
    tm_tok_free(t);
}

/* a model whose vocabulary holds whole expected pieces: with ignore_merges a
 * pre-token that is a vocabulary entry becomes exactly one id, so the ids
 * spell out the pre-tokenizer's split. */
#define PIECES_MODEL(vocab) "{\"type\":\"BPE\",\"ignore_merges\":true,\"vocab\":{" vocab "},\"merges\":[]}"

static void test_split_behaviors(void)
{
    const char *vocab = PIECES_MODEL("\"a\":0,\"b\":1,\"c\":2,\"-\":3,\"a-\":4,\"b-\":5,\"-b\":6,\"-c\":7,\"--\":8");
    /* "a-b--c" on "-": pieces a|-|b|-|-|c (match flags F T F T T F) */
    static const struct {
        const char *behavior;
        int invert;
        int32_t want[6];
        size_t n;
    } cases[] = {
        {"Removed", 0, {0, 1, 2}, 3},
        {"Isolated", 0, {0, 3, 1, 3, 3, 2}, 6},
        {"MergedWithPrevious", 0, {4, 5, 3, 2}, 4}, /* a- b- - c */
        {"MergedWithNext", 0, {0, 6, 3, 7}, 4},     /* a -b - -c */
        {"Contiguous", 0, {0, 3, 1, 8, 2}, 5},      /* a - b -- c */
        {"Removed", 1, {3, 3, 3}, 3},               /* inverted: the letters are removed */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char pre[256];
        snprintf(pre, sizeof pre, "{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"%s\",\"invert\":%s}",
                 cases[i].behavior, cases[i].invert ? "true" : "false");
        tm_tokenizer *t = mk("[]", "null", pre, "null", "null", vocab);
        expect_ids(t, "a-b--c", 0, cases[i].want, cases[i].n, __LINE__ + (int)i * 1000);
        tm_tok_free(t);
    }
    /* a regex pattern (Oniguruma syntax \h = hex digit) */
    tm_tokenizer *t = mk("[]", "null", "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\h+\"},\"behavior\":\"Isolated\",\"invert\":false}",
                         "null", "null", PIECES_MODEL("\"ab\":0,\"-\":1,\"-xy\":2,\"c\":3"));
    EXPECT(t, "ab-xyc", 0, 0, 2, 3); /* hex runs "ab" and "c" are matches, "-xy" the gap */
    tm_tok_free(t);
}

static void test_word_pretokenizers(void)
{
    const char *vocab = PIECES_MODEL("\"Hello\":0,\",\":1,\"world\":2,\"!\":3,\"123\":4,\"Hello,\":5,\"world!\":6,\" world\":7,"
                                     "\"1\":8,\"2\":9,\"3\":10,\"a\":11,\"12\":12,\"b\":13");
    /* Whitespace: \w+|[^\w\s]+ */
    tm_tokenizer *t = mk("[]", "null", "{\"type\":\"Whitespace\"}", "null", "null", vocab);
    EXPECT(t, "Hello, world! 123", 0, 0, 1, 2, 3, 4);
    tm_tok_free(t);
    /* WhitespaceSplit: only whitespace separates */
    t = mk("[]", "null", "{\"type\":\"WhitespaceSplit\"}", "null", "null", vocab);
    EXPECT(t, "Hello,  world!\t123", 0, 5, 6, 4);
    tm_tok_free(t);
    /* Punctuation (Isolated): the space stays with "world" */
    t = mk("[]", "null", "{\"type\":\"Punctuation\",\"behavior\":\"Isolated\"}", "null", "null", vocab);
    EXPECT(t, "Hello, world!", 0, 0, 1, 7, 3);
    tm_tok_free(t);
    /* BertPreTokenizer: whitespace removed, punctuation isolated */
    t = mk("[]", "null", "{\"type\":\"BertPreTokenizer\"}", "null", "null", vocab);
    EXPECT(t, "Hello, world!", 0, 0, 1, 2, 3);
    tm_tok_free(t);
    /* Digits: individual digits, or contiguous runs */
    t = mk("[]", "null", "{\"type\":\"Digits\",\"individual_digits\":true}", "null", "null", vocab);
    EXPECT(t, "123", 0, 8, 9, 10);
    tm_tok_free(t);
    t = mk("[]", "null", "{\"type\":\"Digits\",\"individual_digits\":false}", "null", "null", vocab);
    EXPECT(t, "a12b", 0, 11, 12, 13);
    EXPECT(t, "123", 0, 4);
    tm_tok_free(t);
    /* Sequence: WhitespaceSplit then Digits(individual) */
    t = mk("[]", "null",
           "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"WhitespaceSplit\"},{\"type\":\"Digits\",\"individual_digits\":true}]}",
           "null", "null", vocab);
    EXPECT(t, "world! 12", 0, 6, 8, 9);
    tm_tok_free(t);
}

static void test_normalizers(void)
{
    /* single characters and a few merges; no pre-tokenizer */
    const char *model = "{\"type\":\"BPE\",\"vocab\":{\"f\":0,\"i\":1,\"fi\":2,\"1\":3,\"e\":4,\"\xcc\x81\":5,\"é\":6,\"h\":7,"
                        "\"l\":8,\"o\":9,\" \":10,\"\xcc\x87\":11,\"a\":12,\"x\":13,\"y\":14,\"ö\":15,\"o\xcc\x88\":16,"
                        "\"\xcc\x88\":17},"
                        "\"merges\":[\"f i\",\"o \xcc\x88\"]}";
    /* NFKC: the ligature ﬁ becomes "fi" (merged), ① becomes "1" */
    tm_tokenizer *t = mk("[]", "{\"type\":\"NFKC\"}", "null", "null", "null", model);
    EXPECT(t, "\xef\xac\x81\xe2\x91\xa0", 0, 2, 3);
    /* NFC also composes a decomposed é that follows ASCII text */
    tm_tok_free(t);
    t = mk("[]", "{\"type\":\"NFC\"}", "null", "null", "null", model);
    EXPECT(t, "fe\xcc\x81", 0, 0, 6);  /* f + (e + U+0301 -> é) */
    EXPECT_NONE(t, "\xef\xac\x81", 0);   /* NFC keeps the ligature: not in the vocabulary, no unk -> dropped */
    tm_tok_free(t);
    /* NFD splits é into e + U+0301; NFKD also decomposes ﬁ */
    t = mk("[]", "{\"type\":\"NFD\"}", "null", "null", "null", model);
    EXPECT(t, "é", 0, 4, 5);
    tm_tok_free(t);
    t = mk("[]", "{\"type\":\"NFKD\"}", "null", "null", "null", model);
    EXPECT(t, "\xef\xac\x81ö", 0, 2, 16); /* ö -> o + U+0308, merged by "o ̈" */
    tm_tok_free(t);
    /* Lowercase: char::to_lowercase, incl. İ -> i + U+0307 */
    t = mk("[]", "{\"type\":\"Lowercase\"}", "null", "null", "null", model);
    EXPECT(t, "HeLLo \xc4\xb0", 0, 7, 4, 8, 8, 9, 10, 1, 11);
    tm_tok_free(t);
    /* Sequence[Strip, Replace(regex \s+ -> " "), Prepend("x")] */
    t = mk("[]",
           "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":true},"
           "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"\\\\s+\"},\"content\":\" \"},{\"type\":\"Prepend\",\"prepend\":\"x\"}]}",
           "null", "null", "null", model);
    EXPECT(t, "  a \t\n a  ", 0, 13, 12, 10, 12);
    EXPECT_NONE(t, "   ", 0); /* stripped to "", and Prepend leaves an empty string alone */
    tm_tok_free(t);
    /* StripAccents after NFD removes the combining mark */
    t = mk("[]", "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFD\"},{\"type\":\"StripAccents\"}]}", "null", "null",
           "null", model);
    EXPECT(t, "éö", 0, 4, 9);
    tm_tok_free(t);
}

static void test_added_tokens(void)
{
    const char *model = "{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\" \":3,\"h\":4,\"e\":5,\"l\":6,\"o\":7},\"merges\":[]}";
    /* ids are assigned as HF does: the model has 8 entries, so 8, 9, ... */
    tm_tokenizer *t = mk("[{\"id\":8,\"content\":\"<m>\",\"lstrip\":true,\"rstrip\":false,\"single_word\":false,\"normalized\":false,\"special\":true},"
                         "{\"id\":9,\"content\":\"<n>\",\"lstrip\":false,\"rstrip\":true,\"single_word\":false,\"normalized\":false,\"special\":true},"
                         "{\"id\":10,\"content\":\"ab\",\"lstrip\":false,\"rstrip\":false,\"single_word\":true,\"normalized\":false,\"special\":false},"
                         "{\"id\":11,\"content\":\"<x>\",\"lstrip\":false,\"rstrip\":false,\"single_word\":false,\"normalized\":false,\"special\":true},"
                         "{\"id\":12,\"content\":\"<x><y>\",\"lstrip\":false,\"rstrip\":false,\"single_word\":false,\"normalized\":false,\"special\":true},"
                         "{\"id\":13,\"content\":\"HELLO\",\"lstrip\":false,\"rstrip\":false,\"single_word\":false,\"normalized\":true,\"special\":false}]",
                         "{\"type\":\"Lowercase\"}", "null", "null", "null", model);
    /* lstrip: the space before <m> is swallowed by the token */
    EXPECT(t, "a <m> b", 0, 0, 8, 3, 1);
    /* rstrip: the space after <n> is swallowed */
    EXPECT(t, "a <n> b", 0, 0, 3, 9, 1);
    /* single_word: "ab" only where it is not inside a word ("cab" has a word char before it) */
    EXPECT(t, "ab cab ab", 0, 10, 3, 2, 0, 1, 3, 10);
    /* longest match wins */
    EXPECT(t, "<x><y><x>", 0, 12, 11);
    /* normalized token: matched in the lowercased text ("HELLO" -> "hello") */
    EXPECT(t, "a HeLLo", 0, 0, 3, 13);
    CHECK_EQ_INT(tm_tok_piece_to_id(t, "<x><y>"), 12);
    CHECK_EQ_INT(tm_tok_piece_to_id(t, "c"), 2);
    CHECK_EQ_INT(tm_tok_piece_to_id(t, "zz"), -1);
    CHECK_EQ_STR(tm_tok_id_to_piece(t, 9), "<n>");
    CHECK(tm_tok_id_to_piece(t, 99) == NULL);
    CHECK(tm_tok_is_special(t, 8) && !tm_tok_is_special(t, 10) && !tm_tok_is_special(t, 0));
    CHECK_EQ_INT(tm_tok_vocab_size(t), 14);
    /* no decoder: tokens joined with " "; skip_special drops <m> but not "ab" */
    EXPECT_DECODE(t, "a <m> ab", 0, 0, 8, 10);
    EXPECT_DECODE(t, "a ab", 1, 0, 8, 10);
    tm_tok_free(t);
}

/* Gemma-style SentencePiece BPE: Replace(" " -> "▁") without Prepend, byte
 * fallback, <bos> template, decoder Replace/ByteFallback/Fuse (no Strip). */
static void test_gemma_style(void)
{
    const char *model = "{\"type\":\"BPE\",\"byte_fallback\":true,\"fuse_unk\":true,\"unk_token\":\"<unk>\","
                        "\"vocab\":{\"<pad>\":0,\"<eos>\":1,\"<bos>\":2,\"<unk>\":3,\"<0xC3>\":4,\"<0xA9>\":5,\"<0xE2>\":6,"
                        "\"<0x82>\":7,\"<0xAC>\":8,\"H\":9,\"i\":10,\"▁\":11,\"t\":12,\"h\":13,\"e\":14,\"r\":15,\"Hi\":16,"
                        "\"▁t\":17,\"he\":18,\"▁the\":19,\"▁there\":20,\"re\":21},"
                        "\"merges\":[[\"H\",\"i\"],[\"▁\",\"t\"],[\"h\",\"e\"],[\"▁t\",\"he\"],[\"r\",\"e\"],[\"▁the\",\"re\"]]}";
    const char *added = "[{\"id\":0,\"content\":\"<pad>\",\"special\":true,\"normalized\":false,\"lstrip\":false,\"rstrip\":false,\"single_word\":false},"
                        "{\"id\":1,\"content\":\"<eos>\",\"special\":true,\"normalized\":false,\"lstrip\":false,\"rstrip\":false,\"single_word\":false},"
                        "{\"id\":2,\"content\":\"<bos>\",\"special\":true,\"normalized\":false,\"lstrip\":false,\"rstrip\":false,\"single_word\":false},"
                        "{\"id\":3,\"content\":\"<unk>\",\"special\":true,\"normalized\":false,\"lstrip\":false,\"rstrip\":false,\"single_word\":false}]";
    const char *post = "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<bos>\",\"type_id\":0}},"
                       "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],"
                       "\"special_tokens\":{\"<bos>\":{\"id\":\"<bos>\",\"ids\":[2],\"tokens\":[\"<bos>\"]}}}";
    const char *dec = "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"▁\"},\"content\":\" \"},"
                      "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]}";
    tm_tokenizer *t = mk(added, "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"▁\"}", "null", post, dec, model);
    /* "Hi there" -> "Hi▁there": H i (rank 0) -> Hi; ▁ t (1); h e (2); ▁t he (3); r e (4); ▁the re (5) */
    EXPECT(t, "Hi there", 0, 16, 20);
    EXPECT(t, "Hi there", 1, 2, 16, 20);
    /* é is not in the vocabulary: byte fallback <0xC3><0xA9>; "x" has no bytes... it does: but <0x78> is absent -> unk */
    EXPECT(t, "é", 0, 4, 5);
    EXPECT(t, "xx", 0, 3); /* two unknown chars, fuse_unk -> one <unk> */
    /* a leading space is kept on decode (no Strip decoder in Gemma) */
    EXPECT(t, " the", 0, 19);
    EXPECT_DECODE(t, " the", 0, 19);
    EXPECT_DECODE(t, "<bos>Hi there€", 0, 2, 16, 20, 6, 7, 8);
    EXPECT_DECODE(t, "Hi there€", 1, 2, 16, 20, 6, 7, 8);
    /* invalid byte sequences decode to one U+FFFD per byte */
    EXPECT_DECODE(t, "\xef\xbf\xbd\xef\xbf\xbdHi", 0, 6, 7, 16);
    /* streaming: the three bytes of € arrive one by one; nothing is emitted until complete */
    tm_detok_stream *s = tm_detok_stream_new(t, 1);
    tm_err err = {0};
    const int32_t seq[] = {2, 16, 6, 7, 8, 20};
    const char *want[] = {"", "Hi", "", "", "€", " there"};
    for (size_t i = 0; i < 6; i++) {
        char *p;
        size_t pl;
        CHECK_EQ_INT(tm_detok_stream_push(s, seq[i], &p, &pl, &err), TM_OK);
        CHECKF(strcmp(p, want[i]) == 0, "stream step %zu: \"%s\" want \"%s\"", i, p, want[i]);
        free(p);
    }
    tm_detok_stream_free(s);
    tm_tok_free(t);
}

static void test_post_and_decoders(void)
{
    const char *model = "{\"type\":\"BPE\",\"vocab\":{\"<s>\":0,\"</s>\":1,\"a\":2,\"b\":3,\"__x\":4,\"y\":5},\"merges\":[]}";
    /* RobertaProcessing: <s> A </s>; a Sequence of two templates wraps twice */
    tm_tokenizer *t = mk("[]", "null", "null", "{\"type\":\"RobertaProcessing\",\"sep\":[\"</s>\",1],\"cls\":[\"<s>\",0]}", "null", model);
    EXPECT(t, "ab", 1, 0, 2, 3, 1);
    EXPECT(t, "ab", 0, 2, 3);
    tm_tok_free(t);
    t = mk("[]", "null", "null",
           "{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\"},{\"type\":\"BertProcessing\",\"sep\":[\"</s>\",1],\"cls\":[\"<s>\",0]}]}",
           "null", model);
    EXPECT(t, "a", 1, 0, 2, 1);
    tm_tok_free(t);
    /* Strip decoder: at most `start` leading / `stop` trailing content chars per token */
    t = mk("[]", "null", "null", "null",
           "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"_+\"},\"content\":\"-\"},"
           "{\"type\":\"Strip\",\"content\":\"-\",\"start\":1,\"stop\":1}]}",
           model);
    EXPECT_DECODE(t, "xay", 0, 4, 2, 5); /* "__x" -> "-x" -> "x" */
    tm_tok_free(t);
    /* BPEDecoder: the suffix marks word ends */
    t = mk("[]", "null", "null", "null", "{\"type\":\"BPEDecoder\",\"suffix\":\"_x\"}", model);
    EXPECT_DECODE(t, "_ a_", 0, 4, 2, 4); /* "__x" -> "_ ", "a", last "__x" -> "_" */
    tm_tok_free(t);
    /* ByteLevel decoder: a lone continuation byte is invalid UTF-8 -> U+FFFD */
    t = mk("[]", "null", "null", "null", "{\"type\":\"ByteLevel\"}",
           "{\"type\":\"BPE\",\"vocab\":{\"â\":0,\"Ħ\":1,\"¢\":2,\"a\":3},\"merges\":[]}");
    EXPECT_DECODE(t, "\xe2\x84\xa2", 0, 0, 1, 2); /* byte-level chars of E2 84 A2 (™): â Ħ ¢ */
    EXPECT_DECODE(t, "\xef\xbf\xbd" "a", 0, 0, 3);
    tm_tok_free(t);
}

/* streamed pieces concatenate to the full decode */
static void expect_stream_exact(const tm_tokenizer *t, const int32_t *ids, size_t n, int line)
{
    if (!t) return;
    for (int skip = 0; skip < 2; skip++) {
        tm_err err = {0};
        char *full = NULL;
        size_t fl = 0, sl = 0;
        int ok;
        CHECK_EQ_INT(tm_tok_decode(t, ids, n, skip, &full, &fl, &err), TM_OK);
        char *s = stream_decode(t, ids, n, skip, &ok, &sl);
        CHECKF(ok && full && same(s, sl, full, fl), "line %d skip %d: stream \"%s\" full \"%s\"", line, skip, s, full);
        free(s);
        free(full);
    }
}
#define EXPECT_STREAM(t, ...) expect_stream_exact(t, IDS(__VA_ARGS__), __LINE__)

static void test_stream_cases(void)
{
    /* SentencePiece-style decoder; runs of ▁ next to skipped specials, and a Strip
     * that removes up to 3 leading spaces (not window-safe: streamed exactly anyway) */
    const char *model = "{\"type\":\"BPE\",\"vocab\":{\"<s>\":0,\"</s>\":1,\"▁\":2,\"a\":3,\"▁a\":4,\"<0xC3>\":5,\"<0xA9>\":6},\"merges\":[]}";
    const char *added = "[{\"id\":0,\"content\":\"<s>\",\"special\":true},{\"id\":1,\"content\":\"</s>\",\"special\":true}]";
    /* start 1-3 with stop 0, then stops 1 and 2: a trailing strip is never window-safe (a space
     * held back at a window's end was lost once the window slid: found by fuzz_tokenizer) */
    static const int strips[][2] = {{1, 0}, {2, 0}, {3, 0}, {1, 1}, {0, 1}, {1, 2}};
    for (size_t k = 0; k < sizeof strips / sizeof strips[0]; k++) {
        int start = strips[k][0], stop = strips[k][1];
        char dec[512];
        snprintf(dec, sizeof dec,
                 "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"▁\"},\"content\":\" \"},"
                 "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":%d,\"stop\":%d}]}",
                 start, stop);
        tm_tokenizer *t = mk(added, "null", "null", "null", dec, model);
        EXPECT_STREAM(t, 0, 2, 2, 2, 3, 1, 2, 2, 4, 1, 2, 2);
        EXPECT_STREAM(t, 2, 2, 5, 6, 4, 0, 2, 5, 6, 2, 1);
        EXPECT_STREAM(t, 1, 1, 2);
        EXPECT_STREAM(t, 3, 2, 2, 2, 3, 2, 3, 2, 2); /* runs of spaces inside and at the end */
        tm_tok_free(t);
    }
}

/* WordPiece and the BERT normalizer where Tokenizers.js (the fixtures' oracle) differs from the
 * Rust library, and the model's edges; expectations by hand from the Rust sources
 * (normalizers/bert.rs, models/wordpiece, decoders/wordpiece.rs) */
#define WP_VOCAB "\"[UNK]\":0,\"a\":1,\"b\":2,\"##b\":3,\"\xf0\xa0\x80\x80\":4,\"οδοσ\":5,\"οδος\":6,\"i\":7,\"ab\":8," \
                 "\"cafe\":9,\"Cafe\":10,\"café\":11,\"\xe0\xa4\x95\xe0\xa4\xbe\":12,\"\xe0\xa4\x95\":13,\"abc\":14,\"##c\":15"
static void test_wordpiece(void)
{
    const char *model = "{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\","
                        "\"max_input_chars_per_word\":4,\"vocab\":{" WP_VOCAB "}}";
    const char *bert = "{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,"
                       "\"strip_accents\":null,\"lowercase\":true}";
    const char *pre = "{\"type\":\"BertPreTokenizer\"}";
    tm_tokenizer *t = mk("[]", bert, pre, "null", "{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true}", model);
    /* a CJK ideograph beyond the BMP (U+20000, extension B) is spaced out like the others */
    EXPECT(t, "a\xf0\xa0\x80\x80" "b", 0, 1, 4, 2);
    /* lowercasing is char by char: a final capital sigma becomes σ, not ς */
    EXPECT(t, "ΟΔΟΣ", 0, 5);
    /* accents are stripped before lowercasing: İ -> I + U+0307 -> I -> i */
    EXPECT(t, "\xc4\xb0", 0, 7);
    /* clean_text drops unassigned code points (Cn, U+0378), controls and format chars; keeps tab/LF/CR as spaces */
    EXPECT(t, "a\xcd\xb8" "b\x07\xe2\x80\x8b", 0, 8);
    EXPECT(t, "a\tb\r\nb", 0, 1, 2, 2);
    /* only Mn marks go: the Mc vowel sign in का stays, the Mn U+0301 goes */
    EXPECT(t, "\xe0\xa4\x95\xe0\xa4\xbe", 0, 12);
    EXPECT(t, "cafe\xcc\x81", 0, 9);
    /* greedy longest match, "##" pieces after the first; a word that cannot be covered is one unk,
     * and so is one over max_input_chars_per_word (4), while 4 characters are still matched */
    EXPECT(t, "abc abb", 0, 14, 8, 3);
    EXPECT(t, "abx", 0, 0);
    EXPECT(t, "abcbb", 0, 0);
    EXPECT(t, "abcb", 0, 14, 3);
    EXPECT(t, "bbb", 0, 2, 3, 3);
    /* decoder: "##" pieces join, others get a space, cleanup per token (" ." would need one token) */
    EXPECT_DECODE(t, "abc b", 0, 8, 15, 2);
    EXPECT_DECODE(t, "##b a", 0, 3, 1); /* the first token keeps its prefix */
    /* token bytes are the middle of a text: "##b" joins, "ab" gets its space */
    EXPECT_TOKEN_BYTES(t, "##b", "b");
    EXPECT_TOKEN_BYTES(t, "ab", " ab");
    tm_tok_free(t);
    /* strip_accents given explicitly wins over lowercase, both ways */
    t = mk("[]", "{\"type\":\"BertNormalizer\",\"strip_accents\":true,\"lowercase\":false}", pre, "null", "null", model);
    EXPECT(t, "Cafe\xcc\x81", 0, 10);
    tm_tok_free(t);
    t = mk("[]", "{\"type\":\"BertNormalizer\",\"strip_accents\":false,\"lowercase\":true}", pre, "null", "null", model);
    EXPECT(t, "CAFÉ", 0, 11);
    tm_tok_free(t);
    /* an empty decoder prefix: every token starts with it, so nothing is stripped and no space added */
    t = mk("[]", "null", pre, "null", "{\"type\":\"WordPiece\",\"prefix\":\"\",\"cleanup\":false}", model);
    EXPECT_DECODE(t, "ab##b", 0, 1, 2, 3);
    tm_tok_free(t);
    /* no model type: max_input_chars_per_word names WordPiece (HF's untagged fallback) */
    t = mk("[]", "null", pre, "null", "null", "{\"unk_token\":\"[UNK]\",\"max_input_chars_per_word\":100,\"vocab\":{" WP_VOCAB "}}");
    EXPECT(t, "abc x", 0, 14, 0);
    tm_tok_free(t);
    /* an unk token missing from the vocabulary is an error once a word needs it */
    t = mk("[]", "null", pre, "null", "null", "{\"type\":\"WordPiece\",\"unk_token\":\"<unk>\",\"vocab\":{" WP_VOCAB "}}");
    if (t) {
        EXPECT(t, "ab", 0, 8);
        tm_err err = {0};
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK_EQ_INT(tm_tok_encode(t, "zz", 2, 0, &ids, &n, &err), TM_E_FORMAT);
        CHECK(strstr(err.msg, "model.unk_token: '<unk>' is not in model.vocab") != NULL);
        free(ids);
        tm_tok_free(t);
    }
}

/* Unigram: Viterbi over the pieces' log probabilities, HF's tie order, unk fusing and byte fallback,
 * duplicated pieces; the Precompiled normalizer's whole-cluster rule (tools/gen_unigram_fixtures.py's
 * byte-fallback fixture has rules for "e" U+0301 -> "é" and "a" U+0300 -> "à") */
#define UNI_VOCAB "[[\"<unk>\",0],[\"a\",-1],[\"b\",-2],[\"ab\",-2.5],[\"abc\",-4],[\"c\",-3],[\"d\",-1],"  \
                  "[\"e\",-1],[\"de\",-2],[\"c\",-0.5],[\"<0x78>\",-1],[\"<0x79>\",-1]]"
static void test_unigram(void)
{
    tm_tokenizer *t = mk("[]", "null", "null", "null", "null",
                         "{\"type\":\"Unigram\",\"unk_id\":0,\"byte_fallback\":true,\"vocab\":" UNI_VOCAB "}");
    /* ab (-2.5) over a + b (-3); abc (-4) over ab + c (the last "c": -2.5 - 0.5 = -3.0, better!) */
    EXPECT(t, "ab", 0, 3);
    EXPECT(t, "abc", 0, 3, 9);
    /* a tie (d + e = de = -2): the piece found first, from the earlier start, stays */
    EXPECT(t, "de", 0, 8);
    /* unknown characters fuse into one string: its bytes where all have <0xXX> pieces, else unk */
    EXPECT(t, "abxy", 0, 3, 10, 11);
    EXPECT(t, "xz", 0, 0);
    EXPECT(t, "a\xe2\x98\x83" "b", 0, 1, 0, 2);
    /* a duplicated piece: the vocabulary's id is the last, every index keeps its text (HF id_to_token) */
    CHECK(tm_tok_id_to_piece(t, 5) && strcmp(tm_tok_id_to_piece(t, 5), "c") == 0);
    CHECK_EQ_INT(tm_tok_piece_to_id(t, "c"), 9);
    CHECK_EQ_INT(tm_tok_vocab_size(t), 12);
    tm_tok_free(t);
    /* no unk_id: unknown text is an error naming the field, known text is fine; no type: an array vocab is Unigram */
    t = mk("[]", "null", "null", "null", "null", "{\"vocab\":" UNI_VOCAB "}");
    if (t) {
        EXPECT(t, "abc", 0, 3, 9);
        tm_err err = {0};
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK_EQ_INT(tm_tok_encode(t, "aq", 2, 0, &ids, &n, &err), TM_E_FORMAT);
        CHECK(strstr(err.msg, "model.unk_id") != NULL);
        free(ids);
        tm_tok_free(t);
    }
    /* Precompiled, HF's way: "e" U+0301 U+0302 is one cluster of 5 bytes that the "e" U+0301 rule starts,
     * so all of it becomes "é" (SentencePiece would keep the U+0302); from 6 bytes on, character by
     * character, where no rule starts "e" or U+0301 alone: the marks stay, as byte-fallback pieces */
    tm_err err = {0};
    CHECK_EQ_INT(tm_tok_load(&t, "tests/data/tokenizers/unigram-bytes/tokenizer.json", &err), TM_OK);
    if (t) {
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        CHECK_EQ_INT(tm_tok_encode(t, "e\xcc\x81\xcc\x82", 5, 0, &a, &na, &err), TM_OK);
        CHECK_EQ_INT(tm_tok_encode(t, "\xc3\xa9", 2, 0, &b, &nb, &err), TM_OK);
        CHECK(na == nb && na > 0 && memcmp(a, b, na * sizeof *a) == 0);
        free(a);
        a = NULL;
        CHECK_EQ_INT(tm_tok_encode(t, "e\xcc\x81\xcc\x82\xcc\x83", 7, 0, &a, &na, &err), TM_OK);
        int32_t cc = tm_tok_piece_to_id(t, "<0xCC>"), x81 = tm_tok_piece_to_id(t, "<0x81>");
        int seen = 0;
        for (size_t i = 0; i + 1 < na; i++) seen |= a[i] == cc && a[i + 1] == x81;
        CHECKF(cc >= 0 && x81 >= 0 && seen, "a 7-byte cluster keeps its U+0301 (%zu ids)", na);
        free(a);
        free(b);
        tm_tok_free(t);
    }
}

/* WordLevel (each pre-token one entry, else unk_token) and the Nmt normalizer (controls dropped,
 * other spaces to ' ') */
static void test_wordlevel_nmt(void)
{
    const char *wl = "{\"type\":\"WordLevel\",\"unk_token\":\"<unk>\",\"vocab\":{\"<unk>\":0,\"a\":1,\"b\":2,\"ab\":4}}";
    tm_tokenizer *t = mk("[]", "{\"type\":\"Nmt\"}", "{\"type\":\"WhitespaceSplit\"}", "null", "null", wl);
    EXPECT(t, "a b ab", 0, 1, 2, 4);
    EXPECT(t, "a c", 0, 1, 0);
    EXPECT(t, "a\x01" "b a\x7f" "b a\xc2\x8f" "b", 0, 4, 4, 4);               /* U+0001, U+007F, U+008F dropped */
    EXPECT(t, "a\tb a\xe2\x80\x8b" "b a\xef\xbb\xbf" "b a\xe2\x96\x81" "b", 0, 1, 2, 1, 2, 1, 2, 1, 2); /* to ' ' */
    tm_tok_free(t);
    /* no unk_token in the vocabulary: an error once a pre-token needs it; no type: unk_token names WordLevel */
    t = mk("[]", "null", "{\"type\":\"WhitespaceSplit\"}", "null", "null",
           "{\"unk_token\":\"[UNK]\",\"vocab\":{\"a\":0,\"b\":1}}");
    if (t) {
        EXPECT(t, "b a", 0, 1, 0);
        tm_err err = {0};
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK_EQ_INT(tm_tok_encode(t, "a z", 3, 0, &ids, &n, &err), TM_E_FORMAT);
        CHECK(strstr(err.msg, "model.unk_token: '[UNK]' is not in model.vocab") != NULL);
        free(ids);
        tm_tok_free(t);
    }
}

/* ---- 4. malformed files and concurrency ---------------------------------- */

static void expect_load_error(const char *json, int code, const char *needle, int line)
{
    tm_err err = {0};
    tm_tokenizer *t = NULL;
    int rc = tm_tok_load_from_string(&t, json, strlen(json), "bad.json", &err);
    CHECKF(rc == code && t == NULL && strstr(err.msg, needle) != NULL, "line %d: rc %d, msg \"%s\" (want %d, \"%s\")", line,
           rc, err.msg, code, needle);
    CHECKF(strncmp(err.msg, "bad.json: ", 10) == 0, "line %d: message does not name the file: %s", line, err.msg);
    tm_tok_free(t);
}
#define EXPECT_LOAD_ERROR(json, code, needle) expect_load_error(json, code, needle, __LINE__)

static void test_malformed(void)
{
#define BPE_OK "{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}"
    EXPECT_LOAD_ERROR("{\"model\": ", TM_E_FORMAT, "not valid JSON");
    EXPECT_LOAD_ERROR("[1,2]", TM_E_FORMAT, "not a JSON object");
    EXPECT_LOAD_ERROR("{\"added_tokens\":[]}", TM_E_FORMAT, "model: missing");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"WordLevelX\",\"vocab\":{}}}", TM_E_UNSUPPORTED, "model.type: model type 'WordLevelX'");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"WordLevel\",\"vocab\":[]}}", TM_E_FORMAT, "model.vocab: missing or not an object");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", TM_E_FORMAT, "model.vocab: empty");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",-1],[\"b\"]]}}", TM_E_FORMAT,
                      "model.vocab[1]: expected [piece, score]");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"Unigram\",\"unk_id\":2,\"vocab\":[[\"a\",-1],[\"b\",-2]]}}", TM_E_FORMAT,
                      "model.unk_id");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"Unigram\",\"vocab\":{\"a\":0}}}", TM_E_FORMAT, "model.vocab: missing or not an array");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a c\"]}}", TM_E_FORMAT,
                      "model.merges[0]: token 'c' is not in model.vocab");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"c\":1},\"merges\":[[\"a\",\"c\"]]}}", TM_E_FORMAT,
                      "merged token 'ac' is not in model.vocab");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-4},\"merges\":[]}}", TM_E_FORMAT, "model.vocab[\"a\"]");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", TM_E_FORMAT, "model.merges: missing");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":2000000000},\"merges\":[]}}", TM_E_FORMAT, "model.vocab");
    EXPECT_LOAD_ERROR("{\"model\":" BPE_OK ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
                      "\"pattern\":{\"Regex\":\"(a\"},\"behavior\":\"Isolated\"}]}}",
                      TM_E_FORMAT, "pre_tokenizer.pretokenizers[0].pattern.Regex: bad regex");
    EXPECT_LOAD_ERROR("{\"model\":" BPE_OK ",\"pre_tokenizer\":{\"type\":\"UnicodeScripts\"}}", TM_E_UNSUPPORTED,
                      "pre_tokenizer.type: pre_tokenizer type 'UnicodeScripts'");
    EXPECT_LOAD_ERROR("{\"model\":" BPE_OK ",\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},"
                      "{\"type\":\"ByteLevel\"}]}}",
                      TM_E_UNSUPPORTED, "normalizer.normalizers[1].type: normalizer type 'ByteLevel'");
    /* Precompiled: no charsmap, not base64, shorter than its trie, replacement strings not UTF-8 */
    EXPECT_LOAD_ERROR("{\"model\":" BPE_OK ",\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":null}}",
                      TM_E_FORMAT, "normalizer.precompiled_charsmap: missing or not a string");
    EXPECT_LOAD_ERROR("{\"model\":" BPE_OK ",\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"AAA*\"}}",
                      TM_E_FORMAT, "normalizer.precompiled_charsmap: not valid base64");
    EXPECT_LOAD_ERROR("{\"model\":" BPE_OK ",\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"CAAAAAAA\"}}",
                      TM_E_FORMAT, "too short for its trie of 8");
    EXPECT_LOAD_ERROR("{\"model\":" BPE_OK ",\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"AAAAAP8=\"}}",
                      TM_E_FORMAT, "replacement strings are not valid UTF-8");
    EXPECT_LOAD_ERROR("{\"model\":" BPE_OK ",\"decoder\":{\"type\":\"CTC\"}}", TM_E_UNSUPPORTED,
                      "decoder.type: decoder type 'CTC'");
    EXPECT_LOAD_ERROR("{\"model\":" BPE_OK ",\"decoder\":{\"type\":\"WordPiece\",\"cleanup\":3}}", TM_E_FORMAT,
                      "decoder.cleanup");
    EXPECT_LOAD_ERROR("{\"model\":" BPE_OK ",\"normalizer\":{\"type\":\"BertNormalizer\",\"lowercase\":\"yes\"}}",
                      TM_E_FORMAT, "normalizer.lowercase");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"WordPiece\",\"unk_token\":7,\"vocab\":{}}}", TM_E_FORMAT, "model.unk_token");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"WordPiece\",\"unk_token\":null,\"vocab\":{}}}", TM_E_FORMAT,
                      "model.unk_token");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"WordPiece\",\"max_input_chars_per_word\":-1,\"vocab\":{}}}", TM_E_FORMAT,
                      "model.max_input_chars_per_word");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"WordPiece\",\"vocab\":[]}}", TM_E_FORMAT, "model.vocab");
    EXPECT_LOAD_ERROR("{\"model\":{\"vocab\":{\"a\":0}}}", TM_E_UNSUPPORTED, "model.type: missing");
    EXPECT_LOAD_ERROR("{\"model\":" BPE_OK ",\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":"
                      "[{\"SpecialToken\":{\"id\":\"<s>\"}}],\"special_tokens\":{}}}",
                      TM_E_FORMAT, "post_processor.special_tokens");
    EXPECT_LOAD_ERROR("{\"model\":" BPE_OK ",\"added_tokens\":[{\"id\":3}]}", TM_E_FORMAT, "added_tokens[0].content");
    EXPECT_LOAD_ERROR("{\"model\":" BPE_OK ",\"truncation\":{\"max_length\":5}}", TM_E_UNSUPPORTED, "truncation");
    EXPECT_LOAD_ERROR("{\"model\":{\"type\":\"BPE\",\"dropout\":0.1,\"vocab\":{},\"merges\":[]}}", TM_E_UNSUPPORTED, "model.dropout");
    /* nesting is bounded */
    char deep[4096] = "{\"model\":" BPE_OK ",\"normalizer\":";
    for (int i = 0; i < 40; i++) strcat(deep, "{\"type\":\"Sequence\",\"normalizers\":[");
    strcat(deep, "{\"type\":\"NFC\"}");
    for (int i = 0; i < 40; i++) strcat(deep, "]}");
    strcat(deep, "}");
    EXPECT_LOAD_ERROR(deep, TM_E_FORMAT, "nested too deeply");
    /* a truncated real file */
    char path[512];
    snprintf(path, sizeof path, "%s/conformance/models/llama3/hf/tokenizer.json", th_shared());
    char *js = read_text(path);
    if (js) {
        tm_err err = {0};
        tm_tokenizer *t = NULL;
        CHECK_EQ_INT(tm_tok_load_from_string(&t, js, strlen(js) / 2, "half.json", &err), TM_E_FORMAT);
        CHECK(strstr(err.msg, "half.json") != NULL);
        free(js);
    }
    /* a missing file names the path */
    tm_err err = {0};
    tm_tokenizer *t = NULL;
    CHECK(tm_tok_load(&t, "build/no-such-tokenizer.json", &err) != TM_OK);
    CHECK(strstr(err.msg, "build/no-such-tokenizer.json") != NULL);
    /* invalid UTF-8 input text is refused, not mangled */
    t = mk("[]", "null", "null", "null", "null", BPE_OK);
    if (t) {
        int32_t *ids;
        size_t n;
        CHECK_EQ_INT(tm_tok_encode(t, "a\xff", 2, 0, &ids, &n, &err), TM_E_INVALID);
        CHECK(strstr(err.msg, "UTF-8") != NULL);
        tm_tok_free(t);
    }
    /* a backtracking-heavy regex on a long input outgrows the default JIT stack and still works */
    t = mk("[]", "null", "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?:a|b)+\"},\"behavior\":\"Isolated\",\"invert\":false}",
           "null", "null", BPE_OK);
    if (t) {
        size_t n_a = 20000;
        char *text = malloc(n_a + 2);
        memset(text, 'a', n_a);
        text[n_a] = 'b';
        text[n_a + 1] = 0;
        int32_t *ids = NULL;
        size_t n = 0;
        int rc = tm_tok_encode(t, text, n_a + 1, 0, &ids, &n, &err);
        /* one piece "aaa...ab": BPE merges only the final "a b" */
        CHECKF(rc == TM_OK && n == n_a && ids[0] == 0 && ids[n_a - 1] == 2, "rc %d n %zu %s", rc, n, err.msg);
        free(ids);
        free(text);
        tm_tok_free(t);
    }
    /* an exponential regex is stopped by the match limit with an error, not a hang */
    t = mk("[]", "null", "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(a|aa)+$\"},\"behavior\":\"Isolated\",\"invert\":false}",
           "null", "null", BPE_OK);
    if (t) {
        char text[200];
        memset(text, 'a', sizeof text - 2);
        text[sizeof text - 2] = 'b';
        text[sizeof text - 1] = 0;
        int32_t *ids = NULL;
        size_t n;
        int rc = tm_tok_encode(t, text, strlen(text), 0, &ids, &n, &err);
        CHECKF(rc == TM_E_LIMIT, "rc %d %s", rc, err.msg);
        free(ids);
        tm_tok_free(t);
    }
}

typedef struct job {
    const tm_tokenizer *t;
    const char *text;
    size_t len;
    int32_t *ids;
    size_t n;
    int rc;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    tm_err err = {0};
    j->rc = tm_tok_encode(j->t, j->text, j->len, 1, &j->ids, &j->n, &err);
    return NULL;
}

static void test_threads(void)
{
    tm_err err = {0};
    tm_tokenizer *t = NULL;
    char *text = read_text("models/tiny-classics-llama/heldout.txt");
    if (tm_tok_load(&t, "models/tiny-classics-llama/tokenizer.json", &err) != TM_OK || !text) {
        CHECK(0);
        free(text);
        tm_tok_free(t);
        return;
    }
    size_t len = strlen(text);
    if (getenv("TM_SANITIZER") && len > 100000) len = 100000;
    while (len && ((unsigned char)text[len] & 0xC0) == 0x80) len--; /* cut at a character boundary */
    job ref = {t, text, len, NULL, 0, 0};
    run_job(&ref);
    CHECK_EQ_INT(ref.rc, TM_OK);
    job jobs[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        jobs[i] = (job){t, text, len, NULL, 0, 0};
        pthread_create(&th[i], NULL, run_job, &jobs[i]);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i].rc == TM_OK && jobs[i].n == ref.n && memcmp(jobs[i].ids, ref.ids, ref.n * sizeof *ref.ids) == 0);
        free(jobs[i].ids);
    }
    /* and the whole text round-trips (with its literal <|end_of_text|> markers, and the BOS) */
    char *back;
    size_t bl;
    CHECK_EQ_INT(tm_tok_decode(t, ref.ids, ref.n, 0, &back, &bl, &err), TM_OK);
    CHECK(bl == len + 17 && memcmp(back, "<|begin_of_text|>", 17) == 0 && memcmp(back + 17, text, len) == 0);
    free(back);
    free(ref.ids);
    free(text);
    tm_tok_free(t);
}

int main(void)
{
    conformance("llama-bpe");
    conformance("qwen2");
    conformance("llama-spm");
    /* pipelines the shared set lacks (WordPiece, BERT's normalizer and decoder): expectations from
     * Tokenizers.js, checked against the shared set first (tools/gen_tok_fixtures.mjs) */
    conformance_dir("tests/data/tokenizers/wordpiece-uncased", "wordpiece-uncased", 38);
    conformance_dir("tests/data/tokenizers/wordpiece-cased", "wordpiece-cased", 38);
    /* Unigram with SentencePiece's nmt_nfkc charsmap, and with byte fallback and a small rule set
       (tools/gen_unigram_fixtures.py: ids from SentencePiece itself) */
    conformance_dir("tests/data/tokenizers/unigram-nfkc", "unigram-nfkc", 25);
    conformance_dir("tests/data/tokenizers/unigram-bytes", "unigram-bytes", 25);
    demo_model();
    fixture_models();
    test_metaspace();
    test_split_behaviors();
    test_word_pretokenizers();
    test_normalizers();
    test_added_tokens();
    test_gemma_style();
    test_post_and_decoders();
    test_wordpiece();
    test_unigram();
    test_wordlevel_nmt();
    test_stream_cases();
    test_malformed();
    test_threads();
    return th_done("test_tokenizer");
}
