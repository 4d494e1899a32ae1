/* tests/test_hf.c: safetensors parsing and validation (single and sharded),
 * config.json parsing, the architecture table's resolution and validation,
 * and tensor binding errors. Malformed files are generated here under
 * build/test_hf/ (nothing binary is committed). Every error case checks the
 * status code and that the message names the file and the field. */
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "harness.h"
#include "hf/config.h"
#include "hf/hf_model.h"
#include "hf/safetensors.h"
#include "hf/synth.h"
#include "model/model.h"
#include "tandem.h"

#include <cjson/cJSON.h>
#include <dirent.h>

#define TMP "build/test_hf"

static int contains(const char *s, const char *sub) { return s && sub && strstr(s, sub) != NULL; }

/* a safetensors image: 8-byte length, header, then `data` bytes */
static uint8_t *st_image(const char *header, const void *data, size_t dn, size_t *size)
{
    size_t hn = strlen(header);
    uint8_t *b = calloc(1, 8 + hn + dn + 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hn >> (8 * i));
    memcpy(b + 8, header, hn);
    if (dn) memcpy(b + 8 + hn, data, dn);
    *size = 8 + hn + dn;
    return b;
}

/* parse an image expecting failure: check code and message fragments */
static void st_bad(const char *header, size_t dn, int want, const char *frag1, const char *frag2)
{
    uint8_t zero[256] = {0};
    size_t size;
    uint8_t *img = st_image(header, zero, dn, &size);
    tm_st_file *f = NULL;
    tm_err err = {0};
    int rc = tm_st_parse(&f, img, size, "bad.safetensors", &err);
    CHECKF(rc == want, "header %s: rc %d (%s), want %d", header, rc, err.msg, want);
    CHECKF(contains(err.msg, "bad.safetensors") && contains(err.msg, frag1) && (!frag2 || contains(err.msg, frag2)),
           "header %s: message '%s' lacks '%s' / '%s'", header, err.msg, frag1, frag2 ? frag2 : "");
    CHECK(f == NULL);
    tm_st_close(f);
    free(img);
}

static void test_safetensors(void)
{
    /* a valid file: two tensors and metadata */
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t b[2] = {0x3f80, 0xc000}; /* bf16 1.0, -2.0 */
    uint8_t data[32];
    memcpy(data, a, 24);
    memcpy(data + 24, b, 4);
    int64_t i64 = 7;
    memcpy(data + 28, &i64, 4); /* 4 bytes: an I32 scalar */
    size_t size;
    uint8_t *img = st_image("{\"__metadata__\":{\"format\":\"pt\"},"
                            "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                            "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[24,28]},"
                            "\"n\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[28,32]}}   ",
                            data, 32, &size);
    tm_st_file *f = NULL;
    tm_err err = {0};
    CHECK_EQ_INT(tm_st_parse(&f, img, size, "ok.safetensors", &err), TM_OK);
    if (f) {
        CHECK_EQ_INT(tm_st_count(f), 3);
        CHECK_EQ_STR(tm_st_metadata(f, "format"), "pt");
        tm_tensor t;
        CHECK_EQ_INT(tm_st_find(f, "w", &t, &err), TM_OK);
        CHECK_EQ_INT(t.dtype, TM_DT_F32);
        CHECK_EQ_INT(t.ndim, 2);
        CHECK_EQ_INT(t.shape[0], 2);
        CHECK_EQ_INT(t.shape[1], 3);
        CHECK_EQ_INT(t.nbytes, 24);
        CHECK(memcmp(t.data, a, 24) == 0);
        CHECK_EQ_INT(tm_st_find(f, "b", &t, &err), TM_OK);
        CHECK_EQ_INT(t.dtype, TM_DT_BF16);
        uint16_t h;
        memcpy(&h, (const uint8_t *)t.data + 2, 2); /* this header leaves the data unaligned */
        CHECK_NEAR(tm_bf16_to_f32(h), -2.0, 0);
        CHECK_EQ_INT(tm_st_find(f, "n", &t, &err), TM_E_UNSUPPORTED);
        CHECK(contains(err.msg, "ok.safetensors") && contains(err.msg, "'n'") && contains(err.msg, "I32"));
        CHECK_EQ_INT(tm_st_find(f, "nope", &t, &err), TM_E_NOTFOUND);
        CHECK(contains(err.msg, "nope"));
    }
    tm_st_close(f);
    free(img);

    /* malformed images */
    tm_err e2 = {0};
    uint8_t tiny[5] = {1, 2, 3, 4, 5};
    f = NULL;
    CHECK_EQ_INT(tm_st_parse(&f, tiny, 5, "bad.safetensors", &e2), TM_E_FORMAT);
    CHECK(contains(e2.msg, "bad.safetensors") && contains(e2.msg, "truncated"));
    uint8_t big[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}'};
    CHECK_EQ_INT(tm_st_parse(&f, big, 16, "bad.safetensors", &e2), TM_E_FORMAT);
    CHECK(contains(e2.msg, "header length 65535") && contains(e2.msg, "past the end"));
    uint8_t huge[16] = {0, 0, 0, 0, 0, 0, 0, 0x80};
    CHECK_EQ_INT(tm_st_parse(&f, huge, 16, "bad.safetensors", &e2), TM_E_FORMAT);
    st_bad("{\"w\":{\"dtype\":\"F32\",", 0, TM_E_FORMAT, "not valid JSON", NULL);
    st_bad("[1,2]", 0, TM_E_FORMAT, "not a JSON object", NULL);
    st_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", 4, TM_E_FORMAT, "trailing", NULL);
    st_bad("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, TM_E_FORMAT, "'w'", "missing 'dtype'");
    st_bad("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, TM_E_FORMAT, "'w'", "missing 'shape'");
    st_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, TM_E_FORMAT, "'w'", "missing 'data_offsets'");
    st_bad("{\"w\":{\"dtype\":\"Q9\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, TM_E_FORMAT, "'w'", "unknown dtype");
    st_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, TM_E_FORMAT, "'w'", "shape[0]");
    st_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, TM_E_FORMAT, "'w'", "shape[0]");
    st_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
           TM_E_FORMAT, "'w'", "absurd");
    st_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, TM_E_FORMAT, "'w'", "need 8");
    st_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, TM_E_FORMAT, "'w'", "past the end");
    st_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, TM_E_FORMAT, "'w'", "end before");
    st_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, TM_E_FORMAT, "'w'", "data_offsets");
    st_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, TM_E_FORMAT, "overlap", NULL);
    st_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, TM_E_FORMAT, "belong to no tensor", NULL);
    st_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, TM_E_FORMAT, "belong to no tensor", NULL);
    st_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, TM_E_FORMAT, "'a' appears twice", NULL);
    st_bad("{\"__metadata__\":{\"k\":1}}", 0, TM_E_FORMAT, "__metadata__", NULL);
    st_bad("{\"__metadata__\":{},\"__metadata__\":{}}", 0, TM_E_FORMAT, "'__metadata__' appears twice", NULL);
    st_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, TM_E_FORMAT, "'w'",
           "dimensions");
}

static int write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    fclose(f);
    return w == n ? 0 : -1;
}

static void write_str(const char *path, const char *s) { CHECK(write_file(path, s, strlen(s)) == 0); }

static void test_sharded(void)
{
    mkdir(TMP, 0755);
    mkdir(TMP "/shard", 0755);
    float x[2] = {1.5f, -3.0f}, y[3] = {7, 8, 9};
    size_t n1, n2;
    uint8_t *s1 = st_image("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", x, 8, &n1);
    uint8_t *s2 = st_image("{\"y\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", y, 12, &n2);
    CHECK(write_file(TMP "/shard/model-00001-of-00002.safetensors", s1, n1) == 0);
    CHECK(write_file(TMP "/shard/model-00002-of-00002.safetensors", s2, n2) == 0);
    free(s1);
    free(s2);
    remove(TMP "/shard/model.safetensors");
    write_str(TMP "/shard/model.safetensors.index.json",
              "{\"metadata\":{\"total_size\":20},\"weight_map\":{\"x\":\"model-00001-of-00002.safetensors\","
              "\"y\":\"model-00002-of-00002.safetensors\"}}");
    tm_st_set *s = NULL;
    tm_err err = {0};
    CHECK_EQ_INT(tm_st_set_open(&s, TMP "/shard", &err), TM_OK);
    if (s) {
        CHECK_EQ_INT(tm_st_set_nfiles(s), 2);
        tm_tensor t;
        CHECK_EQ_INT(tm_st_set_lookup(s, "y", &t, &err), TM_OK);
        float v;
        memcpy(&v, (const uint8_t *)t.data + 8, 4);
        CHECK(t.shape[0] == 3 && v == 9.0f);
        CHECK_EQ_INT(tm_st_set_lookup(s, "x", &t, &err), TM_OK);
        memcpy(&v, (const uint8_t *)t.data + 4, 4);
        CHECK(v == -3.0f);
        CHECK_EQ_INT(tm_st_set_lookup(s, "z", &t, &err), TM_E_NOTFOUND);
        CHECK(contains(err.msg, "'z'"));
    }
    tm_st_set_close(s);
    /* the index puts a tensor in the wrong shard */
    write_str(TMP "/shard/model.safetensors.index.json",
              "{\"weight_map\":{\"x\":\"model-00002-of-00002.safetensors\"}}");
    s = NULL;
    CHECK_EQ_INT(tm_st_set_open(&s, TMP "/shard", &err), TM_OK);
    if (s) {
        tm_tensor t;
        CHECK_EQ_INT(tm_st_set_lookup(s, "x", &t, &err), TM_E_FORMAT);
        CHECK(contains(err.msg, "model.safetensors.index.json") && contains(err.msg, "'x'"));
    }
    tm_st_set_close(s);
    /* a missing shard, a path outside the directory, no weight_map */
    write_str(TMP "/shard/model.safetensors.index.json", "{\"weight_map\":{\"x\":\"model-00009.safetensors\"}}");
    CHECK_EQ_INT(tm_st_set_open(&s, TMP "/shard", &err), TM_E_IO);
    CHECK(contains(err.msg, "model-00009.safetensors") && contains(err.msg, "weight_map['x']"));
    write_str(TMP "/shard/model.safetensors.index.json", "{\"weight_map\":{\"x\":\"../../etc/passwd\"}}");
    CHECK_EQ_INT(tm_st_set_open(&s, TMP "/shard", &err), TM_E_FORMAT);
    CHECK(contains(err.msg, "model.safetensors.index.json") && contains(err.msg, "weight_map['x']"));
    write_str(TMP "/shard/model.safetensors.index.json", "{\"metadata\":{}}");
    CHECK_EQ_INT(tm_st_set_open(&s, TMP "/shard", &err), TM_E_FORMAT);
    CHECK(contains(err.msg, "weight_map"));
    write_str(TMP "/shard/model.safetensors.index.json", "{\"weight_map\":");
    CHECK_EQ_INT(tm_st_set_open(&s, TMP "/shard", &err), TM_E_FORMAT);
    CHECK_EQ_INT(tm_st_set_open(&s, TMP "/nonexistent", &err), TM_E_NOTFOUND);
}

/* ---- config.json and the architecture table ---- */

static const char *LLAMA =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"vocab_size\":512,\"hidden_size\":128,"
    "\"intermediate_size\":256,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
    "\"rms_norm_eps\":1e-5,\"rope_theta\":500000.0,\"torch_dtype\":\"bfloat16\",\"tie_word_embeddings\":false,"
    "\"bos_token_id\":0,\"eos_token_id\":[1,2]}";

/* parse text and build a model; returns rc, fills *mp (caller frees) */
static int model_from(const char *text, tm_model **mp, tm_err *err)
{
    tm_hf_config c;
    *mp = NULL;
    int rc = tm_hf_config_parse(&c, text, strlen(text), "config.json", err);
    if (rc) return rc;
    rc = tm_model_init(mp, &c, err);
    tm_hf_config_free(&c);
    return rc;
}

static int spec_has(const tm_model *m, const char *name)
{
    for (int i = 0; i < m->n_spec; i++)
        if (strcmp(m->spec[i].name, name) == 0) return 1;
    return 0;
}

/* the spec named name, or NULL */
static const tm_tensor_spec *spec_named(const tm_model *m, const char *name)
{
    for (int i = 0; i < m->n_spec; i++)
        if (strcmp(m->spec[i].name, name) == 0) return &m->spec[i];
    return NULL;
}

/* LLAMA with key k replaced by value v (v NULL: removed) */
static char *llama_with(const char *k, const char *v)
{
    static char buf[4096];
    char key[128];
    snprintf(key, sizeof key, "\"%s\":", k);
    const char *p = strstr(LLAMA, key);
    if (!p) { /* add it */
        snprintf(buf, sizeof buf, "{%s%s,%s", key, v, LLAMA + 1);
        return buf;
    }
    const char *e = p + strlen(key);
    int depth = 0;
    while (*e && !(depth == 0 && (*e == ',' || *e == '}'))) {
        if (*e == '[' || *e == '{') depth++;
        if (*e == ']' || *e == '}') depth--;
        e++;
    }
    if (v) snprintf(buf, sizeof buf, "%.*s%s%s%s", (int)(p - LLAMA), LLAMA, key, v, e);
    else snprintf(buf, sizeof buf, "%.*s%s", (int)(p - LLAMA), LLAMA, *e == ',' ? e + 1 : e);
    return buf;
}

static void cfg_bad(const char *k, const char *v, int want, const char *frag)
{
    tm_model *m;
    tm_err err = {0};
    int rc = model_from(llama_with(k, v), &m, &err);
    CHECKF(rc == want, "%s = %s: rc %d (%s), want %d", k, v ? v : "(removed)", rc, err.msg, want);
    CHECKF(contains(err.msg, "config.json") && contains(err.msg, frag), "%s = %s: message '%s' lacks '%s'", k,
           v ? v : "(removed)", err.msg, frag);
    tm_model_free(m);
}

static void test_config(void)
{
    tm_model *m = NULL;
    tm_err err = {0};
    CHECK_EQ_INT(model_from(LLAMA, &m, &err), TM_OK);
    if (m) {
        CHECK_EQ_INT(m->arch, TM_ARCH_LLAMA);
        CHECK_EQ_INT(m->V, 512);
        CHECK_EQ_INT(m->Dh, 32);
        CHECK_EQ_INT(m->Hk, 2);
        CHECK_EQ_INT(m->tied, 0);
        CHECK_EQ_INT(m->dtype, TM_DT_BF16);
        CHECK_EQ_INT(m->n_eos, 2);
        CHECK_EQ_INT(m->eos_ids[1], 2);
        CHECK_NEAR(m->rope[0].theta, 500000.0, 0);
        CHECK_EQ_INT(m->rope[0].type, TM_ROPE_DEFAULT);
        CHECK_NEAR(m->attn_scale, 1 / sqrt(32.0), 1e-7);
        /* 2 layers x 9 tensors + embed + norm + lm_head */
        CHECK_EQ_INT(m->n_spec, 21);
        CHECK_EQ_STR(m->spec[m->n_spec - 1].name, "lm_head.weight");
    }
    tm_model_free(m);

    cfg_bad("hidden_size", NULL, TM_E_INVALID, "'hidden_size' is missing");
    cfg_bad("hidden_size", "null", TM_E_INVALID, "'hidden_size' is null");
    cfg_bad("hidden_size", "\"128\"", TM_E_INVALID, "'hidden_size' must be an integer");
    cfg_bad("hidden_size", "128.5", TM_E_INVALID, "'hidden_size' must be an integer");
    cfg_bad("hidden_size", "-128", TM_E_INVALID, "'hidden_size' = -128");
    cfg_bad("hidden_size", "2000000", TM_E_INVALID, "'hidden_size' = 2000000");
    cfg_bad("hidden_size", "130", TM_E_INVALID, "'hidden_size' = 130 is not divisible by 'num_attention_heads'");
    cfg_bad("num_attention_heads", "0", TM_E_INVALID, "'num_attention_heads' = 0");
    cfg_bad("num_key_value_heads", "3", TM_E_INVALID, "'num_key_value_heads' = 3 does not divide");
    cfg_bad("num_key_value_heads", "-1", TM_E_INVALID, "'num_key_value_heads'");
    cfg_bad("intermediate_size", "-5", TM_E_INVALID, "'intermediate_size' = -5");
    cfg_bad("num_hidden_layers", "0", TM_E_INVALID, "'num_hidden_layers' = 0");
    cfg_bad("vocab_size", "0", TM_E_INVALID, "'vocab_size' = 0");
    cfg_bad("vocab_size", "20000000", TM_E_INVALID, "'vocab_size' = 20000000");
    cfg_bad("rms_norm_eps", "0", TM_E_INVALID, "'rms_norm_eps'");
    cfg_bad("rms_norm_eps", "\"x\"", TM_E_INVALID, "'rms_norm_eps' must be a number");
    cfg_bad("head_dim", "0", TM_E_INVALID, "'head_dim' = 0");
    cfg_bad("rope_theta", "-1", TM_E_INVALID, "'rope_theta'");
    cfg_bad("tie_word_embeddings", "1", TM_E_INVALID, "'tie_word_embeddings' must be true or false");
    cfg_bad("architectures", "[\"FooForCausalLM\"]", TM_E_UNSUPPORTED, "'FooForCausalLM' is not supported");
    cfg_bad("hidden_act", "\"mish\"", TM_E_UNSUPPORTED, "'hidden_act' = 'mish'");
    cfg_bad("torch_dtype", "\"float64\"", TM_E_UNSUPPORTED, "'torch_dtype' = 'float64'");
    cfg_bad("rope_scaling", "{\"rope_type\":\"dynamic\",\"factor\":2.0}", TM_E_UNSUPPORTED, "'dynamic'");
    cfg_bad("rope_scaling", "{\"rope_type\":\"linear\"}", TM_E_INVALID, "'rope_scaling.factor' is missing");
    cfg_bad("rope_scaling", "{\"rope_type\":\"llama3\",\"factor\":8.0}", TM_E_INVALID, "low_freq_factor");
    cfg_bad("rope_scaling", "[1]", TM_E_INVALID, "'rope_scaling' must be an object");
    cfg_bad("rope_scaling", "{\"rope_type\":\"longrope\",\"short_factor\":[1,2],\"long_factor\":[1,2]}", TM_E_INVALID,
            "16 entries");
    cfg_bad("partial_rotary_factor", "1.5", TM_E_INVALID, "'partial_rotary_factor'");
    cfg_bad("layer_types", "[\"full_attention\"]", TM_E_INVALID, "'layer_types' has 1 entries");
    cfg_bad("layer_types", "[\"full_attention\",\"chunked_attention\"]", TM_E_UNSUPPORTED, "chunked_attention");
    cfg_bad("eos_token_id", "\"x\"", TM_E_INVALID, "'eos_token_id'");
    {
        tm_hf_config c;
        CHECK_EQ_INT(tm_hf_config_parse(&c, "{\"a\":", 5, "config.json", &err), TM_E_FORMAT);
        CHECK(contains(err.msg, "config.json") && contains(err.msg, "JSON"));
        CHECK_EQ_INT(tm_hf_config_parse(&c, "{\"vocab_size\":5}", 16, "config.json", &err), TM_OK);
        CHECK_EQ_INT(tm_model_init(&m, &c, &err), TM_E_INVALID);
        CHECK(contains(err.msg, "'architectures' is missing"));
        tm_hf_config_free(&c);
    }
    /* a model_type without architectures is enough */
    CHECK_EQ_INT(model_from(llama_with("architectures", NULL), &m, &err), TM_OK);
    tm_model_free(m);
}

/* per-architecture defaults and rules */
/* A source with every tensor m's specs name (zeros, f32) except the per-expert ones, which it holds as the
 * Hub's MXFP4 GPT-OSS checkpoints do (<layer>.mlp.experts.gate_up_proj_blocks, and no gate_up_proj) */
static int mxfp4_lookup(void *ctx, const char *name, tm_tensor *out, tm_err *err)
{
    const tm_model *m = ctx;
    static float zeros[1 << 16];
    if (strstr(name, ".experts.gate_up_proj_blocks")) {
        *out = (tm_tensor){name, TM_DT_I8, 1, {16}, zeros, 16, NULL};
        return TM_OK;
    }
    for (int i = 0; i < m->n_spec && !strstr(name, ".experts."); i++) {
        const tm_tensor_spec *s = &m->spec[i];
        if (strcmp(s->name, name) != 0) continue;
        int64_t n = s->shape[0] * (s->ndim == 2 ? s->shape[1] : 1);
        if (n > 1 << 16) break;
        *out = (tm_tensor){name, TM_DT_F32, s->ndim, {s->shape[0], s->shape[1]}, zeros, sizeof(float) * (size_t)n, NULL};
        return TM_OK;
    }
    return tm_errf(err, TM_E_NOTFOUND, "tensor '%s' not found", name);
}

/* MXFP4 blocks of the wrong dtype and shape (and no scales): refused, naming the tensor */
static void gpt_oss_mxfp4(tm_model *m)
{
    tm_err err = {0};
    tm_tensor_source src = {m, mxfp4_lookup, 0};
    CHECK_EQ_INT(tm_model_bind(m, &src, &err), TM_E_INVALID);
    CHECKF(contains(err.msg, "model.layers.0.mlp.experts.gate_up_proj_blocks") && contains(err.msg, "MXFP4"), "%s",
           err.msg);
}

static void test_arch_rules(void)
{
    tm_model *m = NULL;
    tm_err err = {0};
    /* Gemma 3 in Hub style: pattern 6, local base, linear scaling on global layers only */
    const char *g3 = "{\"architectures\":[\"Gemma3ForCausalLM\"],\"model_type\":\"gemma3_text\",\"vocab_size\":256,"
                     "\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":12,\"num_attention_heads\":4,"
                     "\"num_key_value_heads\":1,\"head_dim\":32,\"rope_theta\":1000000.0,\"rope_local_base_freq\":10000.0,"
                     "\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":8.0},\"sliding_window\":512,"
                     "\"sliding_window_pattern\":6,\"query_pre_attn_scalar\":256,\"torch_dtype\":\"bfloat16\"}";
    CHECK_EQ_INT(model_from(g3, &m, &err), TM_OK);
    if (m) {
        CHECK_EQ_INT(m->arch, TM_ARCH_GEMMA3);
        CHECK_EQ_INT(m->tied, 1);
        CHECK_EQ_INT(m->qk_norm, 1);
        CHECK_EQ_INT(m->norm_add_one, 1);
        CHECK_EQ_INT(m->n_rope, 2);
        int ok = 1;
        for (int l = 0; l < 12; l++) {
            int full = l == 5 || l == 11;
            ok &= m->layer[l].sliding == !full && m->layer[l].rope == (full ? 0 : 1) && m->layer[l].window == (full ? 0 : 512);
        }
        CHECK(ok);
        CHECK_EQ_INT(m->rope[0].type, TM_ROPE_LINEAR);
        CHECK_NEAR(m->rope[0].theta, 1e6, 0);
        CHECK_EQ_INT(m->rope[1].type, TM_ROPE_DEFAULT);
        CHECK_NEAR(m->rope[1].theta, 1e4, 0);
        CHECK_NEAR(m->attn_scale, 1.0 / 16, 0);
        CHECK_NEAR(m->embed_scale, 8.0, 0);
        CHECK_NEAR(m->attn_softcap, 0, 0);
        CHECK_NEAR(m->final_softcap, 0, 0);
        CHECK_EQ_INT(m->act, TM_ACT_GELU_TANH);
    }
    tm_model_free(m);
    /* the same as Gemma3ForConditionalGeneration's text_config */
    char mm[2048];
    snprintf(mm, sizeof mm, "{\"architectures\":[\"Gemma3ForConditionalGeneration\"],\"model_type\":\"gemma3\","
             "\"text_config\":%s,\"vision_config\":{\"hidden_size\":1152}}", g3);
    CHECK_EQ_INT(model_from(mm, &m, &err), TM_OK);
    if (m) {
        CHECK_EQ_INT(m->arch, TM_ARCH_GEMMA3);
        CHECK_EQ_STR(m->prefix, "language_model.model.");
        CHECK_EQ_INT(m->layer[5].sliding, 0);
    }
    tm_model_free(m);
    /* gemma-3-4b style: sizes the text_config leaves out come from Gemma3TextConfig's defaults */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Gemma3ForConditionalGeneration\"],\"text_config\":{\"hidden_size\":2560,"
                            "\"intermediate_size\":10240,\"model_type\":\"gemma3_text\",\"num_hidden_layers\":34,"
                            "\"rope_scaling\":{\"factor\":8.0,\"rope_type\":\"linear\"},\"sliding_window\":1024},"
                            "\"torch_dtype\":\"bfloat16\"}", &m, &err), TM_OK);
    if (m) CHECK(m->V == 262208 && m->H == 8 && m->Hk == 4 && m->Dh == 256 && m->L == 34 && m->layer[5].sliding == 0 &&
                 m->layer[4].window == 1024 && m->dtype == TM_DT_BF16 && m->rope[0].type == TM_ROPE_LINEAR);
    tm_model_free(m);
    snprintf(mm, sizeof mm, "{\"architectures\":[\"Gemma3ForConditionalGeneration\"],\"text_config\":"
             "{\"hidden_size\":64,\"vocab_size\":8,\"intermediate_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":0}}");
    CHECK_EQ_INT(model_from(mm, &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "'text_config.num_attention_heads' = 0"));
    /* Gemma 2 defaults: tied, alternate sliding layers, softcaps 50 / 30, head_dim 256 */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Gemma2ForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":3,\"num_attention_heads\":2}", &m, &err), TM_OK);
    if (m) {
        CHECK(m->tied && m->Dh == 256 && m->attn_softcap == 50.0f && m->final_softcap == 30.0f);
        CHECK(m->layer[0].sliding && !m->layer[1].sliding && m->layer[2].sliding && m->layer[0].window == 4096);
        CHECK_NEAR(m->embed_scale, 8.0, 0);
    }
    tm_model_free(m);
    /* Mistral: sliding_window absent → 4096 everywhere, null → none */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"MistralForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":2,\"num_attention_heads\":2}", &m, &err), TM_OK);
    if (m) CHECK(m->layer[0].sliding && m->layer[1].window == 4096 && !m->tied);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"MistralForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":2,\"num_attention_heads\":2,"
                            "\"sliding_window\":null}", &m, &err), TM_OK);
    if (m) CHECK(!m->layer[0].sliding && !m->layer[1].sliding);
    tm_model_free(m);
    /* Qwen2: sliding only with use_sliding_window, from max_window_layers on; q/k/v biases, no o bias */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Qwen2ForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":3,\"num_attention_heads\":2,"
                            "\"use_sliding_window\":true,\"sliding_window\":64,\"max_window_layers\":2}", &m, &err), TM_OK);
    if (m) CHECK(!m->layer[0].sliding && !m->layer[1].sliding && m->layer[2].sliding && m->qkv_bias && !m->o_bias);
    tm_model_free(m);
    /* Phi-3: fused projections, partial rotary */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Phi3ForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                            "\"partial_rotary_factor\":0.5}", &m, &err), TM_OK);
    if (m) {
        CHECK(m->fused_qkv && m->fused_gate_up && m->rope[0].rot_dim == 16);
        CHECK(contains(m->spec[2].name, "qkv_proj") && m->spec[2].shape[0] == 3 * 64);
    }
    tm_model_free(m);
    /* Qwen3-MoE: Hub key num_experts, mlp_only_layers, decoder_sparse_step */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":32,\"num_hidden_layers\":4,\"num_attention_heads\":2,"
                            "\"num_experts\":4,\"num_experts_per_tok\":2,\"moe_intermediate_size\":16,"
                            "\"norm_topk_prob\":true,\"mlp_only_layers\":[0],\"decoder_sparse_step\":1}", &m, &err), TM_OK);
    if (m) CHECK(m->n_experts == 4 && m->top_k == 2 && m->F_expert == 16 && m->norm_topk_prob && !m->layer[0].moe &&
                 m->layer[1].moe && m->layer[3].moe);
    tm_model_free(m);
    /* Gemma (1): (1+w) norms and sqrt(D) but no sandwich norms, no soft-caps, head_dim^-0.5, hidden_act */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"GemmaForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":2,\"num_attention_heads\":2,\"head_dim\":16,"
                            "\"hidden_act\":\"gelu_pytorch_tanh\"}", &m, &err), TM_OK);
    if (m) CHECK(m->tied && m->norm_add_one && !m->post_attn_norm && !m->post_ffn_norm && m->attn_softcap == 0 &&
                 m->final_softcap == 0 && m->attn_scale == 0.25f && m->embed_scale == 8.0f && m->act == TM_ACT_GELU_TANH &&
                 !m->layer[0].sliding);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"GemmaForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":2,\"num_attention_heads\":2,"
                            "\"hidden_act\":\"gelu\"}", &m, &err), TM_OK); /* the Hub's gemma-2b: exact GELU in transformers 5 */
    if (m) CHECK_EQ_INT(m->act, TM_ACT_GELU);
    tm_model_free(m);
    /* Granite: the four multipliers (transformers' default for each is 1, attention's included) */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"GraniteForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                            "\"embedding_multiplier\":12,\"logits_scaling\":8,\"residual_multiplier\":0.25,"
                            "\"attention_multiplier\":0.015625}", &m, &err), TM_OK);
    if (m) CHECK(m->embed_scale == 12.0f && m->logits_div == 8.0f && m->residual_scale == 0.25f &&
                 m->attn_scale == 0.015625f && !m->tied);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"GraniteForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2}", &m, &err), TM_OK);
    if (m) CHECK(m->embed_scale == 1.0f && m->logits_div == 1.0f && m->residual_scale == 1.0f && m->attn_scale == 1.0f);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"GraniteForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                            "\"residual_multiplier\":-1}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "config.json") && contains(err.msg, "'residual_multiplier'"));
    /* SmolLM3: no RoPE where no_rope_layers is 0; absent, every 4th layer; theta 2e6 by default */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"SmolLM3ForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":8,\"num_attention_heads\":2}", &m, &err), TM_OK);
    if (m) CHECK(m->layer[3].rope == -1 && m->layer[7].rope == -1 && m->layer[0].rope == 0 && m->layer[4].rope == 0 &&
                 m->rope[0].theta == 2e6 && m->tied && !m->layer[3].sliding);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"SmolLM3ForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":3,\"num_attention_heads\":2,"
                            "\"no_rope_layers\":[0,1,1],\"use_sliding_window\":true,\"sliding_window\":16}", &m, &err), TM_OK);
    if (m) CHECK(m->layer[0].rope == -1 && m->layer[0].sliding && m->layer[0].window == 16 && m->layer[1].rope == 0 &&
                 !m->layer[1].sliding);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"SmolLM3ForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":3,\"num_attention_heads\":2,"
                            "\"no_rope_layers\":[1,1]}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "'no_rope_layers' has 2 entries"));
    /* OLMo 2: no pre-norms, the post norms under their checkpoint names, q/k norms over the projections */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Olmo2ForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":4,"
                            "\"num_key_value_heads\":2}", &m, &err), TM_OK);
    if (m) {
        int qn = -1, kn = -1, pre = 0, pa = 0, pf = 0;
        for (int i = 0; i < m->n_spec; i++) {
            if (contains(m->spec[i].name, "q_norm")) qn = (int)m->spec[i].shape[0];
            if (contains(m->spec[i].name, "k_norm")) kn = (int)m->spec[i].shape[0];
            pre += contains(m->spec[i].name, "input_layernorm");
            pa += contains(m->spec[i].name, "post_attention_layernorm");
            pf += contains(m->spec[i].name, "post_feedforward_layernorm");
        }
        CHECK(!m->pre_norms && m->post_attn_norm && m->post_ffn_norm && m->qk_norm == 2 && !m->norm_add_one);
        CHECK(qn == 64 && kn == 32 && pre == 0 && pa == 1 && pf == 1 && !m->tied && m->eps == 1e-5f);
    }
    tm_model_free(m);
    /* Qwen2-MoE: Hub defaults (60 experts top-4, no renormalisation, shared expert 5632, q/k/v biases unless
       qkv_bias is false), the shared expert's four tensors, sliding_window 0 meaning none */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Qwen2MoeForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":32,\"num_hidden_layers\":2,\"num_attention_heads\":2,"
                            "\"sliding_window\":0}", &m, &err), TM_OK);
    if (m) {
        int shared = 0;
        for (int i = 0; i < m->n_spec; i++) shared += contains(m->spec[i].name, "shared_expert");
        CHECK(m->n_experts == 60 && m->top_k == 4 && m->F_expert == 1408 && m->F_shared == 5632 && !m->norm_topk_prob &&
              m->qkv_bias && !m->o_bias && shared == 8 && m->layer[0].moe && !m->layer[0].sliding);
    }
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Qwen2MoeForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":32,\"num_hidden_layers\":4,\"num_attention_heads\":2,\"qkv_bias\":false,"
                            "\"num_experts\":4,\"num_experts_per_tok\":2,\"shared_expert_intermediate_size\":0,"
                            "\"use_sliding_window\":true,\"sliding_window\":8,\"max_window_layers\":3}", &m, &err), TM_OK);
    if (m) CHECK(!m->qkv_bias && m->F_shared == 0 && m->layer[0].sliding && !m->layer[1].sliding && m->layer[2].sliding &&
                 !m->layer[3].sliding && m->layer[2].window == 8);
    tm_model_free(m);
    /* EXAONE 4: OLMo 2's norms, per-head q/k norms; hybrid attention: sliding layers with RoPE, global ones
       without; the pattern as an integer (default 4) or as "LLLG" (the last layer global) */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Exaone4ForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":5,\"num_attention_heads\":2}", &m, &err), TM_OK);
    if (m) CHECK(!m->pre_norms && m->post_attn_norm && m->qk_norm == 1 && m->layer[0].sliding && m->layer[0].rope == 0 &&
                 m->layer[0].window == 4096 && !m->layer[3].sliding && m->layer[3].rope == -1 && m->layer[4].sliding);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Exaone4ForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":3,\"num_attention_heads\":2,"
                            "\"sliding_window\":8,\"sliding_window_pattern\":\"LL\"}", &m, &err), TM_OK);
    if (m) CHECK(m->layer[0].sliding && m->layer[1].sliding && !m->layer[2].sliding && m->layer[2].rope == -1);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Exaone4ForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":2,\"num_attention_heads\":2,"
                            "\"sliding_window\":null}", &m, &err), TM_OK);
    if (m) CHECK(!m->layer[0].sliding && m->layer[0].rope == 0 && m->layer[1].rope == 0);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Exaone4ForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":2,\"num_attention_heads\":2,"
                            "\"sliding_window_pattern\":\"LXG\"}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "'sliding_window_pattern'"));
    /* the LayerNorm families: norm, biases, gating, parallel residual, names and RoPE defaults as their
       config classes have them */
#define SMALL "\"vocab_size\":8,\"hidden_size\":64,\"intermediate_size\":8,\"num_hidden_layers\":2,\"num_attention_heads\":4"
    CHECK_EQ_INT(model_from("{\"architectures\":[\"PhiForCausalLM\"]," SMALL "}", &m, &err), TM_OK);
    if (m) CHECK(m->norm == TM_NORM_LAYER && m->norm_bias && !m->gated && m->parallel == 1 && m->qkv_bias && m->o_bias &&
                 m->mlp_bias && m->lm_head_bias && m->rope[0].rot_dim == 8 && m->act == TM_ACT_GELU_TANH &&
                 m->eps == 1e-5f && spec_has(m, "model.layers.1.self_attn.dense.bias") &&
                 spec_has(m, "model.layers.0.mlp.fc1.weight") && spec_has(m, "model.final_layernorm.bias") &&
                 spec_has(m, "lm_head.bias") && !spec_has(m, "model.layers.0.post_attention_layernorm.weight"));
    tm_model_free(m);
    /* q/k LayerNorms: Phi's one [Dh] with bias, StableLM's one module per head (one [H][Dh] here), Cohere's
       [H][Dh] without bias, Persimmon's (on by default) */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"PhiForCausalLM\"]," SMALL ",\"qk_layernorm\":true}", &m, &err), TM_OK);
    if (m) CHECK(m->qk_norm == 1 && m->qk_norm_bias && !m->qk_norm_heads &&
                 spec_has(m, "model.layers.1.self_attn.k_layernorm.bias") && spec_has(m, "model.layers.1.self_attn.q_layernorm.weight"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"StableLmForCausalLM\"]," SMALL ",\"qk_layernorm\":true}", &m, &err), TM_OK);
    if (m) CHECK(m->qk_norm == 1 && !m->qk_norm_bias && m->qk_norm_heads && spec_has(m, "model.layers.0.self_attn.q_layernorm.weight"));
    for (int i = 0; m && i < m->n_spec; i++)
        if (strstr(m->spec[i].name, "k_layernorm")) CHECK(m->spec[i].ndim == 2 && m->spec[i].shape[0] == 4 && m->spec[i].shape[1] == 16);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"PersimmonForCausalLM\"]," SMALL "}", &m, &err), TM_OK);
    if (m) CHECK(m->qk_norm == 1 && m->qk_norm_bias && m->qkv_interleaved && m->act == TM_ACT_RELU2 && !m->gated &&
                 m->rope[0].rot_dim == 8 && m->max_pos == 16384 && spec_has(m, "model.layers.0.self_attn.query_key_value.bias") &&
                 spec_has(m, "model.final_layernorm.bias") && spec_has(m, "model.layers.0.mlp.dense_4h_to_h.bias"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Starcoder2ForCausalLM\"]," SMALL ",\"use_bias\":false,"
                            "\"norm_epsilon\":0.001,\"sliding_window\":32}", &m, &err), TM_OK);
    if (m) CHECK(m->norm == TM_NORM_LAYER && !m->qkv_bias && !m->mlp_bias && m->tied && m->eps == 1e-3f &&
                 m->layer[1].sliding && m->layer[1].window == 32 && m->rope[0].rot_dim == 16 &&
                 spec_has(m, "model.layers.0.mlp.c_proj.weight") && !spec_has(m, "model.layers.0.mlp.c_fc.bias"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Starcoder2ForCausalLM\"]," SMALL ",\"norm_epsilon\":2}", &m, &err),
                 TM_E_INVALID);
    CHECK(contains(err.msg, "'norm_epsilon'"));
    CHECK_EQ_INT(model_from("{\"architectures\":[\"StableLmForCausalLM\"]," SMALL ",\"use_parallel_residual\":true,"
                            "\"use_qkv_bias\":true}", &m, &err), TM_OK);
    if (m) CHECK(m->gated && m->parallel == 1 && m->qkv_bias && !m->o_bias && m->rope[0].rot_dim == 4 &&
                 m->act == TM_ACT_SILU && spec_has(m, "model.layers.0.mlp.gate_proj.weight") &&
                 !spec_has(m, "model.layers.0.post_attention_layernorm.weight"));
    tm_model_free(m);
    /* GPT-NeoX: the Hub's rotary_pct and rotary_emb_base; one kv head per head */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"GPTNeoXForCausalLM\"]," SMALL ",\"rotary_pct\":0.5,"
                            "\"rotary_emb_base\":5000}", &m, &err), TM_OK);
    if (m) CHECK(m->parallel == 2 && m->qkv_interleaved && m->fused_qkv && m->qkv_bias && m->act == TM_ACT_GELU &&
                 m->rope[0].rot_dim == 8 && m->rope[0].theta == 5000 && !m->tied &&
                 spec_has(m, "gpt_neox.layers.1.attention.query_key_value.bias") && spec_has(m, "embed_out.weight") &&
                 spec_has(m, "gpt_neox.embed_in.weight") && spec_has(m, "gpt_neox.final_layer_norm.bias"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"GPTNeoXForCausalLM\"]," SMALL ",\"use_parallel_residual\":false,"
                            "\"attention_bias\":false}", &m, &err), TM_OK);
    if (m) CHECK(m->parallel == 0 && !m->qkv_bias && !m->o_bias && m->mlp_bias && m->rope[0].rot_dim == 4);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"GPTNeoXForCausalLM\"]," SMALL ",\"num_key_value_heads\":2}", &m, &err),
                 TM_E_INVALID);
    CHECK(contains(err.msg, "'num_key_value_heads'"));
    /* GPT-2: GPT2Config's names of the sizes, n_inner null = 4 x n_embd, Conv1D weights (transposed when
       bound from a checkpoint), learned positions and no RoPE, the Hub's unprefixed names probed at bind */
#define GPT2 "{\"architectures\":[\"GPT2LMHeadModel\"],\"vocab_size\":8,\"n_embd\":64,\"n_layer\":2,\"n_head\":4"
    CHECK_EQ_INT(model_from(GPT2 ",\"n_inner\":null,\"n_positions\":64}", &m, &err), TM_OK);
    if (m) CHECK(m->D == 64 && m->L == 2 && m->H == 4 && m->F == 256 && m->max_pos == 64 && m->fused_qkv &&
                 !m->qkv_interleaved && m->qkv_bias && m->o_bias && m->mlp_bias && !m->gated && m->tied &&
                 m->act == TM_ACT_GELU_TANH && m->attn_scale == 0.25f && m->layer[0].rope == -1 &&
                 m->layer[1].rope == -1 && spec_has(m, "transformer.wpe.weight") &&
                 spec_has(m, "transformer.h.1.attn.c_attn.bias") && spec_has(m, "transformer.h.0.mlp.c_fc.weight") &&
                 spec_has(m, "transformer.ln_f.bias"));
    for (int i = 0; m && i < m->n_spec; i++)
        if (m->spec[i].kind == TM_TK_MATRIX) CHECKF(m->spec[i].hf_transposed, "%s not marked Conv1D", m->spec[i].name);
    tm_model_free(m);
    CHECK_EQ_INT(model_from(GPT2 ",\"n_inner\":96,\"activation_function\":\"gelu\",\"scale_attn_weights\":false,"
                            "\"layer_norm_epsilon\":0.001}", &m, &err), TM_OK);
    if (m) CHECK(m->F == 96 && m->max_pos == 1024 && m->act == TM_ACT_GELU && m->attn_scale == 1.0f && m->eps == 1e-3f);
    tm_model_free(m);
    CHECK_EQ_INT(model_from(GPT2 ",\"scale_attn_by_inverse_layer_idx\":true}", &m, &err), TM_E_UNSUPPORTED);
    CHECK(contains(err.msg, "config.json") && contains(err.msg, "'scale_attn_by_inverse_layer_idx'"));
    CHECK_EQ_INT(model_from(GPT2 ",\"activation_function\":\"quick_gelu\"}", &m, &err), TM_E_UNSUPPORTED);
    CHECK(contains(err.msg, "quick_gelu"));
    CHECK_EQ_INT(model_from("{\"architectures\":[\"GPT2LMHeadModel\"],\"vocab_size\":8,\"n_layer\":2,\"n_head\":4}",
                            &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "'n_embd' is missing"));
    /* Cohere and GPT-J: RoPE on interleaved pairs (q and k reordered when bound), Cohere's bias-free
       LayerNorm and logit_scale, GPT-J's rotary_dim */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"CohereForCausalLM\"]," SMALL "}", &m, &err), TM_OK);
    if (m) CHECK(m->norm == TM_NORM_LAYER && !m->norm_bias && m->gated && m->parallel == 1 && m->tied &&
                 m->logits_mul == 0.0625f && m->rope[0].theta == 5e5 && m->rope[0].rot_dim == 16 && !m->qkv_bias &&
                 !spec_has(m, "model.norm.bias"));
    for (int i = 0; m && i < m->n_spec; i++) {
        int qk = strstr(m->spec[i].name, "q_proj") || strstr(m->spec[i].name, "k_proj");
        CHECKF(m->spec[i].hf_rope_pairs == (qk ? 16 : 0), "%s: rope pairs %d", m->spec[i].name, m->spec[i].hf_rope_pairs);
    }
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"CohereForCausalLM\"]," SMALL ",\"use_qk_norm\":true}", &m, &err), TM_OK);
    if (m) CHECK(m->qk_norm == 1 && m->qk_norm_heads && !m->qk_norm_bias && spec_has(m, "model.layers.0.self_attn.q_norm.weight"));
    tm_model_free(m);
#define GPTJ "{\"architectures\":[\"GPTJForCausalLM\"],\"vocab_size\":8,\"n_embd\":64,\"n_layer\":2,\"n_head\":2"
    CHECK_EQ_INT(model_from(GPTJ ",\"rotary_dim\":8}", &m, &err), TM_OK);
    if (m) CHECK(m->Dh == 32 && m->F == 256 && m->rope[0].rot_dim == 8 && m->parallel == 1 && !m->gated &&
                 m->mlp_bias && m->lm_head_bias && !m->qkv_bias && !m->tied && m->layer[0].rope == 0 &&
                 spec_has(m, "transformer.h.1.attn.out_proj.weight") && spec_has(m, "transformer.h.0.mlp.fc_in.bias") &&
                 spec_has(m, "lm_head.bias") && !spec_has(m, "transformer.h.0.ln_2.weight"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from(GPTJ "}", &m, &err), TM_OK); /* default rotary_dim 64, at most head_dim */
    if (m) CHECK(m->rope[0].rot_dim == 32);
    tm_model_free(m);
    CHECK_EQ_INT(model_from(GPTJ ",\"rotary_dim\":7}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "'rotary_dim'"));
    CHECK_EQ_INT(model_from(GPTJ ",\"rotary_dim\":64}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "'rotary_dim'"));
#undef GPTJ
    /* OPT: ffn_dim, ReLU, learned positions from row 2, pre-norm only, no projections of the embedding */
#define OPT "{\"architectures\":[\"OPTForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,\"ffn_dim\":96," \
            "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"max_position_embeddings\":100"
    CHECK_EQ_INT(model_from(OPT "}", &m, &err), TM_OK);
    if (m) CHECK(m->F == 96 && m->act == TM_ACT_RELU && m->pos_offset == 2 && m->tied && m->qkv_bias && m->mlp_bias &&
                 m->layer[0].rope == -1 && !m->gated && !m->parallel && spec_has(m, "model.decoder.layers.1.fc2.bias") &&
                 spec_has(m, "model.decoder.layers.0.self_attn.out_proj.weight") &&
                 spec_has(m, "model.decoder.layers.0.final_layer_norm.bias") &&
                 spec_has(m, "model.decoder.final_layer_norm.weight"));
    for (int i = 0; m && i < m->n_spec; i++)
        if (m->spec[i].slot == &m->pos_embed) CHECK(m->spec[i].shape[0] == 102);
    tm_model_free(m);
    CHECK_EQ_INT(model_from(OPT ",\"enable_bias\":false}", &m, &err), TM_OK);
    if (m) CHECK(!m->qkv_bias && !m->o_bias && !m->mlp_bias);
    tm_model_free(m);
    CHECK_EQ_INT(model_from(OPT ",\"do_layer_norm_before\":false}", &m, &err), TM_E_UNSUPPORTED);
    CHECK(contains(err.msg, "do_layer_norm_before"));
    CHECK_EQ_INT(model_from(OPT ",\"word_embed_proj_dim\":32}", &m, &err), TM_E_UNSUPPORTED);
    CHECK(contains(err.msg, "'word_embed_proj_dim'"));
    CHECK_EQ_INT(model_from("{\"architectures\":[\"OPTForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"num_hidden_layers\":2,\"num_attention_heads\":4}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "'ffn_dim' is missing"));
#undef OPT
    /* Falcon: multi-query (one kv head, Q K V in turn) unless the new decoder or multi_query false (rows
       grouped by kv head), n_head / n_layer, ffn_hidden_size default 4 x hidden, parallel on one or two norms */
#define FALCON "{\"architectures\":[\"FalconForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,\"n_head\":4,\"n_layer\":2"
    CHECK_EQ_INT(model_from(FALCON "}", &m, &err), TM_OK);
    if (m) CHECK(m->H == 4 && m->L == 2 && m->Hk == 1 && m->F == 256 && m->fused_qkv && !m->qkv_interleaved &&
                 m->parallel == 1 && !m->qkv_bias && m->act == TM_ACT_GELU && m->tied &&
                 spec_has(m, "transformer.h.0.self_attention.query_key_value.weight") &&
                 spec_has(m, "transformer.h.1.input_layernorm.bias") && !spec_has(m, "transformer.h.1.ln_mlp.weight"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from(FALCON ",\"new_decoder_architecture\":true,\"num_kv_heads\":2,\"bias\":true}", &m, &err),
                 TM_OK);
    if (m) CHECK(m->Hk == 2 && m->qkv_interleaved && m->parallel == 2 && m->qkv_bias && m->mlp_bias &&
                 spec_has(m, "transformer.h.0.ln_mlp.bias") && spec_has(m, "transformer.h.0.self_attention.query_key_value.bias") &&
                 tm_qkv_row(m, 0, 3, 0) == 4 * 16 + 16 && tm_qkv_row(m, 2, 1, 5) == 4 * 16 + 3 * 16 + 5);
    tm_model_free(m);
    CHECK_EQ_INT(model_from(FALCON ",\"multi_query\":false,\"parallel_attn\":false}", &m, &err), TM_OK);
    if (m) CHECK(m->Hk == 4 && m->qkv_interleaved && m->parallel == 0 &&
                 spec_has(m, "transformer.h.0.post_attention_layernorm.weight"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from(FALCON ",\"alibi\":true}", &m, &err), TM_E_UNSUPPORTED);
    CHECK(contains(err.msg, "'alibi'"));
#undef FALCON
    /* BLOOM: ALiBi (no RoPE; BLOOM's slopes, H = 6 not a power of two), n_embed / n_layer / n_head, a LayerNorm
       on the embedding, query_key_value grouped by head, 4 x hidden MLP */
#define BLOOM "{\"architectures\":[\"BloomForCausalLM\"],\"vocab_size\":8,\"n_embed\":96,\"n_layer\":2,\"n_head\":6"
    CHECK_EQ_INT(model_from(BLOOM "}", &m, &err), TM_OK);
    if (m) CHECK(m->D == 96 && m->H == 6 && m->Hk == 6 && m->F == 384 && m->fused_qkv && m->qkv_interleaved &&
                 m->qkv_bias && m->o_bias && m->mlp_bias && m->tied && !m->parallel && m->act == TM_ACT_GELU_TANH &&
                 m->layer[0].rope == -1 && m->layer[1].rope == -1 && m->alibi && m->alibi[0] == 0.25f &&
                 m->alibi[3] == 0.00390625f && m->alibi[4] == 0.5f && m->alibi[5] == 0.125f &&
                 spec_has(m, "transformer.word_embeddings_layernorm.bias") &&
                 spec_has(m, "transformer.h.1.self_attention.query_key_value.bias") && spec_has(m, "transformer.ln_f.bias"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from(BLOOM ",\"apply_residual_connection_post_layernorm\":true}", &m, &err), TM_E_UNSUPPORTED);
    CHECK(contains(err.msg, "'apply_residual_connection_post_layernorm'"));
#undef BLOOM
    /* MPT: d_model / n_layers / n_heads / expansion_ratio / max_seq_len, ALiBi (the same slopes), attn_config's
       clip_qkv and softmax_scale, no biases, LayerNorm without bias */
#define MPT "{\"architectures\":[\"MptForCausalLM\"],\"vocab_size\":8,\"d_model\":96,\"n_layers\":2,\"n_heads\":6"
    CHECK_EQ_INT(model_from(MPT ",\"expansion_ratio\":2,\"max_seq_len\":300,\"attn_config\":{\"clip_qkv\":6,"
                            "\"softmax_scale\":0.5}}", &m, &err), TM_OK);
    if (m) CHECK(m->D == 96 && m->H == 6 && m->F == 192 && m->max_pos == 300 && m->fused_qkv && !m->qkv_interleaved &&
                 !m->qkv_bias && !m->mlp_bias && !m->norm_bias && m->tied && m->act == TM_ACT_GELU &&
                 m->clip_qkv == 6.0f && m->attn_scale == 0.5f && m->layer[0].rope == -1 && m->alibi &&
                 m->alibi[0] == 0.25f && m->alibi[1] == 0.0625f && m->alibi[4] == 0.5f && m->alibi[5] == 0.125f &&
                 spec_has(m, "transformer.blocks.1.attn.Wqkv.weight") && spec_has(m, "transformer.norm_f.weight") &&
                 !spec_has(m, "transformer.norm_f.bias") && spec_has(m, "transformer.blocks.0.ffn.up_proj.weight"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from(MPT "}", &m, &err), TM_OK); /* defaults: 4 x d_model, 2048 positions, head_dim^-0.5 */
    if (m) CHECK(m->F == 384 && m->max_pos == 2048 && m->attn_scale == 0.25f && m->clip_qkv == 0);
    tm_model_free(m);
    CHECK_EQ_INT(model_from(MPT ",\"attn_config\":{\"qk_ln\":true}}", &m, &err), TM_E_UNSUPPORTED);
    CHECK(contains(err.msg, "'attn_config.qk_ln'"));
    CHECK_EQ_INT(model_from(MPT ",\"no_bias\":false}", &m, &err), TM_E_UNSUPPORTED);
    CHECK(contains(err.msg, "'no_bias'"));
    CHECK_EQ_INT(model_from(MPT ",\"attn_config\":{\"clip_qkv\":-1}}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "'attn_config.clip_qkv'"));
    CHECK_EQ_INT(model_from(MPT ",\"attn_config\":[1]}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "'attn_config'"));
    CHECK_EQ_INT(model_from("{\"architectures\":[\"MptForCausalLM\"],\"vocab_size\":8,\"n_layers\":2,\"n_heads\":6}",
                            &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "'d_model' is missing"));
#undef MPT
    /* GPTBigCode: GPT-2's names and sizes with Linear weights (not transposed), multi-query by default */
#define BIGCODE "{\"architectures\":[\"GPTBigCodeForCausalLM\"],\"vocab_size\":8,\"n_embd\":64,\"n_layer\":2,\"n_head\":4"
    CHECK_EQ_INT(model_from(BIGCODE "}", &m, &err), TM_OK);
    if (m) CHECK(m->Hk == 1 && m->F == 256 && m->max_pos == 1024 && m->fused_qkv && !m->qkv_interleaved && m->qkv_bias &&
                 m->tied && m->act == TM_ACT_GELU_TANH && m->layer[0].rope == -1 && !m->alibi &&
                 spec_has(m, "transformer.wpe.weight") && spec_has(m, "transformer.h.0.attn.c_attn.bias"));
    for (int i = 0; m && i < m->n_spec; i++) CHECKF(!m->spec[i].hf_transposed, "%s marked Conv1D", m->spec[i].name);
    for (int i = 0; m && i < m->n_spec; i++)
        if (strstr(m->spec[i].name, "c_attn.weight")) CHECK(m->spec[i].shape[0] == 64 + 2 * 16);
    tm_model_free(m);
    CHECK_EQ_INT(model_from(BIGCODE ",\"multi_query\":false,\"scale_attn_weights\":false}", &m, &err), TM_OK);
    if (m) CHECK(m->Hk == 4 && m->qkv_interleaved && m->attn_scale == 1.0f);
    tm_model_free(m);
#undef BIGCODE
    /* GPT-Neo: num_layers / num_heads, global and local layers (attention_layers, or attention_types expanded,
       or the default alternation), window_size, no attention scaling */
#define NEO "{\"architectures\":[\"GPTNeoForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,\"num_layers\":4,\"num_heads\":4"
    CHECK_EQ_INT(model_from(NEO ",\"attention_types\":[[[\"local\",\"global\"],1],[[\"global\"],2]],\"window_size\":7,"
                            "\"intermediate_size\":null}", &m, &err), TM_OK);
    if (m) CHECK(m->L == 4 && m->F == 256 && m->attn_scale == 1.0f && !m->qkv_bias && m->o_bias && m->mlp_bias &&
                 m->layer[0].sliding && m->layer[0].window == 7 && !m->layer[1].sliding && !m->layer[2].sliding &&
                 !m->layer[3].sliding && m->layer[0].rope == -1 && m->tied &&
                 spec_has(m, "transformer.h.3.attn.attention.out_proj.bias") &&
                 spec_has(m, "transformer.h.0.attn.attention.q_proj.weight") &&
                 !spec_has(m, "transformer.h.0.attn.attention.q_proj.bias"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from(NEO ",\"attention_layers\":[\"global\",\"local\",\"local\",\"global\"]}", &m, &err), TM_OK);
    if (m) CHECK(!m->layer[0].sliding && m->layer[1].sliding && m->layer[1].window == 256 && m->layer[2].sliding &&
                 !m->layer[3].sliding);
    tm_model_free(m);
    CHECK_EQ_INT(model_from(NEO "}", &m, &err), TM_OK);
    if (m) CHECK(!m->layer[0].sliding && m->layer[1].sliding && !m->layer[2].sliding && m->layer[3].sliding);
    tm_model_free(m);
    CHECK_EQ_INT(model_from(NEO ",\"attention_layers\":[\"global\",\"local\"]}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "'attention_layers'"));
    CHECK_EQ_INT(model_from(NEO ",\"attention_layers\":[\"global\",\"sparse\",\"local\",\"global\"]}", &m, &err),
                 TM_E_UNSUPPORTED);
    CHECK(contains(err.msg, "'attention_layers'[1]") && contains(err.msg, "sparse"));
    CHECK_EQ_INT(model_from(NEO ",\"attention_types\":[[\"global\",4]]}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "'attention_types'"));
    CHECK_EQ_INT(model_from(NEO ",\"attention_types\":[[[\"global\"],1e9]]}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "'attention_types'"));
#undef NEO
    /* OLMo: LayerNorm without parameters (no norm tensors), clip_qkv */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"OlmoForCausalLM\"]," SMALL ",\"clip_qkv\":8}", &m, &err), TM_OK);
    if (m) CHECK(m->norm == TM_NORM_LAYER && m->norm_plain && !m->norm_bias && m->gated && m->clip_qkv == 8.0f &&
                 m->eps == 1e-5f && !m->tied && m->rope[0].rot_dim == 16 && !spec_has(m, "model.norm.weight") &&
                 !spec_has(m, "model.layers.0.input_layernorm.weight") && spec_has(m, "model.layers.0.mlp.gate_proj.weight"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"OlmoForCausalLM\"]," SMALL ",\"clip_qkv\":0}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "'clip_qkv'"));
    /* OLMo 3: OLMo 2's layer, every 4th layer global by default, a RoPE per layer type (nested in
       rope_parameters; Hub style: rope_theta and rope_scaling for the full layers, the default base 5e5 for
       the sliding ones, as Olmo3Config reads them) */
#define OLMO3 "{\"architectures\":[\"Olmo3ForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,\"intermediate_size\":8," \
              "\"num_hidden_layers\":4,\"num_attention_heads\":4,\"sliding_window\":32"
    CHECK_EQ_INT(model_from(OLMO3 ",\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"default\",\"rope_theta\":1e6},"
                            "\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":1e4}}}", &m, &err), TM_OK);
    if (m) CHECK(!m->pre_norms && m->qk_norm == 2 && m->post_attn_norm && m->n_rope == 2 && m->rope[0].theta == 1e6 &&
                 m->rope[1].theta == 1e4 && m->layer[0].sliding && m->layer[0].window == 32 && m->layer[0].rope == 1 &&
                 m->layer[2].rope == 1 && !m->layer[3].sliding && m->layer[3].rope == 0);
    tm_model_free(m);
    CHECK_EQ_INT(model_from(OLMO3 ",\"rope_theta\":1e4,\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":2}}", &m, &err),
                 TM_OK);
    if (m) CHECK(m->rope[0].theta == 1e4 && m->rope[0].type == TM_ROPE_LINEAR && m->rope[1].theta == 5e5 &&
                 m->rope[1].type == TM_ROPE_DEFAULT);
    tm_model_free(m);
#undef OLMO3
    /* Ministral: a window on every layer unless layer_types says otherwise */
#define MINISTRAL "{\"architectures\":[\"MinistralForCausalLM\"]," SMALL ",\"sliding_window\":32"
    CHECK_EQ_INT(model_from(MINISTRAL "}", &m, &err), TM_OK);
    if (m) CHECK(m->layer[0].sliding && m->layer[1].sliding && m->layer[1].window == 32);
    tm_model_free(m);
    CHECK_EQ_INT(model_from(MINISTRAL ",\"layer_types\":[\"full_attention\",\"sliding_attention\"]}", &m, &err), TM_OK);
    if (m) CHECK(!m->layer[0].sliding && m->layer[1].sliding);
    tm_model_free(m);
#undef MINISTRAL
    /* GLM, GLM-4: fused gate_up_proj, q/k/v biases only (attention_bias, default true), partial rotary 0.5
       on interleaved pairs (q, k reordered when bound), head_dim 128 by default; GLM-4's sandwich norms */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"GlmForCausalLM\"]," SMALL "}", &m, &err), TM_OK);
    if (m) CHECK(m->Dh == 128 && m->rope[0].rot_dim == 64 && m->fused_gate_up && !m->fused_qkv && m->qkv_bias &&
                 !m->o_bias && m->eps == 1.5625e-7f && !m->post_attn_norm && spec_has(m, "model.layers.0.mlp.gate_up_proj.weight") &&
                 spec_has(m, "model.layers.0.self_attn.q_proj.bias") && !spec_has(m, "model.layers.0.self_attn.o_proj.bias"));
    for (int i = 0; m && i < m->n_spec; i++) {
        int qk = strstr(m->spec[i].name, "q_proj") || strstr(m->spec[i].name, "k_proj");
        CHECKF(m->spec[i].hf_rope_pairs == (qk ? 64 : 0), "%s: rope pairs %d", m->spec[i].name, m->spec[i].hf_rope_pairs);
    }
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Glm4ForCausalLM\"]," SMALL ",\"attention_bias\":false,\"head_dim\":16}",
                            &m, &err), TM_OK);
    if (m) CHECK(!m->qkv_bias && m->rope[0].rot_dim == 8 && m->post_attn_norm && m->post_ffn_norm &&
                 spec_has(m, "model.layers.1.post_self_attn_layernorm.weight") &&
                 spec_has(m, "model.layers.1.post_mlp_layernorm.weight") &&
                 spec_has(m, "model.layers.1.post_attention_layernorm.weight"));
    tm_model_free(m);
    /* Cohere 2: sliding_window_pattern (default 4), RoPE on the sliding layers only (none at all without a
       window), logit_scale */
#define COHERE2 "{\"architectures\":[\"Cohere2ForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,\"intermediate_size\":8," \
                "\"num_hidden_layers\":4,\"num_attention_heads\":4"
    CHECK_EQ_INT(model_from(COHERE2 ",\"sliding_window\":32,\"logit_scale\":0.25}", &m, &err), TM_OK);
    if (m) CHECK(m->layer[0].sliding && m->layer[0].rope == 0 && m->layer[2].sliding && !m->layer[3].sliding &&
                 m->layer[3].rope == -1 && m->logits_mul == 0.25f && m->parallel == 1 && m->tied);
    tm_model_free(m);
    CHECK_EQ_INT(model_from(COHERE2 ",\"sliding_window\":32,\"sliding_window_pattern\":2}", &m, &err), TM_OK);
    if (m) CHECK(m->layer[0].sliding && !m->layer[1].sliding && m->layer[1].rope == -1 && m->layer[2].rope == 0);
    tm_model_free(m);
    CHECK_EQ_INT(model_from(COHERE2 ",\"sliding_window\":null}", &m, &err), TM_OK);
    if (m) CHECK(!m->layer[0].sliding && m->layer[0].rope == -1 && m->layer[3].rope == -1);
    tm_model_free(m);
#undef COHERE2
    /* OLMoE: experts of intermediate_size on every layer (64 top-8 by default, no renormalisation), q/k norms
       over the whole projections; clip_qkv (after those norms) refused */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"OlmoeForCausalLM\"]," SMALL "}", &m, &err), TM_OK);
    if (m) CHECK(m->n_experts == 64 && m->top_k == 8 && m->F_expert == 8 && !m->norm_topk_prob && m->qk_norm == 2 &&
                 m->pre_norms && m->layer[0].moe && m->layer[1].moe && spec_has(m, "model.layers.1.mlp.experts.63.down_proj.weight") &&
                 spec_has(m, "model.layers.0.mlp.gate.weight"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"OlmoeForCausalLM\"]," SMALL ",\"num_experts\":4,\"num_experts_per_tok\":2,"
                            "\"norm_topk_prob\":true}", &m, &err), TM_OK);
    if (m) CHECK(m->n_experts == 4 && m->top_k == 2 && m->norm_topk_prob);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"OlmoeForCausalLM\"]," SMALL ",\"clip_qkv\":8}", &m, &err), TM_E_UNSUPPORTED);
    CHECK(contains(err.msg, "'clip_qkv'"));
    /* Nemotron: LayerNorm1P ((1 + w), with bias; norm_eps), relu² MLP without a gate, partial rotary 0.5 */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"NemotronForCausalLM\"]," SMALL ",\"norm_eps\":1e-3}", &m, &err), TM_OK);
    if (m) CHECK(m->norm == TM_NORM_LAYER && m->norm_bias && m->norm_add_one && m->act == TM_ACT_RELU2 && !m->gated &&
                 m->eps == 1e-3f && m->rope[0].rot_dim == 8 && spec_has(m, "model.layers.0.mlp.up_proj.weight") &&
                 !spec_has(m, "model.layers.0.mlp.gate_proj.weight") && spec_has(m, "model.norm.bias"));
    tm_model_free(m);
    /* GraniteMoE: Granite's multipliers, experts of intermediate_size stored 3-D (input_linear / output_linear,
       bound as views), the router as router.layer, top-k renormalised; -shared: a shared MLP without a gate */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"GraniteMoeSharedForCausalLM\"]," SMALL ",\"num_local_experts\":4,"
                            "\"shared_intermediate_size\":24,\"residual_multiplier\":0.25}", &m, &err), TM_OK);
    if (m) CHECK(m->n_experts == 4 && m->top_k == 2 && m->F_expert == 8 && m->F_shared == 24 && !m->shared_gate &&
                 m->norm_topk_prob && m->residual_scale == 0.25f && m->layer[1].moe &&
                 spec_has(m, "model.layers.0.block_sparse_moe.router.layer.weight") &&
                 spec_has(m, "model.layers.0.shared_mlp.up_proj.weight") && !spec_has(m, "model.layers.0.mlp.shared_expert_gate.weight"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"GraniteMoeForCausalLM\"]," SMALL "}", &m, &err), TM_OK);
    if (m) CHECK(m->n_experts == 8 && m->F_shared == 0);
    tm_model_free(m);
    /* Arcee: Llama with an MLP without a gate (relu2); ERNIE 4.5: use_bias on every linear, RoPE on interleaved
       pairs, base 5e5, tied, head_dim 128; CodeGen: GPT-J's sizes and layer, qkv_proj permuted (hf_codegen) */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"ArceeForCausalLM\"]," SMALL "}", &m, &err), TM_OK);
    if (m) CHECK(!m->gated && m->act == TM_ACT_RELU2 && m->norm == TM_NORM_RMS && !spec_has(m, "model.layers.0.mlp.gate_proj.weight") &&
                 spec_has(m, "model.layers.0.mlp.up_proj.weight"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Ernie4_5ForCausalLM\"]," SMALL ",\"use_bias\":true}", &m, &err), TM_OK);
    if (m) CHECK(m->Dh == 128 && m->tied && m->qkv_bias && m->o_bias && m->mlp_bias && m->rope[0].theta == 5e5 &&
                 spec_has(m, "model.layers.0.mlp.gate_proj.bias") && spec_has(m, "model.layers.0.self_attn.o_proj.bias"));
    for (int i = 0; m && i < m->n_spec; i++) {
        int qk = strstr(m->spec[i].name, "q_proj") || strstr(m->spec[i].name, "k_proj");
        CHECKF(m->spec[i].hf_rope_pairs == (qk ? 128 : 0), "%s: rope pairs %d", m->spec[i].name, m->spec[i].hf_rope_pairs);
    }
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"CodeGenForCausalLM\"],\"vocab_size\":8,\"n_embd\":64,\"n_layer\":2,"
                            "\"n_head\":4,\"rotary_dim\":8}", &m, &err), TM_OK);
    if (m) CHECK(m->fused_qkv && !m->qkv_interleaved && m->parallel == 1 && m->lm_head_bias && m->mlp_bias && !m->qkv_bias &&
                 m->F == 256 && m->rope[0].rot_dim == 8 && spec_has(m, "transformer.h.0.attn.qkv_proj.weight"));
    for (int i = 0; m && i < m->n_spec; i++)
        CHECKF(m->spec[i].hf_codegen == (strstr(m->spec[i].name, "qkv_proj") != NULL), "%s", m->spec[i].name);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"CodeGenForCausalLM\"],\"vocab_size\":8,\"n_embd\":96,\"n_layer\":2,"
                            "\"n_head\":6}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "divisible by 4"));
    /* GPT-OSS: biases on q, k, v, o by default, sinks, experts of intermediate_size (128 top-4 by default) with
       biases on them and the router, the clamped SwiGLU whatever hidden_act says, head_dim 64, every other layer
       sliding from layer 0 (window 128) unless layer_types says otherwise */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"GptOssForCausalLM\"]," SMALL ",\"hidden_act\":\"gelu\"}", &m, &err),
                 TM_OK);
    if (m) CHECK(m->n_experts == 128 && m->top_k == 4 && m->F_expert == 8 && m->norm_topk_prob && m->expert_bias &&
                 m->attn_sinks && m->qkv_bias && m->o_bias && m->act == TM_ACT_SWIGLU_OAI && m->Dh == 64 &&
                 m->layer[0].sliding && m->layer[0].window == 128 && !m->layer[1].sliding &&
                 m->rope[0].theta == 1.5e5 && spec_has(m, "model.layers.0.self_attn.sinks") &&
                 spec_has(m, "model.layers.0.self_attn.o_proj.bias") && spec_has(m, "model.layers.1.mlp.router.bias") &&
                 spec_has(m, "model.layers.1.mlp.experts.127.down_proj.bias") &&
                 spec_has(m, "model.layers.1.mlp.experts.0.gate_proj.weight"));
    if (m) gpt_oss_mxfp4(m);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"GptOssForCausalLM\"]," SMALL ",\"attention_bias\":false,"
                            "\"layer_types\":[\"full_attention\",\"sliding_attention\"],\"sliding_window\":64}", &m, &err),
                 TM_OK);
    if (m) CHECK(!m->qkv_bias && !m->o_bias && !m->layer[0].sliding && m->layer[1].window == 64 &&
                 !spec_has(m, "model.layers.0.self_attn.q_proj.bias") && spec_has(m, "model.layers.0.self_attn.sinks"));
    tm_model_free(m);
    /* DeepSeek-V3 by its config class's defaults: MLA (q_lora 1536, kv_lora 512, 128 + 64 q/k dims, values 128;
       absorbed: one latent kv head of 64 + 512 whatever num_key_value_heads and head_dim say), 256 experts top-8 in 8 groups
       (best 4), dense below layer 3; YaRN with mscale_all_dim scales the attention by mscale^2 */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"DeepseekV3ForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":8,\"num_hidden_layers\":4,\"num_attention_heads\":4,"
                            "\"num_key_value_heads\":1,\"head_dim\":64,\"rope_scaling\":{\"type\":\"yarn\","
                            "\"factor\":40,\"mscale\":1.0,\"mscale_all_dim\":1.0,"
                            "\"original_max_position_embeddings\":4096}}", &m, &err), TM_OK);
    if (m) {
        double ms = 0.1 * log(40.0) + 1.0;
        const tm_tensor_spec *qb = spec_named(m, "model.layers.0.self_attn.q_b_proj.weight");
        const tm_tensor_spec *kva = spec_named(m, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight");
        const tm_tensor_spec *kvb = spec_named(m, "model.layers.3.self_attn.kv_b_proj.weight");
        const tm_tensor_spec *cor = spec_named(m, "model.layers.3.mlp.gate.e_score_correction_bias");
        const tm_tensor_spec *o = spec_named(m, "model.layers.3.self_attn.o_proj.weight");
        CHECK(m->mla && m->q_lora == 1536 && m->kv_lora == 512 && m->Dh == 576 && m->Hk == 1 && m->v_dim == 128 &&
              m->rope[0].rot_dim == 64 && m->mla_interleave && m->n_experts == 256 && m->top_k == 8 &&
              m->n_group == 8 && m->topk_group == 4 && m->group_top2 && m->router_sigmoid && m->norm_topk_prob &&
              m->routed_scale == 2.5f && m->F_expert == 2048 && m->F_shared == 2048 && !m->layer[2].moe &&
              m->layer[3].moe && fabs(m->attn_scale - pow(192, -0.5) * ms * ms) < 1e-6 * m->attn_scale);
        CHECK(qb && qb->hf_mla == 1 && qb->shape[0] == 4 * 192 && qb->shape[1] == 1536 && kva && kva->hf_mla == 2 &&
              kva->shape[0] == 576 && kvb && kvb->shape[0] == 4 * 256 && kvb->shape[1] == 512 && cor && cor->any_float &&
              o && o->shape[1] == 4 * 128 && spec_has(m, "model.layers.3.mlp.shared_experts.down_proj.weight") &&
              !spec_has(m, "model.layers.0.self_attn.k_proj.weight") && !spec_has(m, "model.layers.0.mlp.gate.weight"));
    }
    tm_model_free(m);
    /* DeepSeek-V2: q_lora_rank null is a plain q_proj; softmax greedy routing, no renormalisation whatever
       norm_topk_prob says, no groups; rope_interleave is not read (its RoPE is always on pairs) */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"DeepseekV2ForCausalLM\"]," SMALL ",\"q_lora_rank\":null,"
                            "\"num_experts_per_tok\":6,\"norm_topk_prob\":true,\"rope_interleave\":false}", &m, &err),
                 TM_OK);
    if (m) CHECK(m->mla && m->q_lora == 0 && spec_has(m, "model.layers.0.self_attn.q_proj.weight") &&
                 !spec_has(m, "model.layers.0.self_attn.q_a_proj.weight") && m->n_experts == 64 && m->top_k == 6 &&
                 !m->norm_topk_prob && !m->router_sigmoid && m->n_group == 1 && m->F_shared == 2 * 1407 &&
                 m->layer[0].moe && m->mla_interleave && !spec_has(m, "model.layers.0.mlp.gate.e_score_correction_bias"));
    tm_model_free(m);
    /* session 52's: each by its config class's defaults (Hub-style configs may leave any key out) */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Glm4MoeForCausalLM\"]," SMALL ",\"attention_bias\":true}", &m, &err),
                 TM_OK);
    if (m) CHECK(!m->mla && m->qkv_bias && !m->o_bias && !m->qk_norm && m->rope[0].rot_dim == m->Dh / 2 &&
                 m->n_experts == 128 && m->top_k == 8 && m->F_expert == 1408 && m->F_shared == 1408 &&
                 m->n_group == 1 && m->router_sigmoid && m->router_has_corr && m->norm_topk_prob &&
                 m->routed_scale == 1.0f && !m->layer[0].moe && m->layer[1].moe &&
                 spec_has(m, "model.layers.1.mlp.gate.e_score_correction_bias") &&
                 spec_has(m, "model.layers.0.self_attn.q_proj.bias") && !spec_has(m, "model.layers.0.self_attn.o_proj.bias"));
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Glm4MoeLiteForCausalLM\"]," SMALL ",\"rms_norm_eps\":1e-5}", &m, &err),
                 TM_OK);
    if (m) CHECK(m->mla && m->q_lora == 768 && m->qk_nope == 192 && m->v_dim == 256 && m->n_experts == 64 &&
                 m->top_k == 4 && m->F_expert == 1536 && m->routed_scale == 1.8f && m->mla_eps == 1e-6f &&
                 m->eps == 1e-5f && !m->layer[0].moe && m->layer[1].moe);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Ernie4_5_MoeForCausalLM\"]," SMALL ",\"moe_layer_start_index\":0,"
                            "\"moe_layer_interval\":2}", &m, &err), TM_OK);
    if (m) CHECK(m->n_experts == 64 && m->top_k == 6 && m->F_expert == 1536 && m->F_shared == 2 * 1536 &&
                 !m->router_sigmoid && m->router_has_corr && m->norm_topk_prob && m->tied && !m->layer[0].moe &&
                 m->layer[1].moe && spec_named(m, "model.layers.1.mlp.moe_statics.e_score_correction_bias") &&
                 spec_named(m, "model.layers.1.mlp.moe_statics.e_score_correction_bias")->hf_lead1 &&
                 spec_named(m, "model.layers.1.mlp.gate.weight")->any_float);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Dots1ForCausalLM\"]," SMALL ",\"n_routed_experts\":8,"
                            "\"n_shared_experts\":2,\"num_experts_per_tok\":2,\"mlp_layer_types\":[\"sparse\",\"dense\"]}",
                            &m, &err), TM_OK);
    if (m) CHECK(m->qk_norm && m->n_experts == 8 && !m->norm_topk_prob && m->router_sigmoid && m->layer[0].moe &&
                 !m->layer[1].moe && !m->layer[0].sliding && !m->layer[1].sliding);
    tm_model_free(m);
    CHECK_EQ_INT(model_from("{\"architectures\":[\"SeedOssForCausalLM\"]," SMALL "}", &m, &err), TM_OK);
    if (m) CHECK(m->qkv_bias && !m->o_bias && !m->mlp_bias && m->Dh == 128);
    tm_model_free(m);
    struct { const char *cfg; int rc; const char *frag; } dsbad[] = {
        {"\"architectures\":[\"Dots1ForCausalLM\"],\"num_experts_per_tok\":2", TM_E_INVALID, "'n_routed_experts' is missing"},
        {"\"architectures\":[\"Glm4MoeForCausalLM\"],\"mlp_layer_types\":[\"dense\"]", TM_E_INVALID, "'mlp_layer_types' has 1"},
        {"\"architectures\":[\"Glm4MoeForCausalLM\"],\"mlp_layer_types\":[\"dense\",\"moe\"]", TM_E_UNSUPPORTED,
         "'mlp_layer_types'[1] = 'moe'"},
        {"\"architectures\":[\"Ernie4_5_MoeForCausalLM\"],\"moe_k\":65", TM_E_INVALID, "'moe_k' = 65"},
        {"\"architectures\":[\"Ernie4_5_MoeForCausalLM\"],\"use_bias\":true", TM_E_UNSUPPORTED, "'use_bias'"},
        {"\"architectures\":[\"DeepseekV2ForCausalLM\"]", TM_E_INVALID, "'num_experts_per_tok' is missing"},
        {"\"architectures\":[\"DeepseekV2ForCausalLM\"],\"num_experts_per_tok\":2,\"topk_method\":\"noaux_tc\"",
         TM_E_UNSUPPORTED, "'topk_method' = 'noaux_tc'"},
        {"\"architectures\":[\"DeepseekV2ForCausalLM\"],\"num_experts_per_tok\":2,\"topk_method\":"
         "\"group_limited_greedy\",\"n_group\":3,\"topk_group\":1", TM_E_INVALID, "'n_group' = 3"},
        {"\"architectures\":[\"DeepseekV3ForCausalLM\"],\"n_group\":8,\"topk_group\":1,\"num_experts_per_tok\":40",
         TM_E_INVALID, "'num_experts_per_tok' = 40"},
        {"\"architectures\":[\"DeepseekV3ForCausalLM\"],\"kv_lora_rank\":65500", TM_E_UNSUPPORTED, "at most 65536"},
        {"\"architectures\":[\"DeepseekV3ForCausalLM\"],\"qk_rope_head_dim\":7", TM_E_UNSUPPORTED, "must be even"},
        {"\"architectures\":[\"DeepseekV2ForCausalLM\"],\"num_experts_per_tok\":2,\"mlp_bias\":true",
         TM_E_UNSUPPORTED, "'mlp_bias'"},
    };
    for (size_t i = 0; i < sizeof dsbad / sizeof dsbad[0]; i++) {
        char cfg[512];
        snprintf(cfg, sizeof cfg, "{%s," SMALL "}", dsbad[i].cfg);
        CHECK_EQ_INT(model_from(cfg, &m, &err), dsbad[i].rc);
        CHECKF(contains(err.msg, dsbad[i].frag), "case %zu: %s", i, err.msg);
    }
#undef GPT2
#undef SMALL
    /* an absurd number of expert tensors is refused before anything is allocated for them */
    CHECK_EQ_INT(model_from("{\"architectures\":[\"MixtralForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":32,\"num_hidden_layers\":10000,\"num_attention_heads\":2,"
                            "\"num_local_experts\":65536}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "config.json") && contains(err.msg, "experts") && contains(err.msg, "absurd"));
    CHECK_EQ_INT(model_from("{\"architectures\":[\"MixtralForCausalLM\"],\"vocab_size\":8,\"hidden_size\":64,"
                            "\"intermediate_size\":32,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                            "\"num_local_experts\":4,\"num_experts_per_tok\":5}", &m, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "num_experts_per_tok"));
}

/* ---- binding a real checkpoint with a wrong config ---- */

static void copy_file(const char *from, const char *to, size_t limit)
{
    char *buf = NULL;
    size_t n = 0;
    tm_err err = {0};
    CHECK(tm_read_file(from, &buf, &n, 0, &err) == TM_OK);
    if (buf) CHECK(write_file(to, buf, limit && limit < n ? limit : n) == 0);
    free(buf);
}

/* the llama3 fixture's config.json with the first occurrence of `from`
 * replaced by `to`, into TMP/bind/config.json */
static void bind_config_sub(const char *from, const char *to)
{
    char src[1024], *text = NULL, out[8192];
    size_t n = 0;
    tm_err err = {0};
    snprintf(src, sizeof src, "%s/conformance/models/llama3/hf/config.json", th_shared());
    CHECK(tm_read_file(src, &text, &n, 0, &err) == TM_OK);
    if (!text) return;
    char *p = strstr(text, from);
    CHECKF(p != NULL, "'%s' not in %s", from, src);
    if (p) snprintf(out, sizeof out, "%.*s%s%s", (int)(p - text), text, to, p + strlen(from));
    else snprintf(out, sizeof out, "%s", text);
    write_str(TMP "/bind/config.json", out);
    free(text);
}

/* ... with the value of key k (up to the end of its line) set to v */
static void bind_config(const char *k, const char *v)
{
    char from[128], to[256];
    snprintf(from, sizeof from, "\"%s\": ", k);
    snprintf(to, sizeof to, "\"%s\": %s, \"_was_%s\": ", k, v, k);
    bind_config_sub(from, to);
}

static void test_bind(void)
{
    char src[1024];
    mkdir(TMP "/bind", 0755);
    snprintf(src, sizeof src, "%s/conformance/models/llama3/hf/model.safetensors", th_shared());
    copy_file(src, TMP "/bind/model.safetensors", 0);
    tm_model *m = NULL;
    tm_err err = {0};
    bind_config("torch_dtype", "\"bfloat16\"");
    CHECK_EQ_INT(tm_hf_model_open(&m, TMP "/bind", NULL, &err), TM_OK);
    tm_model_free(m);
    /* a dtype that does not match the config */
    bind_config("torch_dtype", "\"float32\"");
    CHECK_EQ_INT(tm_hf_model_open(&m, TMP "/bind", NULL, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "model.embed_tokens.weight") && contains(err.msg, "bf16") && contains(err.msg, "f32"));
    /* shapes that do not match */
    bind_config("intermediate_size", "128");
    CHECK_EQ_INT(tm_hf_model_open(&m, TMP "/bind", NULL, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "model.layers.0.mlp.gate_proj.weight") && contains(err.msg, "[256, 128]") &&
          contains(err.msg, "[128, 128]"));
    /* a tensor that is not there */
    bind_config("attention_bias", "true");
    CHECK_EQ_INT(tm_hf_model_open(&m, TMP "/bind", NULL, &err), TM_E_NOTFOUND);
    CHECK(contains(err.msg, "model.safetensors") && contains(err.msg, "q_proj.bias"));
    /* a config problem is reported before the weights are touched */
    bind_config("num_attention_heads", "0");
    CHECK_EQ_INT(tm_hf_model_open(&m, TMP "/bind", NULL, &err), TM_E_INVALID);
    CHECK(contains(err.msg, "config.json") && contains(err.msg, "num_attention_heads"));
    bind_config_sub("LlamaForCausalLM", "MambaForCausalLM");
    CHECK_EQ_INT(tm_hf_model_open(&m, TMP "/bind", NULL, &err), TM_E_UNSUPPORTED);
    CHECK(contains(err.msg, "config.json") && contains(err.msg, "MambaForCausalLM"));
    /* a truncated safetensors file */
    bind_config("torch_dtype", "\"bfloat16\"");
    copy_file(src, TMP "/bind/model.safetensors", 4000);
    CHECK_EQ_INT(tm_hf_model_open(&m, TMP "/bind", NULL, &err), TM_E_FORMAT);
    CHECK(contains(err.msg, "model.safetensors") && contains(err.msg, "past the end"));
    copy_file(src, TMP "/bind/model.safetensors", 6);
    CHECK_EQ_INT(tm_hf_model_open(&m, TMP "/bind", NULL, &err), TM_E_FORMAT);
    CHECK(contains(err.msg, "model.safetensors") && contains(err.msg, "truncated"));
    /* header offsets that overlap: corrupt the file's first data_offsets end */
    {
        char *buf = NULL;
        size_t n = 0;
        CHECK(tm_read_file(src, &buf, &n, 0, &err) == TM_OK);
        char *p = buf ? strstr(buf + 8, "\"data_offsets\":[0,") : NULL;
        CHECK(p != NULL);
        if (p) {
            p += strlen("\"data_offsets\":[0,");
            p[0] = '9'; /* the first tensor now ends far later: overlaps the next one or runs past the end */
            CHECK(write_file(TMP "/bind/model.safetensors", buf, n) == 0);
            CHECK_EQ_INT(tm_hf_model_open(&m, TMP "/bind", NULL, &err), TM_E_FORMAT);
            CHECK(contains(err.msg, "model.safetensors") && contains(err.msg, "data_offsets"));
        }
        free(buf);
    }
    /* a missing config */
    remove(TMP "/bind/config.json");
    CHECK_EQ_INT(tm_hf_model_open(&m, TMP "/bind", NULL, &err), TM_E_IO);
    CHECK(contains(err.msg, "config.json"));
}

/* ---- GPT-OSS's MXFP4 experts, dequantized at bind ---- */

typedef struct st_entry_out {
    char name[128];
    const char *dtype;
    int ndim;
    int64_t shape[4];
    const void *data;
    size_t nbytes;
} st_entry_out;

/* a safetensors file of e[n] at path (header JSON, 8-byte aligned, then the data in order) */
static int st_write(const char *path, const st_entry_out *e, int n)
{
    cJSON *h = cJSON_CreateObject();
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        cJSON *t = cJSON_AddObjectToObject(h, e[i].name), *sh = cJSON_AddArrayToObject(t, "shape");
        cJSON_AddStringToObject(t, "dtype", e[i].dtype);
        for (int d = 0; d < e[i].ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)e[i].shape[d]));
        cJSON *o = cJSON_AddArrayToObject(t, "data_offsets");
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + e[i].nbytes)));
        off += e[i].nbytes;
    }
    char *js = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    FILE *f = js ? fopen(path, "wb") : NULL;
    if (!f) {
        free(js);
        return -1;
    }
    uint64_t hl = (strlen(js) + 7) / 8 * 8;
    fwrite(&hl, 8, 1, f);
    fputs(js, f);
    for (size_t k = strlen(js); k < hl; k++) fputc(' ', f);
    for (int i = 0; i < n; i++) fwrite(e[i].data, 1, e[i].nbytes, f);
    free(js);
    return fclose(f);
}

/* dir := src's files but its weights (config, tokenizer) */
static void copy_side_files(const char *src, const char *dir)
{
    mkdir(dir, 0755);
    DIR *d = opendir(src);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || strstr(de->d_name, ".safetensors")) continue;
        char a[512], b[512];
        snprintf(a, sizeof a, "%s/%s", src, de->d_name);
        snprintf(b, sizeof b, "%s/%s", dir, de->d_name);
        char *text = th_slurp(a);
        FILE *f = text ? fopen(b, "wb") : NULL;
        if (f) fputs(text, f), fclose(f);
        free(text);
    }
    if (d) closedir(d);
}

static uint64_t mx_rng = 0x2545F4914F6CDD1Dull;
static unsigned mx_rnd(unsigned n)
{
    mx_rng ^= mx_rng << 13, mx_rng ^= mx_rng >> 7, mx_rng ^= mx_rng << 17;
    return (unsigned)(mx_rng % n);
}

/* transformers' convert_moe_packed_tensors, restated: blocks [E][R][G][16], scales [E][R][G] -> [E][R][G * 32]
 * (lo nibble, hi nibble; times 2^(scale - 127)), then transposed to [E][G * 32][R], in bf16 */
static void mx_dequant_t(const uint8_t *blk, const uint8_t *sc, int E, int R, int G, uint16_t *out)
{
    static const float lut[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    int K = G * 32;
    for (int e = 0; e < E; e++)
        for (int r = 0; r < R; r++)
            for (int g = 0; g < G; g++)
                for (int i = 0; i < 32; i++) {
                    uint8_t v = blk[(((size_t)e * R + r) * G + g) * 16 + i / 2];
                    float x = ldexpf(lut[i % 2 ? v >> 4 : v & 15], (int)sc[((size_t)e * R + r) * G + g] - 127);
                    out[((size_t)e * K + g * 32 + i) * R + r] = tm_f32_to_bf16(x);
                }
}

/* the prompt's last logits of the model in dir (fp32 reference), into out [V] */
static int mx_logits(const char *dir, float *out, int V)
{
    tandem_model *m = NULL;
    tandem_status st;
    int32_t ids[12] = {5, 17, 301, 44, 9, 1000, 23, 77, 512, 8, 130, 61};
    float *all = malloc(sizeof(float) * 12 * (size_t)V);
    int rc = all ? tandem_model_open(&m, dir, &st) : -1;
    CHECKF(rc == 0, "%s: %s", dir, all ? st.msg : "oom");
    if (rc == 0) rc = tandem_logits(m, ids, 12, all, &st);
    CHECKF(rc == 0, "%s: %s", dir, st.msg);
    if (rc == 0) memcpy(out, all + 11 * (size_t)V, sizeof(float) * (size_t)V);
    tandem_model_free(m);
    free(all);
    return rc;
}

/* The Hub's GPT-OSS checkpoints keep the experts in MXFP4: a synthetic GPT-OSS whose experts are random
 * MXFP4 blocks gives the same logits (bit for bit) as the same model with those blocks dequantized as
 * transformers does (Mxfp4Config(dequantize=True)) and saved in bf16; changing a scale changes them. */
static void test_mxfp4(void)
{
    const char *A = TMP "/goss", *B = TMP "/goss-mx", *C = TMP "/goss-bf16";
    enum { E = 8, D = 128, F = 64, L = 2, V = 1024 };
    tm_err err = {0};
    CHECKF(tm_synth_write("gpt-oss-tiny", A, 5, &err) == TM_OK, "%s", err.msg);
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", A);
    tm_st_file *f = NULL;
    CHECKF(tm_st_open(&f, path, &err) == TM_OK, "%s", err.msg);
    if (!f) return;
    copy_side_files(A, B);
    copy_side_files(A, C);
    int n = tm_st_count(f), nb = 0, nc = 0;
    st_entry_out *eb = calloc((size_t)n + 8 * L, sizeof *eb), *ec = calloc((size_t)n + 8 * L, sizeof *ec);
    for (int i = 0; i < n; i++) { /* everything but the per-expert tensors, as it is */
        const char *nm = tm_st_name(f, i);
        if (strstr(nm, ".mlp.experts.")) continue;
        tm_tensor t;
        CHECK(tm_st_find(f, nm, &t, &err) == TM_OK);
        st_entry_out o = {.dtype = tm_st_dtype_str(f, i), .ndim = t.ndim, .data = t.data, .nbytes = t.nbytes};
        snprintf(o.name, sizeof o.name, "%s", nm);
        for (int d = 0; d < t.ndim; d++) o.shape[d] = t.shape[d];
        eb[nb++] = ec[nc++] = o;
    }
    size_t gub = (size_t)E * 2 * F * (D / 32), dnb = (size_t)E * D * (F / 32);
    uint8_t *blk[L][2], *sc[L][2];
    uint16_t *deq[L][2], *bias[L][2];
    for (int l = 0; l < L; l++) {
        size_t nblk[2] = {gub * 16, dnb * 16}, nsc[2] = {gub, dnb}, nbias[2] = {(size_t)E * 2 * F, (size_t)E * D};
        for (int k = 0; k < 2; k++) {
            blk[l][k] = malloc(nblk[k]);
            sc[l][k] = malloc(nsc[k]);
            deq[l][k] = malloc(2 * nblk[k] * 2);
            bias[l][k] = malloc(2 * nbias[k]);
            for (size_t j = 0; j < nblk[k]; j++) blk[l][k][j] = (uint8_t)mx_rnd(256);
            for (size_t j = 0; j < nsc[k]; j++) sc[l][k][j] = (uint8_t)(119 + mx_rnd(6)); /* 2^-8 .. 2^-3 */
            for (size_t j = 0; j < nbias[k]; j++) bias[l][k][j] = tm_f32_to_bf16(0.01f * ((int)mx_rnd(201) - 100) / 100);
        }
        mx_dequant_t(blk[l][0], sc[l][0], E, 2 * F, D / 32, deq[l][0]); /* gate_up [E][D][2F] */
        mx_dequant_t(blk[l][1], sc[l][1], E, D, F / 32, deq[l][1]);     /* down [E][F][D] */
        static const char *const what[2] = {"gate_up_proj", "down_proj"};
        int64_t R[2] = {2 * F, D}, K[2] = {D, F};
        for (int k = 0; k < 2; k++) {
            st_entry_out o = {.dtype = "U8", .ndim = 4, .shape = {E, R[k], K[k] / 32, 16}, .data = blk[l][k],
                              .nbytes = nblk[k]};
            snprintf(o.name, sizeof o.name, "model.layers.%d.mlp.experts.%s_blocks", l, what[k]);
            eb[nb++] = o;
            o = (st_entry_out){.dtype = "U8", .ndim = 3, .shape = {E, R[k], K[k] / 32}, .data = sc[l][k], .nbytes = nsc[k]};
            snprintf(o.name, sizeof o.name, "model.layers.%d.mlp.experts.%s_scales", l, what[k]);
            eb[nb++] = o;
            o = (st_entry_out){.dtype = "BF16", .ndim = 3, .shape = {E, K[k], R[k]}, .data = deq[l][k], .nbytes = 2 * nblk[k] * 2};
            snprintf(o.name, sizeof o.name, "model.layers.%d.mlp.experts.%s", l, what[k]);
            ec[nc++] = o;
            o = (st_entry_out){.dtype = "BF16", .ndim = 2, .shape = {E, R[k]}, .data = bias[l][k], .nbytes = 2 * (size_t)E * R[k]};
            snprintf(o.name, sizeof o.name, "model.layers.%d.mlp.experts.%s_bias", l, what[k]);
            eb[nb++] = ec[nc++] = o;
        }
    }
    char pb[512], pc[512];
    snprintf(pb, sizeof pb, "%s/model.safetensors", B);
    snprintf(pc, sizeof pc, "%s/model.safetensors", C);
    CHECK(st_write(pb, eb, nb) == 0 && st_write(pc, ec, nc) == 0);
    float *lb = calloc(V, sizeof(float)), *lc = calloc(V, sizeof(float)), *ld = calloc(V, sizeof(float));
    if (mx_logits(B, lb, V) == 0 && mx_logits(C, lc, V) == 0) {
        int nz = 0;
        for (int v = 0; v < V; v++) nz += isfinite(lb[v]) && lb[v] != 0;
        CHECKF(!memcmp(lb, lc, sizeof(float) * V) && nz > V / 2, "MXFP4 and its bf16 dequantization: logits differ "
               "(first %g / %g), %d nonzero", (double)lb[0], (double)lc[0], nz);
        /* every scale of layer 0's gate_up one step up (its weights doubled): other logits */
        for (size_t j = 0; j < gub; j++) sc[0][0][j]++;
        CHECK(st_write(pb, eb, nb) == 0);
        if (mx_logits(B, ld, V) == 0) CHECK(memcmp(lb, ld, sizeof(float) * V) != 0);
    }
    /* a converter done with an expert's rows drops their whole pages, and nothing around them */
    tm_model *hm = NULL;
    CHECKF(tm_hf_model_open(&hm, B, NULL, &err) == TM_OK, "%s", err.msg);
    if (hm) {
        const tm_tensor *g0 = &hm->w[0].e_gate[0], *g1 = &hm->w[0].e_gate[1], *u0 = &hm->w[0].e_up[0];
        uint8_t *keep1 = malloc(g1->nbytes), *keepu = malloc(u0->nbytes);
        memcpy(keep1, g1->data, g1->nbytes);
        memcpy(keepu, u0->data, u0->nbytes);
        long pg = sysconf(_SC_PAGESIZE);
        const uint8_t *p0 = g0->data, *in = (const uint8_t *)(((uintptr_t)p0 + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1));
        int zero = 1;
        for (long k = 0; k < pg; k++) zero &= in[k] == 0;
        CHECK(g0->nbytes >= (size_t)(3 * pg) && !zero); /* a whole page inside, written */
        tm_model_release(hm, g0->data, g0->nbytes);
        zero = 1;
        for (long k = 0; k < pg; k++) zero &= in[k] == 0;
        CHECK(zero && !memcmp(keep1, g1->data, g1->nbytes) && !memcmp(keepu, u0->data, u0->nbytes));
        free(keep1);
        free(keepu);
        tm_model_free(hm);
    }
    /* a shape that does not match the config: refused, naming the tensor */
    eb[nb - 3].shape[2] = 1, eb[nb - 3].shape[3] = 32; /* layer 1's down_proj_blocks, the same bytes */
    CHECK(st_write(pb, eb, nb) == 0);
    tandem_model *m = NULL;
    tandem_status st;
    CHECKF(tandem_model_open(&m, B, &st) != 0 && strstr(st.msg, "down_proj_blocks") && strstr(st.msg, "MXFP4"), "%s",
           st.msg);
    tandem_model_free(m);
    for (int l = 0; l < L; l++)
        for (int k = 0; k < 2; k++) free(blk[l][k]), free(sc[l][k]), free(deq[l][k]), free(bias[l][k]);
    free(lb), free(lc), free(ld), free(eb), free(ec);
    tm_st_close(f);
}

int main(void)
{
    mkdir("build", 0755);
    mkdir(TMP, 0755);
    test_safetensors();
    test_sharded();
    test_config();
    test_arch_rules();
    test_bind();
    test_mxfp4();
    return th_done("test_hf");
}
