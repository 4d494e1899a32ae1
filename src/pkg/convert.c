/* pkg/convert.c: Hugging Face directory -> package (see convert.h).
 *
 * Flow: read the documents; parse config.json and build the model
 * description (model/); bind it to the memory-mapped safetensors (hf/), which
 * validates every tensor's shape before a byte is written; then, tensor by
 * tensor in the model's order, encode each stage's copy (quant/, on a small
 * thread pool) and append it to the streaming writer; release the source
 * pages; finally write the functions table and metadata and rename the file
 * into place. */
#include "pkg/convert.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fileio.h"
#include "core/threadpool.h"
#include "hf/config.h"
#include "hf/hf_model.h"
#include "hf/safetensors.h"
#include "model/model.h"
#include "pkg/pkg-impl.h"
#include "quant/quant.h"
#include "tandem.h"
#include "text/tokconfig.h"

#define DOC_MAX_BYTES ((size_t)512 << 20)

void tm_convert_opts_default(tm_convert_opts *o)
{
    memset(o, 0, sizeof *o);
    o->prefill_enc = TM_DT_Q8PC;
    o->decode_enc = TM_DT_Q4G64;
    o->head_enc = TM_CONVERT_HEAD_AUTO;
    static const int chunks[] = {64, 128, 256, 512};
    o->n_chunks = 4;
    memcpy(o->chunks, chunks, sizeof chunks);
    o->stateful = o->stateless = 1;
    o->threads = 2;
}

int tm_convert_check_opts(const tm_convert_opts *o, tm_err *err)
{
    tm_dtype p = o->prefill_enc, d = o->decode_enc;
    if (p != TM_DT_BF16 && p != TM_DT_F16 && p != TM_DT_Q8PC && p != TM_DT_Q4PC)
        return tm_errf(err, TM_E_INVALID, "--prefill-enc: %s is not one of bf16, f16, int8, int4pc", tm_dtype_name(p));
    if (d != TM_DT_BF16 && d != TM_DT_F16 && d != TM_DT_Q8PC && d != TM_DT_Q4G64 && d != TM_DT_Q4G32 &&
        d != TM_DT_Q6G64)
        return tm_errf(err, TM_E_INVALID, "--decode-enc: %s is not one of int4g64, int4g32, int6g64, int8, bf16, f16",
                       tm_dtype_name(d));
    if (o->head_enc != TM_CONVERT_HEAD_AUTO && o->head_enc != TM_DT_Q8PC && o->head_enc != TM_DT_Q4G64 &&
        o->head_enc != TM_DT_Q4G32 && o->head_enc != TM_DT_Q6G64)
        return tm_errf(err, TM_E_INVALID, "--head-enc: %s is not one of int8, int6g64, int4g64, int4g32",
                       tm_dtype_name(o->head_enc));
    if (o->n_chunks < 1 || o->n_chunks > TM_CONVERT_MAX_CHUNKS)
        return tm_errf(err, TM_E_INVALID, "--chunks: %d sizes, 1..%d allowed", o->n_chunks, TM_CONVERT_MAX_CHUNKS);
    for (int i = 0; i < o->n_chunks; i++)
        if (o->chunks[i] < 1 || o->chunks[i] > 65536 || (i && o->chunks[i] <= o->chunks[i - 1]))
            return tm_errf(err, TM_E_INVALID, "--chunks: %d is not in [1, 65536] or not ascending", o->chunks[i]);
    if (!o->stateful && !o->stateless)
        return tm_errf(err, TM_E_INVALID, "--functions: neither stateful nor stateless selected");
    if (o->threads < 1 || o->threads > 256)
        return tm_errf(err, TM_E_INVALID, "threads: %d not in [1, 256]", o->threads);
    return TM_OK;
}

/* ---- encoding on the pool ------------------------------------------------- */

typedef struct qjob {
    tm_dtype enc, src_dt;
    const void *src;            /* [N][K] of src_dt */
    int64_t N, K, rows;         /* rows per task */
    void *data;                 /* encoded [N] rows */
    void *scales;               /* their scales (tm_quant_scale_bytes each) */
    tm_quant_opts qo;
    atomic_int rc;              /* the first failure */
    tm_err err;                 /* its message, written by the task that set rc */
} qjob;

static void quant_task(void *ctx, int task, int worker)
{
    (void)worker;
    qjob *j = ctx;
    int64_t r0 = (int64_t)task * j->rows, r1 = r0 + j->rows < j->N ? r0 + j->rows : j->N;
    tm_err e = {0};
    int rc = tm_quant_quantize_rows(j->enc, j->src_dt, j->src, j->N, j->K, r0, r1, j->data, j->scales, &j->qo, &e);
    int none = TM_OK;
    if (rc != TM_OK && atomic_compare_exchange_strong(&j->rc, &none, rc)) j->err = e;
}

typedef struct conv {
    const tm_convert_opts *o;
    tm_pkg_writer *w;
    tm_pool *pool;
    uint8_t *buf;               /* scratch: encoded data, then scales at a 64-byte boundary */
    size_t cap;
    tm_convert_stats st;
} conv;

static int64_t rows_of(const tm_tensor *t, int64_t *K)
{
    *K = t->shape[t->ndim - 1];
    return tm_tensor_numel(t) / *K;
}

/* encode src into enc in the scratch buffer; out views it */
static int encode(conv *c, const tm_tensor *src, tm_dtype enc, tm_tensor *out, tm_err *err)
{
    int64_t K, N = rows_of(src, &K);
    size_t nb = tm_quant_data_bytes(enc, N, K), ns = tm_quant_scale_count(enc, N, K);
    size_t soff = (nb + 63) & ~(size_t)63, need = soff + ns * tm_quant_scale_bytes(enc);
    if (need > c->cap) {
        free(c->buf);
        c->cap = need + need / 8;
        c->buf = malloc(c->cap);
        if (!c->buf) {
            c->cap = 0;
            return tm_errf(err, TM_E_NOMEM, "tensor '%s': no memory for %zu encoded bytes", src->name, need);
        }
    }
    qjob j = {.enc = enc, .src_dt = src->dtype, .src = src->data, .N = N, .K = K, .data = c->buf,
              .scales = ns ? (void *)(c->buf + soff) : NULL, .qo = {.clip_search = c->o->clip_search}};
    atomic_init(&j.rc, TM_OK);
    int tasks = 1;
    if (c->pool && N * K >= (1 << 16)) { /* small tensors are not worth a hand-off */
        tasks = tm_pool_size(c->pool) * 8;
        if (tasks > N) tasks = (int)N;
    }
    j.rows = (N + tasks - 1) / tasks;
    tasks = (int)((N + j.rows - 1) / j.rows);
    if (tasks > 1) tm_pool_run(c->pool, tasks, quant_task, &j);
    else quant_task(&j, 0, 0);
    int rc = atomic_load(&j.rc);
    if (rc != TM_OK) return tm_errf(err, rc, "tensor '%s': %s", src->name, j.err.msg);
    *out = *src;
    out->dtype = enc;
    out->data = c->buf;
    out->nbytes = nb;
    out->scales = j.scales;
    return TM_OK;
}

/* append one copy of src, in enc, used by `stages` */
static int put_copy(conv *c, const tm_tensor *src, tm_dtype enc, unsigned stages, tm_err *err)
{
    tm_tensor t = *src;
    int rc = enc == src->dtype ? TM_OK : encode(c, src, enc, &t, err);
    if (rc == TM_OK) rc = tm_pkg_writer_add_tensor(c->w, &t, stages, err);
    if (rc == TM_OK) c->st.records++;
    return rc;
}

/* the requested encoding, or the nearest one this shape allows (convert.h) */
tm_dtype tm_convert_head_enc(const tm_convert_opts *o)
{
    if (o->head_enc != TM_CONVERT_HEAD_AUTO) return o->head_enc;
    return o->decode_enc == TM_DT_Q8PC ? TM_DT_Q8PC : TM_DT_Q6G64;
}

static tm_dtype fit(tm_dtype want, int64_t N, int64_t K)
{
    if (tm_quant_check_shape(want, N, K, NULL) == TM_OK) return want;
    if (want == TM_DT_Q4G64 && tm_quant_check_shape(TM_DT_Q4G32, N, K, NULL) == TM_OK) return TM_DT_Q4G32;
    if (tm_quant_is_quantized(want) && tm_quant_check_shape(TM_DT_Q8PC, N, K, NULL) == TM_OK) return TM_DT_Q8PC;
    return want; /* let the writer name the problem */
}

/* a MoE router, or Qwen2-MoE's shared-expert gate: kept plain (routing is discontinuous) */
static int is_router(const tm_model *m, const tm_tensor *slot)
{
    for (int l = 0; l < m->L; l++)
        if (slot == &m->w[l].router || slot == &m->w[l].s_router) return 1;
    return 0;
}

/* madvise over the pages covering [p, p + n): MADV_DONTNEED drops the resident
 * pages of a finished source tensor (the mapping stays valid; a later touch
 * reads the file again), so RSS stays near one tensor; MADV_WILLNEED starts
 * reading the next tensor from disk while this one is encoded. */
static void advise(const void *p, size_t n, int advice)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(pg - 1), e = ((uintptr_t)p + n + pg - 1) & ~(pg - 1);
    madvise((void *)a, e - a, advice);
}

static int convert_tensor(conv *c, const tm_model *m, const tm_tensor_spec *s, tm_err *err)
{
    const tm_tensor *src = s->slot;
    tm_model_fill(m, src->data);
    tm_tensor t = *src;
    t.name = s->name;
    tm_dtype plain = src->dtype == TM_DT_F16 ? TM_DT_F16 : TM_DT_BF16;
    const unsigned both = TM_PKG_PREFILL | TM_PKG_DECODE;
    int rc;
    if (s->kind == TM_TK_VECTOR) {
        rc = put_copy(c, &t, TM_DT_F32, both, err);
    } else if (s->kind == TM_TK_EMBED || is_router(m, src)) {
        rc = put_copy(c, &t, plain, both, err);
        /* a tied output projection: the decode stage streams it every step, so a
         * quantized decode stage gets its own copy in the head encoding,
         * "lm_head.weight" (model/arch.c binds it in place of the embedding) */
        tm_dtype de = fit(tm_convert_head_enc(c->o), t.shape[0], t.shape[t.ndim - 1]);
        if (rc == TM_OK && m->tied && src == &m->embed && tm_quant_is_quantized(c->o->decode_enc)) {
            tm_tensor h = t;
            h.name = "lm_head.weight";
            rc = put_copy(c, &h, de, TM_PKG_DECODE, err);
        }
    } else {
        int64_t K, N = rows_of(&t, &K);
        tm_dtype want = src == &m->lm_head && tm_quant_is_quantized(c->o->decode_enc) ? tm_convert_head_enc(c->o)
                                                                                          : c->o->decode_enc;
        tm_dtype pe = fit(c->o->prefill_enc, N, K), de = fit(want, N, K);
        c->st.fallbacks += pe != c->o->prefill_enc || de != want;
        if (pe == de) rc = put_copy(c, &t, pe, both, err);
        else if ((rc = put_copy(c, &t, pe, TM_PKG_PREFILL, err)) == TM_OK) rc = put_copy(c, &t, de, TM_PKG_DECODE, err);
    }
    c->st.tensors++;
    c->st.bytes_in += src->nbytes;
    tm_model_release(m, src->data, src->nbytes); /* its pages dropped: RSS stays near one tensor */
    return rc;
}

/* ---- documents, functions, metadata ---------------------------------------- */

static int add_file_doc(conv *c, const char *dir, const char *file, int required, tm_err *err)
{
    char path[4096];
    if (tm_path_join(path, sizeof path, dir, file)) return tm_errf(err, TM_E_INVALID, "%s: path too long", dir);
    if (!tm_file_exists(path))
        return required ? tm_errf(err, TM_E_NOTFOUND, "%s: missing (a package needs it)", path) : TM_OK;
    char *text;
    size_t n;
    int rc = tm_read_file(path, &text, &n, DOC_MAX_BYTES, err);
    if (rc == TM_OK) rc = tm_pkg_writer_add_doc(c->w, file, text, n, err);
    free(text);
    return rc;
}

/* A sentence-transformers model: modules.json as it is, and its Pooling module's config.json (the
 * folder modules.json names, e.g. 1_Pooling/) as pooling_config.json; the runtime reads both
 * (rt_model.c). A modules.json that names no Pooling module, or names one without a config, is kept
 * alone; one that is not JSON is kept too and refused where the model is opened, naming it. */
static int add_st_modules(conv *c, const char *dir, tm_err *err)
{
    char path[4096];
    int rc = add_file_doc(c, dir, TM_PKG_DOC_MODULES, 0, err);
    if (rc != TM_OK || tm_path_join(path, sizeof path, dir, TM_PKG_DOC_MODULES) || !tm_file_exists(path)) return rc;
    char *text;
    size_t n;
    if ((rc = tm_read_file(path, &text, &n, DOC_MAX_BYTES, err)) != TM_OK) return rc;
    cJSON *mods = cJSON_ParseWithLength(text, n);
    free(text);
    const char *sub = NULL;
    for (const cJSON *m = cJSON_IsArray(mods) ? mods->child : NULL; m && !sub; m = m->next) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(m, "type"), *p = cJSON_GetObjectItemCaseSensitive(m, "path");
        size_t tl = cJSON_IsString(type) ? strlen(type->valuestring) : 0;
        if (tl >= 8 && !strcmp(type->valuestring + tl - 8, ".Pooling") && cJSON_IsString(p) && !strstr(p->valuestring, ".."))
            sub = p->valuestring;
    }
    char cfg[4096];
    if (sub && !tm_path_join(path, sizeof path, dir, sub) && !tm_path_join(cfg, sizeof cfg, path, "config.json") &&
        tm_file_exists(cfg) && (rc = tm_read_file(cfg, &text, &n, DOC_MAX_BYTES, err)) == TM_OK) {
        rc = tm_pkg_writer_add_doc(c->w, TM_PKG_DOC_POOLING, text, n, err);
        free(text);
    }
    cJSON_Delete(mods);
    return rc;
}

static int add_named_doc(void *c, const char *name, const char *text, size_t len, tm_err *err)
{
    char doc[320];
    snprintf(doc, sizeof doc, "%s/%s.jinja", TM_ADDITIONAL_TEMPLATES, name);
    return tm_pkg_writer_add_doc(((conv *)c)->w, doc, text, len, err);
}

/* dir/additional_chat_templates/NAME.jinja (transformers' named templates beside chat_template.jinja), each as
 * the document of that name */
static int add_more_templates(conv *c, const char *dir, tm_err *err)
{
    char sub[4096];
    if (tm_path_join(sub, sizeof sub, dir, TM_ADDITIONAL_TEMPLATES) != TM_OK) return TM_OK;
    return tm_read_dir_files(sub, ".jinja", DOC_MAX_BYTES, add_named_doc, c, err);
}

/* the chat template: chat_template.jinja (and additional_chat_templates/), chat_template.json, or
 * tokenizer_config.json's "chat_template" (a string, or a list of {name, template}: "default", else the first;
 * the list stays in the package's tokenizer_config.json, where the runtime finds the other names) */
static int add_chat_template(conv *c, const char *dir, tm_err *err)
{
    char path[4096];
    if (tm_path_join(path, sizeof path, dir, "chat_template.jinja") == TM_OK && tm_file_exists(path)) {
        char *text;
        size_t n;
        int rc = tm_read_file(path, &text, &n, DOC_MAX_BYTES, err);
        if (rc == TM_OK) rc = tm_pkg_writer_add_doc(c->w, TM_PKG_DOC_CHAT_TEMPLATE, text, n, err);
        free(text);
        return rc ? rc : add_more_templates(c, dir, err);
    }
    const char *files[] = {"chat_template.json", "tokenizer_config.json"};
    for (int f = 0; f < 2; f++) {
        if (tm_path_join(path, sizeof path, dir, files[f]) || !tm_file_exists(path)) continue;
        char *text;
        int rc = tm_read_file(path, &text, NULL, DOC_MAX_BYTES, err);
        if (rc) return rc;
        cJSON *j = cJSON_Parse(text);
        free(text);
        if (!j) return tm_errf(err, TM_E_FORMAT, "%s: not valid JSON", path);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
        if (cJSON_IsArray(t)) {
            const cJSON *pick = NULL;
            for (const cJSON *e = t->child; e; e = e->next) {
                const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
                if (!pick || (cJSON_IsString(name) && strcmp(name->valuestring, "default") == 0)) pick = e;
            }
            t = pick ? cJSON_GetObjectItemCaseSensitive(pick, "template") : NULL;
        }
        rc = TM_OK;
        if (cJSON_IsString(t))
            rc = tm_pkg_writer_add_doc(c->w, TM_PKG_DOC_CHAT_TEMPLATE, t->valuestring, strlen(t->valuestring), err);
        cJSON_Delete(j);
        if (rc || cJSON_IsString(t)) return rc;
    }
    return TM_OK; /* a base model may have no template */
}

static tm_pkg_io io_make(const char *name, tm_dtype dt, const char *dims)
{
    /* dims: space-separated legend symbols or integers, e.g. "L 2 Hk P Dh" */
    tm_pkg_io io;
    memset(&io, 0, sizeof io);
    io.name = name;
    io.dtype = dt;
    while (*dims && io.ndim < TM_PKG_MAX_FN_DIMS) {
        size_t n = strcspn(dims, " ");
        tm_pkg_dim *d = &io.dims[io.ndim++];
        d->sym = tm_pkg_legend_symbol(dims, n);
        if (!d->sym) d->size = strtoll(dims, NULL, 10);
        dims += n + (dims[n] == ' ');
    }
    return io;
}

/* The entry points a package offers (pkg_format.h 4.7). KV crosses the
 * bridge in bf16; logits are f32. */
static int add_functions(conv *c, tm_err *err)
{
    const tm_pkg_io tokens = io_make("tokens", TM_DT_I32, "T"), kv_in = io_make("kv_in", TM_DT_BF16, "L 2 Hk P Dh"),
                    kv_out = io_make("kv_out", TM_DT_BF16, "L 2 Hk T Dh"), logits = io_make("logits", TM_DT_F32, "1 V"),
                    btok = io_make("tokens", TM_DT_I32, "B"), bkv_in = io_make("kv_in", TM_DT_BF16, "B L 2 Hk P Dh"),
                    bkv_out = io_make("kv_out", TM_DT_BF16, "B L 2 Hk 1 Dh"),
                    blogits = io_make("logits", TM_DT_F32, "B V");
    const tm_pkg_io p_in[] = {tokens, kv_in}, p_out[] = {kv_out, logits}, d_in[] = {btok, bkv_in},
                    d_out[] = {bkv_out, blogits};
    int rc = TM_OK;
    for (int i = 0; rc == TM_OK && i < c->o->n_chunks; i++) {
        char name[2][48];
        snprintf(name[0], sizeof name[0], "prefill_%d", c->o->chunks[i]);
        snprintf(name[1], sizeof name[1], "prefill_%d_stateless", c->o->chunks[i]);
        tm_pkg_function f = {name[0], TM_PKG_FN_PREFILL, "matrix", c->o->chunks[i], 1, 1, 1, p_in, p_out + 1};
        if (c->o->stateful) rc = tm_pkg_writer_add_function(c->w, &f, err);
        f = (tm_pkg_function){name[1], TM_PKG_FN_PREFILL, "matrix", c->o->chunks[i], 0, 2, 2, p_in, p_out};
        if (rc == TM_OK && c->o->stateless) rc = tm_pkg_writer_add_function(c->w, &f, err);
    }
    tm_pkg_function f = {"decode", TM_PKG_FN_DECODE, "bandwidth", 1, 1, 1, 1, d_in, d_out + 1};
    if (rc == TM_OK && c->o->stateful) rc = tm_pkg_writer_add_function(c->w, &f, err);
    f = (tm_pkg_function){"decode_stateless", TM_PKG_FN_DECODE, "bandwidth", 1, 0, 2, 2, d_in, d_out};
    if (rc == TM_OK && c->o->stateless) rc = tm_pkg_writer_add_function(c->w, &f, err);
    return rc;
}

static int set_meta_json(conv *c, const char *key, cJSON *v, tm_err *err)
{
    char *text = v ? cJSON_PrintUnformatted(v) : NULL;
    cJSON_Delete(v);
    if (!text) return tm_errf(err, TM_E_NOMEM, "out of memory building the metadata");
    int rc = tm_pkg_writer_set_meta(c->w, key, text, err);
    free(text);
    return rc;
}

static int add_meta(conv *c, const tm_model *m, const char *dir, tm_err *err)
{
    cJSON *mo = cJSON_CreateObject();
    uint64_t params = 0;
    for (int i = 0; i < m->n_spec; i++) params += (uint64_t)tm_tensor_numel(m->spec[i].slot);
    cJSON_AddStringToObject(mo, "architecture", m->arch_name);
    cJSON_AddStringToObject(mo, "model_type", m->model_type);
    cJSON_AddNumberToObject(mo, "n_params", (double)params);
    const struct { const char *k; int v; } f[] = {{"vocab_size", m->V}, {"hidden_size", m->D}, {"n_layers", m->L},
                                                  {"n_heads", m->H}, {"n_kv_heads", m->Hk}, {"head_dim", m->Dh},
                                                  {"ffn_size", m->F}, {"n_experts", m->n_experts},
                                                  {"max_position_embeddings", m->max_pos}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) cJSON_AddNumberToObject(mo, f[i].k, f[i].v);
    cJSON_AddBoolToObject(mo, "tied_embeddings", m->tied);
    int rc = set_meta_json(c, "model", mo, err);
    if (rc) return rc;

    cJSON *co = cJSON_CreateObject();
    char src[PATH_MAX], date[32];
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
    cJSON_AddStringToObject(co, "name", "tandem convert");
    cJSON_AddStringToObject(co, "version", TANDEM_VERSION_STRING);
    cJSON_AddStringToObject(co, "source", realpath(dir, src) ? src : dir);
    cJSON_AddStringToObject(co, "date", date);
    cJSON *enc = cJSON_AddObjectToObject(co, "encodings");
    cJSON_AddStringToObject(enc, "prefill", tm_dtype_name(c->o->prefill_enc));
    cJSON_AddStringToObject(enc, "decode", tm_dtype_name(c->o->decode_enc));
    cJSON_AddStringToObject(enc, "embeddings", "bf16 (f16 kept), shared");
    cJSON_AddStringToObject(enc, "norms_biases", "f32, shared");
    cJSON_AddItemToObject(co, "chunks", cJSON_CreateIntArray(c->o->chunks, c->o->n_chunks));
    cJSON *fn = cJSON_AddArrayToObject(co, "functions");
    if (c->o->stateful) cJSON_AddItemToArray(fn, cJSON_CreateString("stateful"));
    if (c->o->stateless) cJSON_AddItemToArray(fn, cJSON_CreateString("stateless"));
    cJSON_AddBoolToObject(co, "clip_search", c->o->clip_search);
    cJSON_AddNumberToObject(co, "fallbacks", c->st.fallbacks);
    cJSON_AddNumberToObject(co, "skipped_tensors", c->st.skipped);
    return set_meta_json(c, "converter", co, err);
}

/* ---- the whole conversion -------------------------------------------------- */

static void close_set(void *set) { tm_st_set_close(set); }

/* config -> model description -> bound to the checkpoint (validates every
 * shape); *n_ckpt receives the number of tensors in the checkpoint */
static int open_model(tm_model **out, const char *dir, int *n_ckpt, tm_err *err)
{
    char path[4096];
    if (tm_path_join(path, sizeof path, dir, "config.json")) return tm_errf(err, TM_E_INVALID, "%s: path too long", dir);
    tm_hf_config cfg;
    int rc = tm_hf_config_load(&cfg, path, err);
    if (rc) return rc;
    rc = tm_model_init(out, &cfg, err);
    tm_hf_config_free(&cfg);
    if (rc) return rc;
    tm_st_set *set;
    if ((rc = tm_st_set_open(&set, dir, err)) == TM_OK) {
        tm_model_set_owner(*out, set, close_set);
        tm_tensor_source src = tm_st_set_source(set);
        (*out)->check_dtype = 0; /* every tensor is converted anyway */
        (*out)->lazy_copies = 1; /* expert copies written as their layer is converted (tm_model_fill) */
        rc = tm_model_bind(*out, &src, err);
        *n_ckpt = 0;
        for (int f = 0; f < tm_st_set_nfiles(set); f++) *n_ckpt += tm_st_count(tm_st_set_file(set, f));
    }
    if (rc) {
        tm_model_free(*out);
        *out = NULL;
    }
    return rc;
}

int tm_convert(const char *hf_dir, const char *out_path, const tm_convert_opts *o, tm_convert_stats *st, tm_err *err)
{
    int rc = tm_convert_check_opts(o, err);
    if (rc) return rc;
    double t0 = tm_now_s();
    conv c;
    memset(&c, 0, sizeof c);
    c.o = o;
    tm_model *m = NULL;
    int n_ckpt = 0;
    if ((rc = open_model(&m, hf_dir, &n_ckpt, err))) return tm_err_prefix(err, "convert %s", hf_dir);
    c.st.skipped = n_ckpt - m->n_spec > 0 ? n_ckpt - m->n_spec : 0;
    if (o->threads > 1 && (rc = tm_pool_init(&c.pool, NULL, o->threads, 0, err))) {
        tm_model_free(m);
        return rc;
    }
    if ((rc = tm_pkg_writer_open(&c.w, out_path, 0, err))) goto done;
    rc = add_file_doc(&c, hf_dir, TM_PKG_DOC_CONFIG, 1, err);
    if (rc == TM_OK) rc = add_file_doc(&c, hf_dir, TM_PKG_DOC_TOKENIZER, 1, err);
    if (rc == TM_OK) rc = add_file_doc(&c, hf_dir, TM_PKG_DOC_TOKENIZER_CONFIG, 0, err);
    if (rc == TM_OK) rc = add_file_doc(&c, hf_dir, TM_PKG_DOC_GENERATION_CONFIG, 0, err);
    if (rc == TM_OK) rc = add_file_doc(&c, hf_dir, TM_PKG_DOC_SPECIAL_TOKENS, 0, err);
    if (rc == TM_OK) rc = add_chat_template(&c, hf_dir, err);
    if (rc == TM_OK) rc = add_st_modules(&c, hf_dir, err);

    tm_convert_progress pr = {0, m->n_spec, 0, 0, 0, NULL};
    for (int i = 0; i < m->n_spec; i++) pr.bytes_total += m->spec[i].slot->nbytes;
    for (int i = 0; rc == TM_OK && i < m->n_spec; i++) {
        if (o->cancel && *o->cancel) {
            rc = tm_errf(err, TM_E_CANCELLED, "%s: cancelled after %d of %d tensors", out_path, i, m->n_spec);
            break;
        }
        if (i + 1 < m->n_spec) advise(m->spec[i + 1].slot->data, m->spec[i + 1].slot->nbytes, MADV_WILLNEED);
        rc = convert_tensor(&c, m, &m->spec[i], err);
        if (rc == TM_OK && o->progress) {
            pr.tensors_done = i + 1;
            pr.bytes_done = c.st.bytes_in;
            pr.seconds = tm_now_s() - t0;
            pr.current = m->spec[i].name;
            o->progress(o->progress_ctx, &pr);
        }
    }
    if (rc == TM_OK) rc = add_functions(&c, err);
    if (rc == TM_OK) rc = add_meta(&c, m, hf_dir, err);
    if (rc == TM_OK) {
        rc = tm_pkg_writer_finish(c.w, err); /* frees the writer either way */
        struct stat sb;
        if (rc == TM_OK && stat(out_path, &sb) == 0) c.st.bytes_out = (uint64_t)sb.st_size;
    } else {
        tm_pkg_writer_abort(c.w);
    }
    c.w = NULL;
done:
    if (rc) tm_err_prefix(err, "convert %s", hf_dir);
    tm_pool_free(c.pool);
    free(c.buf);
    tm_model_free(m);
    c.st.seconds = tm_now_s() - t0;
    if (st) *st = c.st;
    return rc;
}
