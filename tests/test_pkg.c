/* tests/test_pkg.c: the package format: checksum, writer, reader, stage
 * sources, dedup, functions table, metadata, verify, and corruption cases. */
#include "harness.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fileio.h"
#include "hf/safetensors.h"
#include "model/model.h"
#include "pkg/checksum.h"
#include "pkg/convert.h"
#include "pkg/pkg.h"
#include "pkg/pkg_format.h"
#include "quant/quant.h"

/* ---- checksum ---------------------------------------------------------------- */

static void test_xxh64(void)
{
    /* published XXH64 values (seed 0) */
    CHECK(tm_xxh64("", 0, 0) == 0xef46db3751d8e999ull);
    CHECK(tm_xxh64("a", 1, 0) == 0xd24ec4f1a98c6e5bull);
    CHECK(tm_xxh64("abc", 3, 0) == 0x44bc2cf5ad770999ull);
    CHECK(tm_xxh64("abcdefghijklmnopqrstuvwxyz12345", 31, 0) == 0x467605901b01d6f6ull);
    CHECK(tm_xxh64("abcdefghijklmnopqrstuvwxyz12345", 31, 877380273) == 0x37b562ec5715e132ull);
    const char *s = "Nobody inspects the spammish repetition"; /* 39 bytes: the 32-byte stripe path */
    CHECK(tm_xxh64(s, strlen(s), 0) == 0xfbcea83c8a378bf1ull);
    /* 1000 bytes (i*7+3): zstd's frame checksum, the low 32 bits of XXH64, is 0x33f1a3fb */
    uint8_t b[1000];
    for (int i = 0; i < 1000; i++) b[i] = (uint8_t)(i * 7 + 3);
    uint64_t whole = tm_xxh64(b, sizeof b, 0);
    CHECK((uint32_t)whole == 0x33f1a3fbu);
    /* streaming gives the same result at every split */
    int bad = 0;
    for (size_t cut = 0; cut <= sizeof b; cut += 7) {
        tm_xxh64_state st;
        tm_xxh64_init(&st, 0);
        tm_xxh64_update(&st, b, cut / 3);
        tm_xxh64_update(&st, b + cut / 3, cut - cut / 3);
        tm_xxh64_update(&st, b + cut, sizeof b - cut);
        bad += tm_xxh64_digest(&st) != whole;
    }
    CHECK_EQ_INT(bad, 0);
}

/* ---- a synthetic package ------------------------------------------------------ */

#define N_SPECS 9

typedef struct spec {
    const char *name;
    tm_dtype dtype;
    int ndim;
    int64_t shape[4];
    unsigned stages;
    uint8_t *data;     /* [nbytes] */
    size_t nbytes;
    void *scales;      /* [nscales]: f32 (int8) or f16 (int4) */
    size_t nscales;
} spec;

static spec specs[N_SPECS] = {
    {"model.embed_tokens.weight", TM_DT_BF16, 2, {64, 32}, TM_PKG_PREFILL | TM_PKG_DECODE, 0, 0, 0, 0},
    {"model.norm.weight", TM_DT_F32, 1, {32}, TM_PKG_PREFILL | TM_PKG_DECODE, 0, 0, 0, 0},
    {"model.layers.0.self_attn.q_proj.weight", TM_DT_BF16, 2, {48, 64}, TM_PKG_PREFILL, 0, 0, 0, 0},
    {"model.layers.0.self_attn.q_proj.weight", TM_DT_Q4G64, 2, {48, 64}, TM_PKG_DECODE, 0, 0, 0, 0},
    {"model.layers.0.self_attn.k_proj.weight", TM_DT_Q8PC, 2, {15, 40}, TM_PKG_PREFILL, 0, 0, 0, 0},
    {"model.layers.0.self_attn.k_proj.weight", TM_DT_Q4G32, 2, {16, 64}, TM_PKG_DECODE, 0, 0, 0, 0},
    {"model.layers.0.self_attn.o_proj.weight", TM_DT_Q4PC, 2, {32, 64}, TM_PKG_PREFILL | TM_PKG_DECODE, 0, 0, 0, 0},
    {"model.layers.0.mlp.experts.weight", TM_DT_Q4G32, 3, {2, 8, 64}, TM_PKG_DECODE, 0, 0, 0, 0},
    {"big.weight", TM_DT_BF16, 2, {1100, 4096}, TM_PKG_PREFILL, 0, 0, 0, 0}, /* 9 MB: several write slices */
};

static uint32_t rng = 12345;
static uint8_t rnd8(void)
{
    rng = rng * 1103515245u + 12345u;
    return (uint8_t)(rng >> 16);
}

static void make_specs(void)
{
    for (int i = 0; i < N_SPECS; i++) {
        spec *s = &specs[i];
        int64_t numel = 1;
        for (int d = 0; d < s->ndim; d++) numel *= s->shape[d];
        int64_t k = s->shape[s->ndim - 1], rows = numel / k;
        switch (s->dtype) {
        case TM_DT_Q8PC: s->nbytes = (size_t)numel; s->nscales = (size_t)rows; break;
        case TM_DT_Q4PC: s->nbytes = (size_t)numel / 2; s->nscales = (size_t)rows; break;
        case TM_DT_Q4G64: s->nbytes = (size_t)numel / 2; s->nscales = (size_t)(rows * k / 64); break;
        case TM_DT_Q4G32: s->nbytes = (size_t)numel / 2; s->nscales = (size_t)(rows * k / 32); break;
        default: s->nbytes = (size_t)numel * tm_dtype_size(s->dtype); s->nscales = 0; break;
        }
        s->data = malloc(s->nbytes);
        for (size_t j = 0; j < s->nbytes; j++) s->data[j] = rnd8();
        if (s->nscales) {
            s->scales = malloc(s->nscales * sizeof(float)); /* room for f32; int4 uses the first half as f16 */
            for (size_t j = 0; j < s->nscales; j++)
                tm_quant_scale_set(s->dtype, s->scales, j, 0.001f * (float)(j + 1) + (float)i);
        }
    }
}

static tm_tensor spec_tensor(const spec *s)
{
    tm_tensor t;
    memset(&t, 0, sizeof t);
    t.name = s->name;
    t.dtype = s->dtype;
    t.ndim = s->ndim;
    memcpy(t.shape, s->shape, sizeof t.shape);
    t.data = s->data;
    t.nbytes = s->nbytes;
    t.scales = s->scales;
    return t;
}

static char tokenizer_text[20000];
static const char *config_text = "{\"architectures\": [\"LlamaForCausalLM\"], \"num_hidden_layers\": 1}";
static const char *template_text = "{% for m in messages %}{{ m.content }}{% endfor %}";

static const tm_pkg_io prefill_in[] = {
    {"tokens", TM_DT_I32, 1, {{"T", 0}}},
    {"kv_in", TM_DT_BF16, 5, {{"L", 0}, {NULL, 2}, {"Hk", 0}, {"P", 0}, {"Dh", 0}}},
};
static const tm_pkg_io prefill_out[] = {
    {"kv_out", TM_DT_BF16, 5, {{"L", 0}, {NULL, 2}, {"Hk", 0}, {"T", 0}, {"Dh", 0}}},
    {"logits", TM_DT_F32, 2, {{NULL, 1}, {"V", 0}}},
};
static const tm_pkg_function fn_prefill = {"prefill_64_stateless", TM_PKG_FN_PREFILL, "matrix", 64, 0,
                                           2, 2, prefill_in, prefill_out};
static const tm_pkg_function fn_decode = {"decode", TM_PKG_FN_DECODE, "bandwidth", 1, 1,
                                          1, 1, prefill_in, prefill_out + 1};

static int write_package(const char *path, tm_err *err)
{
    tm_pkg_writer *w;
    int rc = tm_pkg_writer_open(&w, path, 0, err);
    if (rc) return rc;
    for (int i = 0; i < N_SPECS && rc == TM_OK; i++) {
        tm_tensor t = spec_tensor(&specs[i]);
        rc = tm_pkg_writer_add_tensor(w, &t, specs[i].stages, err);
        if (i == 3 && rc == TM_OK) rc = tm_pkg_writer_add_doc(w, TM_PKG_DOC_CONFIG, config_text, strlen(config_text), err);
    }
    if (rc == TM_OK) rc = tm_pkg_writer_add_doc(w, TM_PKG_DOC_TOKENIZER, tokenizer_text, strlen(tokenizer_text), err);
    if (rc == TM_OK) rc = tm_pkg_writer_add_doc(w, TM_PKG_DOC_CHAT_TEMPLATE, template_text, strlen(template_text), err);
    if (rc == TM_OK) rc = tm_pkg_writer_add_doc(w, "empty.txt", "", 0, err);
    if (rc == TM_OK) rc = tm_pkg_writer_add_function(w, &fn_prefill, err);
    if (rc == TM_OK) rc = tm_pkg_writer_add_function(w, &fn_decode, err);
    if (rc == TM_OK)
        rc = tm_pkg_writer_set_meta(w, "converter",
                                    "{\"name\": \"tandem\", \"version\": \"0.1.0\", \"encodings\": "
                                    "{\"prefill\": \"bf16\", \"decode\": \"int4g64\"}, \"chunks\": [64]}",
                                    err);
    if (rc == TM_OK) rc = tm_pkg_writer_set_meta(w, "model", "{\"n_params\": 12345}", err);
    if (rc) {
        tm_pkg_writer_abort(w);
        return rc;
    }
    return tm_pkg_writer_finish(w, err);
}

static int io_equal(const tm_pkg_io *a, const tm_pkg_io *b)
{
    if (strcmp(a->name, b->name) || a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++) {
        if (!a->dims[d].sym != !b->dims[d].sym) return 0;
        if (a->dims[d].sym ? strcmp(a->dims[d].sym, b->dims[d].sym) != 0 : a->dims[d].size != b->dims[d].size) return 0;
    }
    return 1;
}

static int fn_equal(const tm_pkg_function *a, const tm_pkg_function *b)
{
    if (!a || strcmp(a->name, b->name) || a->kind != b->kind || strcmp(a->engine_class, b->engine_class) ||
        a->chunk != b->chunk || a->stateful != b->stateful || a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs)
        return 0;
    for (int i = 0; i < a->n_inputs; i++) if (!io_equal(&a->inputs[i], &b->inputs[i])) return 0;
    for (int i = 0; i < a->n_outputs; i++) if (!io_equal(&a->outputs[i], &b->outputs[i])) return 0;
    return 1;
}

static void check_package(tm_pkg *p)
{
    tm_err err = {0};
    CHECK_EQ_INT(tm_pkg_version(p), 2);
    CHECK_EQ_INT(tm_pkg_alignment(p), 4096);
    CHECK_EQ_INT(tm_pkg_n_tensors(p), N_SPECS);
    /* dropping the pages after hashing leaves the mapping valid: the bytes below re-fault */
    CHECK_EQ_INT(tm_pkg_verify_flags(p, TM_PKG_VERIFY_RELEASE, &err), TM_OK);
    /* every record, every byte, every offset */
    int bad_bytes = 0, bad_align = 0, bad_meta = 0;
    for (int i = 0; i < N_SPECS; i++) {
        const tm_pkg_entry *e = tm_pkg_tensor(p, i);
        const spec *s = &specs[i];
        if (!e) { bad_meta++; continue; }
        if (strcmp(e->t.name, s->name) || e->t.dtype != s->dtype || e->t.ndim != s->ndim || e->stages != s->stages ||
            e->t.nbytes != s->nbytes || e->scales_bytes != s->nscales * tm_quant_scale_bytes(s->dtype))
            bad_meta++;
        for (int d = 0; d < s->ndim; d++) bad_meta += e->t.shape[d] != s->shape[d];
        bad_align += e->offset % 4096 != 0;
        bad_align += ((uintptr_t)e->t.data % 4096) != 0; /* the mapping is page-aligned */
        bad_bytes += memcmp(e->t.data, s->data, s->nbytes) != 0;
        if (s->nscales) {
            bad_bytes += !e->t.scales || memcmp(e->t.scales, s->scales, s->nscales * tm_quant_scale_bytes(s->dtype)) != 0;
            bad_align += ((uintptr_t)e->t.scales % 64) != 0;
            bad_align += (const uint8_t *)e->t.scales != (const uint8_t *)e->t.data + ((s->nbytes + 63) / 64) * 64;
        } else {
            bad_bytes += e->t.scales != NULL;
        }
    }
    CHECK_EQ_INT(bad_meta, 0);
    CHECK_EQ_INT(bad_bytes, 0);
    CHECK_EQ_INT(bad_align, 0);
    CHECK(tm_pkg_tensor(p, N_SPECS) == NULL && tm_pkg_tensor(p, -1) == NULL);

    /* stage sources: the right copy per stage; one shared copy when deduplicated */
    void *pre = tm_pkg_stage_ctx(p, TM_PKG_PREFILL), *dec = tm_pkg_stage_ctx(p, TM_PKG_DECODE);
    tm_tensor a, b;
    CHECK_EQ_INT(tm_pkg_stage_lookup(pre, "model.layers.0.self_attn.q_proj.weight", &a, &err), TM_OK);
    CHECK_EQ_INT(tm_pkg_stage_lookup(dec, "model.layers.0.self_attn.q_proj.weight", &b, &err), TM_OK);
    CHECK_EQ_INT(a.dtype, TM_DT_BF16);
    CHECK_EQ_INT(b.dtype, TM_DT_Q4G64);
    CHECK(a.data != b.data && b.scales && memcmp(b.scales, specs[3].scales, specs[3].nscales * tm_quant_scale_bytes(specs[3].dtype)) == 0);
    CHECK_EQ_INT(tm_pkg_lookup(p, TM_PKG_PREFILL, "model.layers.0.self_attn.k_proj.weight", &a, &err), TM_OK);
    CHECK_EQ_INT(tm_pkg_lookup(p, TM_PKG_DECODE, "model.layers.0.self_attn.k_proj.weight", &b, &err), TM_OK);
    CHECK(a.dtype == TM_DT_Q8PC && b.dtype == TM_DT_Q4G32);
    for (int i = 0; i < N_SPECS; i++) {
        if (specs[i].stages != (TM_PKG_PREFILL | TM_PKG_DECODE)) continue;
        CHECK_EQ_INT(tm_pkg_lookup(p, TM_PKG_PREFILL, specs[i].name, &a, &err), TM_OK);
        CHECK_EQ_INT(tm_pkg_lookup(p, TM_PKG_DECODE, specs[i].name, &b, &err), TM_OK);
        CHECK(a.data == b.data && a.dtype == specs[i].dtype); /* one copy, both stages */
    }
    CHECK_EQ_INT(tm_pkg_lookup(p, TM_PKG_DECODE, "big.weight", &a, &err), TM_E_NOTFOUND);
    CHECK(strstr(err.msg, "big.weight") && strstr(err.msg, "decode"));
    CHECK_EQ_INT(tm_pkg_lookup(p, TM_PKG_PREFILL, "model.layers.0.mlp.experts.weight", &a, &err), TM_E_NOTFOUND);
    CHECK_EQ_INT(tm_pkg_lookup(p, TM_PKG_PREFILL, "nope", &a, &err), TM_E_NOTFOUND);
    CHECK_EQ_INT(tm_pkg_lookup(p, TM_PKG_PREFILL, "", &a, &err), TM_E_NOTFOUND);
    CHECK_EQ_INT(tm_pkg_lookup(p, 3, "model.norm.weight", &a, &err), TM_E_INVALID);
    CHECK(tm_pkg_stage_ctx(p, 0) == NULL);
    CHECK_EQ_INT(tm_pkg_stage_lookup(NULL, "model.norm.weight", &a, &err), TM_E_INVALID);
    tm_tensor_source src = tm_pkg_source(p, TM_PKG_DECODE);
    CHECK_EQ_INT(src.lookup(src.ctx, "model.layers.0.mlp.experts.weight", &a, &err), TM_OK);
    CHECK(a.dtype == TM_DT_Q4G32 && a.ndim == 3 && a.shape[0] == 2 && a.nbytes == specs[7].nbytes);

    /* documents */
    size_t n = 0;
    const char *txt = tm_pkg_doc(p, TM_PKG_DOC_TOKENIZER, &n);
    CHECK(txt && n == strlen(tokenizer_text) && strcmp(txt, tokenizer_text) == 0);
    CHECK_EQ_STR(tm_pkg_doc(p, TM_PKG_DOC_CONFIG, NULL), config_text);
    CHECK_EQ_STR(tm_pkg_doc(p, TM_PKG_DOC_CHAT_TEMPLATE, NULL), template_text);
    txt = tm_pkg_doc(p, "empty.txt", &n);
    CHECK(txt && n == 0 && txt[0] == '\0');
    CHECK(tm_pkg_doc(p, TM_PKG_DOC_GENERATION_CONFIG, &n) == NULL && n == 0);
    CHECK_EQ_INT(tm_pkg_n_docs(p), 4);
    CHECK_EQ_STR(tm_pkg_doc_name(p, 0), TM_PKG_DOC_CONFIG);
    CHECK(tm_pkg_doc_name(p, 4) == NULL);

    /* metadata */
    CHECK_EQ_STR(tm_pkg_meta_str(p, "converter.encodings.decode"), "int4g64");
    CHECK_EQ_STR(tm_pkg_meta_str(p, "converter.version"), "0.1.0");
    double v = 0;
    CHECK(tm_pkg_meta_num(p, "model.n_params", &v) == 0 && v == 12345);
    CHECK(tm_pkg_meta_num(p, "model.nothing", &v) == -1);
    CHECK(tm_pkg_meta_str(p, "model.n_params") == NULL);
    CHECK(tm_pkg_meta_str(p, "converter.encodings.decode.x") == NULL);
    CHECK(strstr(tm_pkg_meta_json(p), "\"functions\"") != NULL);

    /* functions */
    CHECK_EQ_INT(tm_pkg_n_functions(p), 2);
    CHECK(fn_equal(tm_pkg_function_at(p, 0), &fn_prefill));
    CHECK(fn_equal(tm_pkg_function_at(p, 1), &fn_decode));
    CHECK(tm_pkg_function_find(p, "decode") == tm_pkg_function_at(p, 1));
    CHECK(tm_pkg_function_find(p, "prefill_128") == NULL);
    CHECK(tm_pkg_function_at(p, 2) == NULL);

    CHECK_EQ_INT(tm_pkg_verify(p, &err), TM_OK);
}

static char pkg_path[256];

static void test_roundtrip(void)
{
    tm_err err = {0};
    CHECKF(write_package(pkg_path, &err) == TM_OK, "%s", err.msg);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", pkg_path, (long)getpid());
    CHECK(!tm_file_exists(tmp)); /* renamed into place */
    tm_pkg *p = NULL;
    int rc = tm_pkg_open(&p, pkg_path, &err);
    CHECKF(rc == TM_OK, "%s", err.msg);
    if (rc) return;
    check_package(p);
    tm_pkg_close(p);
}

static void test_empty_package(void)
{
    tm_err err = {0};
    char path[300];
    snprintf(path, sizeof path, "%s.empty", pkg_path);
    tm_pkg_writer *w;
    CHECK_EQ_INT(tm_pkg_writer_open(&w, path, 64, &err), TM_OK);
    CHECK_EQ_INT(tm_pkg_writer_finish(w, &err), TM_OK);
    tm_pkg *p;
    CHECKF(tm_pkg_open(&p, path, &err) == TM_OK, "%s", err.msg);
    if (p) {
        CHECK_EQ_INT(tm_pkg_n_tensors(p), 0);
        CHECK_EQ_INT(tm_pkg_n_functions(p), 0);
        CHECK_EQ_INT(tm_pkg_alignment(p), 64);
        tm_tensor t;
        CHECK_EQ_INT(tm_pkg_lookup(p, TM_PKG_DECODE, "x", &t, &err), TM_E_NOTFOUND);
        CHECK_EQ_INT(tm_pkg_verify(p, &err), TM_OK);
        tm_pkg_close(p);
    }
    unlink(path);
}

/* ---- the writer rejects bad arguments and stays usable ----------------------- */

static void test_writer_validation(void)
{
    tm_err err = {0};
    char path[300];
    snprintf(path, sizeof path, "%s.val", pkg_path);
    tm_pkg_writer *w;
    CHECK_EQ_INT(tm_pkg_writer_open(&w, path, 100, &err), TM_E_INVALID); /* not a power of two */
    CHECK_EQ_INT(tm_pkg_writer_open(&w, path, 0, &err), TM_OK);
    tm_tensor t = spec_tensor(&specs[3]); /* q4g64 */
    t.nbytes--;
    CHECK_EQ_INT(tm_pkg_writer_add_tensor(w, &t, TM_PKG_DECODE, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, specs[3].name) != NULL);
    t = spec_tensor(&specs[3]);
    t.scales = NULL;
    CHECK_EQ_INT(tm_pkg_writer_add_tensor(w, &t, TM_PKG_DECODE, &err), TM_E_INVALID);
    t = spec_tensor(&specs[3]);
    t.shape[1] = 48; /* K not a multiple of the group */
    CHECK_EQ_INT(tm_pkg_writer_add_tensor(w, &t, TM_PKG_DECODE, &err), TM_E_INVALID);
    t = spec_tensor(&specs[3]);
    CHECK_EQ_INT(tm_pkg_writer_add_tensor(w, &t, 0, &err), TM_E_INVALID);
    CHECK_EQ_INT(tm_pkg_writer_add_tensor(w, &t, 4, &err), TM_E_INVALID);
    t.shape[0] = -48;
    CHECK_EQ_INT(tm_pkg_writer_add_tensor(w, &t, TM_PKG_DECODE, &err), TM_E_INVALID);
    t = spec_tensor(&specs[3]);
    t.name = "";
    CHECK_EQ_INT(tm_pkg_writer_add_tensor(w, &t, TM_PKG_DECODE, &err), TM_E_INVALID);
    t = spec_tensor(&specs[3]);
    CHECK_EQ_INT(tm_pkg_writer_add_tensor(w, &t, TM_PKG_DECODE, &err), TM_OK);
    CHECK_EQ_INT(tm_pkg_writer_add_tensor(w, &t, TM_PKG_DECODE | TM_PKG_PREFILL, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "decode stage already") != NULL);
    t = spec_tensor(&specs[2]);
    CHECK_EQ_INT(tm_pkg_writer_add_tensor(w, &t, TM_PKG_PREFILL, &err), TM_OK); /* other stage: fine */
    CHECK_EQ_INT(tm_pkg_writer_add_doc(w, "a.json", "{}", 2, &err), TM_OK);
    CHECK_EQ_INT(tm_pkg_writer_add_doc(w, "a.json", "{}", 2, &err), TM_E_INVALID);
    CHECK_EQ_INT(tm_pkg_writer_set_meta(w, "functions", "[]", &err), TM_E_INVALID);
    CHECK_EQ_INT(tm_pkg_writer_set_meta(w, "x", "{not json", &err), TM_E_INVALID);
    CHECK_EQ_INT(tm_pkg_writer_set_meta(w, "x", "1", &err), TM_OK);
    CHECK_EQ_INT(tm_pkg_writer_set_meta(w, "x", "2", &err), TM_OK); /* replaces */
    tm_pkg_io bad_io = prefill_in[1];
    bad_io.dims[0].sym = "Q"; /* not a legend symbol */
    tm_pkg_function f = fn_prefill;
    f.inputs = &bad_io;
    f.n_inputs = 1;
    CHECK_EQ_INT(tm_pkg_writer_add_function(w, &f, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "shape[0]") != NULL);
    f = fn_prefill;
    f.chunk = 0;
    CHECK_EQ_INT(tm_pkg_writer_add_function(w, &f, &err), TM_E_INVALID);
    f = fn_prefill;
    f.name = "bad name";
    CHECK_EQ_INT(tm_pkg_writer_add_function(w, &f, &err), TM_E_INVALID);
    CHECK_EQ_INT(tm_pkg_writer_add_function(w, &fn_decode, &err), TM_OK);
    CHECK_EQ_INT(tm_pkg_writer_add_function(w, &fn_decode, &err), TM_E_INVALID);
    CHECK_EQ_INT(tm_pkg_writer_finish(w, &err), TM_OK);
    tm_pkg *p;
    CHECKF(tm_pkg_open(&p, path, &err) == TM_OK, "%s", err.msg);
    if (p) {
        CHECK_EQ_INT(tm_pkg_n_tensors(p), 2);
        CHECK_EQ_INT(tm_pkg_n_functions(p), 1);
        double x = 0;
        CHECK(tm_pkg_meta_num(p, "x", &x) == 0 && x == 2);
        tm_pkg_close(p);
    }
    unlink(path);
}

/* ---- interrupted writes leave nothing at the destination --------------------- */

static void test_interrupted_write(void)
{
    tm_err err = {0};
    char path[300], tmp[340];
    snprintf(path, sizeof path, "%s.abort", pkg_path);
    unlink(path);
    tm_pkg_writer *w;
    CHECK_EQ_INT(tm_pkg_writer_open(&w, path, 0, &err), TM_OK);
    tm_tensor t = spec_tensor(&specs[0]);
    CHECK_EQ_INT(tm_pkg_writer_add_tensor(w, &t, TM_PKG_PREFILL, &err), TM_OK);
    CHECK(tm_pkg_writer_bytes(w) == 4096 + specs[0].nbytes);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK(tm_file_exists(tmp) && !tm_file_exists(path));
    tm_pkg_writer_abort(w);
    CHECK(!tm_file_exists(path) && !tm_file_exists(tmp));

    /* a writer killed mid-way: the final path never appears */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        tm_pkg_writer *cw;
        if (tm_pkg_writer_open(&cw, path, 0, NULL) == TM_OK) {
            tm_tensor ct = spec_tensor(&specs[8]);
            tm_pkg_writer_add_tensor(cw, &ct, TM_PKG_PREFILL, NULL);
        }
        raise(SIGKILL);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status));
    CHECK(!tm_file_exists(path));
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)pid);
    CHECK(tm_file_exists(tmp)); /* the partial temporary, never renamed */
    unlink(tmp);
}

/* ---- corruption: every case a clear error, never a crash ---------------------- */

static uint8_t *image;   /* the good package's bytes */
static size_t image_size;

static uint8_t *copy_image(void)
{
    uint8_t *c = malloc(image_size);
    memcpy(c, image, image_size);
    return c;
}

/* open a (possibly edited) image; returns the status, err holds the message */
static int open_image(const uint8_t *img, size_t n, tm_err *err)
{
    tm_pkg *p = NULL;
    int rc = tm_pkg_open_mem(&p, img, n, "corrupt.tdm", err);
    if (rc == TM_OK) {
        CHECK(p != NULL);
        tm_pkg_close(p);
    } else {
        CHECK(p == NULL);
        CHECK(strncmp(err->msg, "corrupt.tdm: ", 13) == 0); /* names the file */
    }
    return rc;
}

static tm_pkg_header hdr(const uint8_t *img)
{
    tm_pkg_header h;
    tm_pkg_header_get(img, &h);
    return h;
}

static uint8_t *trec_at(uint8_t *img, uint32_t i)
{
    return img + hdr(img).index_offset + TM_PKG_INDEX_HEADER_SIZE + (size_t)TM_PKG_TENSOR_REC_SIZE * i;
}

/* edit tensor record i with fn, reseal, open: the status */
static int edit_tensor(uint32_t i, void (*fn)(tm_pkg_tensor_rec *), tm_err *err)
{
    uint8_t *c = copy_image();
    tm_pkg_tensor_rec r;
    tm_pkg_tensor_rec_get(trec_at(c, i), &r);
    fn(&r);
    tm_pkg_tensor_rec_put(trec_at(c, i), &r);
    CHECK(tm_pkg_reseal(c, image_size) == 0);
    int rc = open_image(c, image_size, err);
    free(c);
    return rc;
}

static void off_past_end(tm_pkg_tensor_rec *r) { r->data_offset = 1ull << 40; }
static void off_wrap(tm_pkg_tensor_rec *r) { r->data_offset = UINT64_MAX - 4095; }
static void off_unaligned(tm_pkg_tensor_rec *r) { r->data_offset += 64; }
static void off_header(tm_pkg_tensor_rec *r) { r->data_offset = 0; }
static void off_overlap(tm_pkg_tensor_rec *r) { r->data_offset += 4096; } /* into the next region */
static void absurd_shape(tm_pkg_tensor_rec *r) { r->shape[0] = 1ull << 50; }
static void size_mismatch(tm_pkg_tensor_rec *r) { r->data_size += 2; }
static void bad_dtype(tm_pkg_tensor_rec *r) { r->dtype = 99; }
static void bad_ndim(tm_pkg_tensor_rec *r) { r->ndim = 7; }
static void bad_name(tm_pkg_tensor_rec *r) { r->name_off = 0xfffffff0u; }
static void bad_stages(tm_pkg_tensor_rec *r) { r->stages = 0; }
static void scales_moved(tm_pkg_tensor_rec *r) { r->scales_offset += 64; }
static void to_prefill(tm_pkg_tensor_rec *r) { r->stages = TM_PKG_PREFILL; }

static void test_corruption(void)
{
    tm_err err = {0};
    int rc;
    CHECK_EQ_INT(open_image(image, image_size, &err), TM_OK);

    uint8_t *c = copy_image();
    memcpy(c, "GGUF", 4);
    CHECK_EQ_INT(open_image(c, image_size, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, "bad magic") && strstr(err.msg, "GGUF"));
    memcpy(c, "TNDX", 4);
    CHECK_EQ_INT(open_image(c, image_size, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, "bad magic") != NULL);
    free(c);

    c = copy_image(); /* version 1 (f32 int4 scales), header otherwise consistent: re-convert */
    c[4] = 1;
    tm_pkg_reseal(c, image_size);
    CHECK_EQ_INT(open_image(c, image_size, &err), TM_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "version 1") && strstr(err.msg, "re-convert"));
    c[4] = 3;
    tm_pkg_reseal(c, image_size);
    CHECK_EQ_INT(open_image(c, image_size, &err), TM_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "version 3") && strstr(err.msg, "newer tandem") && !strstr(err.msg, "re-convert"));
    free(c);

    c = copy_image(); /* big-endian marker */
    c[8] = 1, c[9] = 2, c[10] = 3, c[11] = 4;
    tm_pkg_reseal(c, image_size);
    CHECK_EQ_INT(open_image(c, image_size, &err), TM_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "big-endian") != NULL);
    free(c);

    c = copy_image(); /* a flipped header byte */
    c[20] ^= 0x10;
    CHECK_EQ_INT(open_image(c, image_size, &err), TM_E_CHECKSUM);
    CHECK(strstr(err.msg, "header checksum") != NULL);
    free(c);

    c = copy_image(); /* alignment not a power of two */
    c[12] = 0x01, c[13] = 0x11;
    tm_pkg_reseal(c, image_size);
    CHECK_EQ_INT(open_image(c, image_size, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, "alignment") != NULL);
    free(c);

    /* truncated at many cut points, and one trailing byte */
    int bad = 0, unclear = 0;
    for (size_t cut = 0; cut < image_size; cut += (cut < 5000 ? 37 : 4099)) {
        rc = open_image(image, cut, &err);
        bad += rc == TM_OK;
        unclear += cut >= 64 && !strstr(err.msg, "truncated");
    }
    rc = open_image(image, image_size - 1, &err);
    CHECK(rc == TM_E_FORMAT && strstr(err.msg, "truncated"));
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(unclear, 0);
    c = malloc(image_size + 1);
    memcpy(c, image, image_size);
    c[image_size] = 0;
    CHECK_EQ_INT(open_image(c, image_size + 1, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, "trailing") != NULL);
    free(c);

    /* a flipped index byte without resealing: the index hash */
    c = copy_image();
    c[hdr(c).index_offset + TM_PKG_INDEX_HEADER_SIZE + 20] ^= 1;
    CHECK_EQ_INT(open_image(c, image_size, &err), TM_E_CHECKSUM);
    CHECK(strstr(err.msg, "index checksum") != NULL);
    free(c);

    /* tensor records edited (and resealed, so the structural checks answer) */
    const char *q = "'model.layers.0.self_attn.q_proj.weight'";
    CHECK_EQ_INT(edit_tensor(3, off_past_end, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, q) && strstr(err.msg, "outside the data area"));
    CHECK_EQ_INT(edit_tensor(3, off_wrap, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, q) != NULL);
    CHECK_EQ_INT(edit_tensor(3, off_unaligned, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, q) && strstr(err.msg, "unaligned"));
    CHECK_EQ_INT(edit_tensor(0, off_header, &err), TM_E_FORMAT);
    CHECK_EQ_INT(edit_tensor(2, off_overlap, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, "overlaps") != NULL);
    CHECK_EQ_INT(edit_tensor(2, absurd_shape, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, q) && strstr(err.msg, "2^40"));
    CHECK_EQ_INT(edit_tensor(1, size_mismatch, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, "'model.norm.weight'") && strstr(err.msg, "data_size"));
    CHECK_EQ_INT(edit_tensor(1, bad_dtype, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, "unknown dtype") != NULL);
    CHECK_EQ_INT(edit_tensor(1, bad_ndim, &err), TM_E_FORMAT);
    CHECK_EQ_INT(edit_tensor(4, bad_name, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, "tensor #4") != NULL);
    CHECK_EQ_INT(edit_tensor(4, bad_stages, &err), TM_E_FORMAT);
    CHECK_EQ_INT(edit_tensor(5, scales_moved, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, "scales") != NULL);
    CHECK_EQ_INT(edit_tensor(3, to_prefill, &err), TM_E_FORMAT); /* two prefill copies of q_proj */
    CHECK(strstr(err.msg, q) && strstr(err.msg, "two copies"));

    /* absurd counts in the index header */
    c = copy_image();
    uint8_t *ih = c + hdr(c).index_offset;
    ih[0] = ih[1] = ih[2] = ih[3] = 0xff; /* n_tensors = 2^32 - 1 */
    tm_pkg_reseal(c, image_size);
    CHECK_EQ_INT(open_image(c, image_size, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, "limits") != NULL);
    ih[0] = 0x10, ih[1] = ih[2] = ih[3] = 0; /* 16: within limits, inconsistent with the index size */
    tm_pkg_reseal(c, image_size);
    CHECK_EQ_INT(open_image(c, image_size, &err), TM_E_FORMAT);
    CHECK(strstr(err.msg, "the counts need") != NULL);
    free(c);

    /* a document's bytes changed: its checksum, at open */
    c = copy_image();
    const char *at = memmem(c, image_size, "LlamaForCausalLM", 16);
    CHECK(at != NULL);
    if (at) c[at - (const char *)c] = 'X';
    CHECK_EQ_INT(open_image(c, image_size, &err), TM_E_CHECKSUM);
    CHECK(strstr(err.msg, "'config.json'") != NULL);
    free(c);

    /* metadata edits: not JSON; a bad functions entry */
    c = copy_image();
    char *meta = memmem(c, image_size, "\"functions\"", 11);
    CHECK(meta != NULL);
    if (meta) {
        char *chunk = strstr(meta, "\"chunk\"");
        if (chunk) memcpy(chunk, "\"chunX\"", 7); /* functions[0] loses its chunk */
        tm_pkg_reseal(c, image_size);
        CHECK_EQ_INT(open_image(c, image_size, &err), TM_E_FORMAT);
        CHECK(strstr(err.msg, "functions[0]") && strstr(err.msg, "chunk"));
        meta[0] = '[';
        tm_pkg_reseal(c, image_size);
        CHECK_EQ_INT(open_image(c, image_size, &err), TM_E_FORMAT);
        CHECK(strstr(err.msg, "metadata") != NULL);
    }
    free(c);

    /* a flipped byte in tensor data: opens, and verify names the tensor */
    c = copy_image();
    tm_pkg *p;
    CHECK_EQ_INT(tm_pkg_open_mem(&p, c, image_size, "flip.tdm", &err), TM_OK);
    if (p) {
        const tm_pkg_entry *e = tm_pkg_tensor(p, 5);
        c[e->offset + 7] ^= 0x01;
        CHECK_EQ_INT(tm_pkg_verify_flags(p, TM_PKG_VERIFY_RELEASE, &err), TM_E_CHECKSUM);
        CHECK(strstr(err.msg, "flip.tdm: tensor 'model.layers.0.self_attn.k_proj.weight'") != NULL);
        c[e->offset + 7] ^= 0x01;
        CHECK_EQ_INT(tm_pkg_verify(p, &err), TM_OK);
        const tm_pkg_entry *e4 = tm_pkg_tensor(p, 4); /* int8 [15][40]: 600 data bytes, scales at 640 */
        CHECK((const uint8_t *)e4->t.scales - (const uint8_t *)e4->t.data == 640);
        c[e4->offset + 620] ^= 0x80; /* padding between data and scales: not covered */
        CHECK_EQ_INT(tm_pkg_verify(p, &err), TM_OK);
        ((uint8_t *)e->t.scales)[3] ^= 0x04;   /* a scale byte: covered */
        CHECK_EQ_INT(tm_pkg_verify(p, &err), TM_E_CHECKSUM);
        tm_pkg_close(p);
    }
    free(c);
}

/* every single-byte flip of the header and index, resealed or not: never a crash */
static void test_index_flips(void)
{
    tm_err err = {0};
    tm_pkg_header h = hdr(image);
    uint8_t *c = copy_image();
    int step = getenv("TM_SANITIZER") ? 3 : 1, crashed_ok = 0;
    for (uint64_t off = 0; off < image_size; off += (off < 64 ? 1 : off < h.index_offset ? 4099 : (uint64_t)step)) {
        uint8_t save = c[off];
        c[off] ^= (uint8_t)(0x5a + off);
        if (off >= h.index_offset || off < 56) tm_pkg_reseal(c, image_size);
        tm_pkg *p = NULL;
        int rc = tm_pkg_open_mem(&p, c, image_size, "flip.tdm", &err);
        if (rc == TM_OK) {
            tm_pkg_verify(p, &err);
            tm_pkg_close(p);
        }
        c[off] = save;
        crashed_ok++;
    }
    memcpy(c, image, image_size);
    CHECK(crashed_ok > 1000);
    free(c);
}


/* ---- the converter on the vendored demo model -------------------------------- */

#define DEMO "models/tiny-classics-llama"

static int progress_calls;
static void count_progress(void *ctx, const tm_convert_progress *p)
{
    (void)ctx;
    progress_calls += p->tensors_done > 0 && p->bytes_done <= p->bytes_total;
}

static void stop_after_3(void *ctx, const tm_convert_progress *p)
{
    if (p->tensors_done == 3) *(volatile sig_atomic_t *)ctx = 1;
}

/* every stage copy of every checkpoint tensor against the checkpoint itself */
static void check_converted(tm_pkg *p, tm_st_set *set, tm_dtype pre, tm_dtype dec)
{
    tm_err err = {0};
    int n_files = tm_st_set_nfiles(set), checked = 0, bad_bytes = 0, bad_dtype = 0, bad_share = 0;
    for (int f = 0; f < n_files; f++) {
        const tm_st_file *sf = tm_st_set_file(set, f);
        for (int i = 0; i < tm_st_count(sf); i++) {
            tm_tensor src, cp[2];
            if (tm_st_find(sf, tm_st_name(sf, i), &src, &err) != TM_OK) continue;
            int ok0 = tm_pkg_lookup(p, TM_PKG_PREFILL, src.name, &cp[0], &err) == TM_OK;
            int ok1 = tm_pkg_lookup(p, TM_PKG_DECODE, src.name, &cp[1], &err) == TM_OK;
            CHECKF(ok0 && ok1, "%s missing", src.name);
            if (!ok0 || !ok1) continue;
            checked++;
            int vec = src.ndim == 1, emb = strstr(src.name, "embed_tokens") != NULL;
            tm_dtype want[2] = {vec ? TM_DT_F32 : emb ? TM_DT_BF16 : pre, vec ? TM_DT_F32 : emb ? TM_DT_BF16 : dec};
            bad_dtype += cp[0].dtype != want[0] || cp[1].dtype != want[1];
            bad_share += (want[0] == want[1]) != (cp[0].data == cp[1].data); /* one copy iff same encoding */
            int64_t K = src.shape[src.ndim - 1], N = tm_tensor_numel(&src) / K;
            for (int s = 0; s < 2; s++) {
                /* the reference single-threaded encoding of the source, byte for byte */
                size_t nb = tm_quant_data_bytes(cp[s].dtype, N, K), ns = tm_quant_scale_count(cp[s].dtype, N, K);
                uint8_t *data = malloc(nb);
                size_t sb = tm_quant_scale_bytes(cp[s].dtype);
                void *sc = ns ? malloc(ns * sb) : NULL;
                int rc = tm_quant_quantize_rows(cp[s].dtype, src.dtype, src.data, N, K, 0, N, data, sc, NULL, &err);
                bad_bytes += rc != TM_OK || cp[s].nbytes != nb || memcmp(cp[s].data, data, nb) != 0 ||
                             (ns && memcmp(cp[s].scales, sc, ns * sb) != 0);
                free(data);
                free(sc);
            }
        }
    }
    CHECK_EQ_INT(checked, 56);
    CHECK_EQ_INT(bad_dtype, 0);
    CHECK_EQ_INT(bad_share, 0);
    CHECK_EQ_INT(bad_bytes, 0);
}

static void test_convert(void)
{
    tm_err err = {0};
    char out[300];
    snprintf(out, sizeof out, "%s.conv", pkg_path);
    tm_convert_opts o;
    tm_convert_opts_default(&o);
    o.progress = count_progress;
    tm_convert_stats st;
    int rc = tm_convert(DEMO, out, &o, &st, &err);
    CHECKF(rc == TM_OK, "%s", err.msg);
    if (rc) return;
    CHECK_EQ_INT(st.tensors, 56);
    /* the default: 42 matrices have an int8 (prefill) and an int4g64 copy; the tied embedding adds an int8 decode "lm_head.weight" */
    CHECK_EQ_INT(st.records, 56 + 42 + 1);
    CHECK_EQ_INT(st.fallbacks, 0);
    CHECK_EQ_INT(progress_calls, 56);
    tm_pkg *p;
    tm_st_set *set;
    CHECKF(tm_pkg_open(&p, out, &err) == TM_OK, "%s", err.msg);
    CHECKF(tm_st_set_open(&set, DEMO, &err) == TM_OK, "%s", err.msg);
    if (p && set) {
        CHECK_EQ_INT(tm_pkg_verify(p, &err), TM_OK);
        check_converted(p, set, TM_DT_Q8PC, TM_DT_Q4G64);
        /* the tied embedding's decode copy: int6g64 (the default head behind int4), decode stage
         * only, and the decode model binds it as its output projection */
        tm_tensor h, emb;
        CHECK(tm_pkg_lookup(p, TM_PKG_DECODE, "lm_head.weight", &h, &err) == TM_OK && h.dtype == TM_DT_Q6G64 &&
              h.shape[0] == 8192 && h.shape[1] == 384);
        CHECK(tm_pkg_lookup(p, TM_PKG_PREFILL, "lm_head.weight", &emb, &err) == TM_E_NOTFOUND);
        /* documents verbatim */
        const char *docs[] = {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"};
        for (int i = 0; i < 4; i++) {
            char path[256], *text = NULL;
            size_t n = 0, m = 0;
            snprintf(path, sizeof path, DEMO "/%s", docs[i]);
            CHECK_EQ_INT(tm_read_file(path, &text, &n, 0, &err), TM_OK);
            const char *d = tm_pkg_doc(p, docs[i], &m);
            CHECKF(d && text && n == m && memcmp(d, text, n) == 0, "%s", docs[i]);
            free(text);
        }
        CHECK_EQ_STR(tm_pkg_meta_str(p, "model.architecture"), "LlamaForCausalLM");
        CHECK_EQ_STR(tm_pkg_meta_str(p, "converter.encodings.decode"), "int4g64");
        double np = 0;
        /* V*D embedding (tied) + per layer q,o D*D, k,v 128*D, gate,up,down 3*F*D, 2 norms D; + final norm D */
        const double D = 384, F = 1024, per_layer = 2 * D * D + 2 * 128 * D + 3 * F * D + 2 * D;
        CHECK(tm_pkg_meta_num(p, "model.n_params", &np) == 0 && np == 8192 * D + 6 * per_layer + D);
        CHECK_EQ_INT(tm_pkg_n_functions(p), 10); /* 4 chunks x 2 prefill variants + 2 decode */
        const tm_pkg_function *f = tm_pkg_function_find(p, "prefill_256_stateless");
        CHECK(f && f->chunk == 256 && !f->stateful && f->n_inputs == 2 && strcmp(f->inputs[1].name, "kv_in") == 0);
        f = tm_pkg_function_find(p, "decode");
        CHECK(f && f->kind == TM_PKG_FN_DECODE && f->stateful && strcmp(f->engine_class, "bandwidth") == 0);
        /* both stages bind as models */
        for (unsigned stage = TM_PKG_PREFILL; stage <= TM_PKG_DECODE; stage++) {
            tm_hf_config cfg;
            size_t n;
            const char *text = tm_pkg_doc(p, TM_PKG_DOC_CONFIG, &n);
            tm_model *m = NULL;
            CHECK_EQ_INT(tm_hf_config_parse(&cfg, text, n, "config.json", &err), TM_OK);
            CHECK_EQ_INT(tm_model_init(&m, &cfg, &err), TM_OK);
            tm_hf_config_free(&cfg);
            if (!m) continue;
            m->check_dtype = 0;
            tm_tensor_source src = tm_pkg_source(p, stage);
            CHECKF(tm_model_bind(m, &src, &err) == TM_OK, "%s", err.msg);
            CHECK(m->w[0].wq.dtype == (stage == TM_PKG_PREFILL ? TM_DT_Q8PC : TM_DT_Q4G64));
            CHECK(m->embed.dtype == TM_DT_BF16 && m->final_norm.dtype == TM_DT_F32);
            tm_model_free(m);
        }
    }
    tm_st_set_close(set);
    tm_pkg_close(p);

    /* same encoding for both stages: every tensor stored once */
    o.prefill_enc = o.decode_enc = TM_DT_BF16;
    o.n_chunks = 1;
    o.stateless = 0;
    rc = tm_convert(DEMO, out, &o, &st, &err);
    CHECKF(rc == TM_OK, "%s", err.msg);
    CHECK_EQ_INT(st.records, 56);
    if (tm_pkg_open(&p, out, &err) == TM_OK) {
        CHECK_EQ_INT(tm_pkg_n_functions(p), 2);
        if (tm_st_set_open(&set, DEMO, &err) == TM_OK) {
            check_converted(p, set, TM_DT_BF16, TM_DT_BF16);
            tm_st_set_close(set);
        }
        tm_pkg_close(p);
    }
    /* int8 prefill, int4g32 decode */
    o.prefill_enc = TM_DT_Q8PC;
    o.decode_enc = TM_DT_Q4G32;
    o.threads = 1;
    rc = tm_convert(DEMO, out, &o, &st, &err);
    CHECKF(rc == TM_OK, "%s", err.msg);
    if (tm_pkg_open(&p, out, &err) == TM_OK) {
        if (tm_st_set_open(&set, DEMO, &err) == TM_OK) {
            check_converted(p, set, TM_DT_Q8PC, TM_DT_Q4G32);
            tm_st_set_close(set);
        }
        tm_pkg_close(p);
    }
    unlink(out);

    /* bad options and a failed conversion leave nothing at the destination */
    tm_convert_opts_default(&o);
    o.prefill_enc = TM_DT_Q4G64;
    CHECK_EQ_INT(tm_convert(DEMO, out, &o, NULL, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "--prefill-enc") != NULL);
    tm_convert_opts_default(&o);
    o.chunks[1] = 32; /* not ascending */
    CHECK_EQ_INT(tm_convert(DEMO, out, &o, NULL, &err), TM_E_INVALID);
    tm_convert_opts_default(&o);
    volatile sig_atomic_t stop = 0;
    o.cancel = &stop;
    o.progress = stop_after_3;
    o.progress_ctx = (void *)&stop;
    CHECK_EQ_INT(tm_convert(DEMO, out, &o, NULL, &err), TM_E_CANCELLED);
    CHECK(strstr(err.msg, "cancelled after 3 of 56") != NULL);
    CHECK(!tm_file_exists(out));
    char tmp[340];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
    CHECK(!tm_file_exists(tmp));
    tm_convert_opts_default(&o);
    CHECK(tm_convert("tests", out, &o, NULL, &err) != TM_OK); /* no config.json */
    CHECK(strstr(err.msg, "config.json") != NULL);
    CHECK(!tm_file_exists(out));
}

/* the output head's decode encoding: --head-enc, for a tied head (its own decode
 * record) and an untied one (the lm_head matrix's decode copy) */
static void test_convert_head(void)
{
    tm_err err = {0};
    char out[300];
    snprintf(out, sizeof out, "%s.head", pkg_path);
    tm_convert_opts o;
    tm_convert_opts_default(&o);
    /* the default: 6 bits behind a 4-bit decode stage, 8 behind an 8-bit one; what is asked for otherwise */
    CHECK_EQ_INT(tm_convert_head_enc(&o), TM_DT_Q6G64);
    o.decode_enc = TM_DT_Q8PC;
    CHECK_EQ_INT(tm_convert_head_enc(&o), TM_DT_Q8PC);
    o.decode_enc = TM_DT_Q4G32;
    CHECK_EQ_INT(tm_convert_head_enc(&o), TM_DT_Q6G64);
    o.head_enc = TM_DT_Q4G64;
    CHECK_EQ_INT(tm_convert_head_enc(&o), TM_DT_Q4G64);
    tm_convert_opts_default(&o);
    o.n_chunks = 1;
    tm_pkg *p;
    tm_tensor h, wq;
    int rc;
    static const tm_dtype heads[] = {TM_DT_Q4G64, TM_DT_Q6G64, TM_DT_Q8PC, TM_CONVERT_HEAD_AUTO};
    for (int i = 0; i < 4; i++) {
        o.head_enc = heads[i];
        tm_dtype want = heads[i] == TM_CONVERT_HEAD_AUTO ? TM_DT_Q6G64 : heads[i]; /* K = 384: int6 fits */
        rc = tm_convert(DEMO, out, &o, NULL, &err);
        CHECKF(rc == TM_OK, "%s", err.msg);
        if (rc == TM_OK && tm_pkg_open(&p, out, &err) == TM_OK) {
            CHECK(tm_pkg_lookup(p, TM_PKG_DECODE, "lm_head.weight", &h, &err) == TM_OK && h.dtype == want &&
                  h.shape[0] == 8192 && h.shape[1] == 384 && h.nbytes == tm_quant_data_bytes(want, 8192, 384));
            tm_pkg_close(p);
        }
    }
    const char *untied = "../shared/conformance/models/llama3/hf";
    if (tm_file_exists("../shared/conformance/models/llama3/hf/config.json")) {
        tm_convert_opts_default(&o);
        o.n_chunks = 1;
        rc = tm_convert(untied, out, &o, NULL, &err);
        CHECKF(rc == TM_OK, "%s", err.msg);
        if (rc == TM_OK && tm_pkg_open(&p, out, &err) == TM_OK) {
            CHECK(tm_pkg_lookup(p, TM_PKG_DECODE, "lm_head.weight", &h, &err) == TM_OK && h.dtype == TM_DT_Q6G64);
            CHECK(tm_pkg_lookup(p, TM_PKG_PREFILL, "lm_head.weight", &h, &err) == TM_OK && h.dtype == TM_DT_Q8PC);
            CHECK(tm_pkg_lookup(p, TM_PKG_DECODE, "model.layers.0.self_attn.q_proj.weight", &wq, &err) == TM_OK &&
                  wq.dtype == TM_DT_Q4G64);
            tm_pkg_close(p);
        }
    } else {
        printf("SKIP: %s not found: untied head encoding not checked\n", untied);
    }
    unlink(out);
    tm_convert_opts_default(&o);
    o.head_enc = TM_DT_BF16;
    CHECK_EQ_INT(tm_convert(DEMO, out, &o, NULL, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "--head-enc") != NULL);
    CHECK(!tm_file_exists(out));
}

int main(void)
{
    snprintf(pkg_path, sizeof pkg_path, "build/test_pkg_%ld.tdm", (long)getpid());
    for (size_t i = 0; i + 1 < sizeof tokenizer_text; i++) tokenizer_text[i] = (char)('a' + i % 26);
    make_specs();
    test_xxh64();
    test_roundtrip();
    test_empty_package();
    test_writer_validation();
    test_interrupted_write();
    test_convert();
    test_convert_head();
    tm_err err = {0};
    char *buf = NULL;
    if (tm_read_file(pkg_path, &buf, &image_size, 0, &err) == TM_OK) {
        image = (uint8_t *)buf;
        test_corruption();
        test_index_flips();
    } else {
        CHECKF(0, "%s", err.msg);
    }
    free(buf);
    unlink(pkg_path);
    for (int i = 0; i < N_SPECS; i++) {
        free(specs[i].data);
        free(specs[i].scales);
    }
    return th_done("test_pkg");
}
