/* cli/cmd_inspect.c: `tandem inspect MODEL.tdm [--verify] [--json] [--tensors]`:
 * what a package holds (architecture, sizes per stage, encodings per tensor
 * class, chunk sizes, functions, documents, converter info), and with
 * --verify whether every checksum matches. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "pkg/pkg.h"

enum { CLS_EMBED, CLS_ATTN, CLS_MLP, CLS_NORM, CLS_OUTPUT, CLS_OTHER, N_CLS };
static const char *const cls_name[N_CLS] = {"embeddings", "attention", "mlp", "norms", "output", "other"};

/* A display class from the (Hugging Face) tensor name. */
static int tensor_class(const char *name)
{
    size_t n = strlen(name);
    if (strstr(name, "embed") || strstr(name, "wte.") || strstr(name, "word_embeddings")) return CLS_EMBED;
    if ((n >= 14 && strcmp(name + n - 14, "lm_head.weight") == 0) || strcmp(name, "output.weight") == 0)
        return CLS_OUTPUT;
    if (strstr(name, "norm") || strstr(name, ".ln_")) return CLS_NORM;
    if (strstr(name, "attn") || strstr(name, "attention")) return CLS_ATTN;
    if (strstr(name, "mlp") || strstr(name, "feed_forward") || strstr(name, "experts") || strstr(name, "moe") ||
        strstr(name, "ffn"))
        return CLS_MLP;
    return CLS_OTHER;
}

typedef struct class_stats {
    int tensors;                 /* distinct names */
    uint32_t dtypes[2];          /* [stage] bit set of dtype codes (< 32) */
    int unshared[2];             /* [stage] copies used by that stage only */
    int present[2];              /* [stage] copies present */
} class_stats;

typedef struct summary {
    class_stats cls[N_CLS];
    uint64_t stage_bytes[2], stage_tensors[2];   /* [prefill, decode] */
    uint64_t shared_bytes, shared_tensors;
    uint64_t params;
} summary;

static void summarize(const tm_pkg *p, summary *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < tm_pkg_n_tensors(p); i++) {
        const tm_pkg_entry *e = tm_pkg_tensor(p, i);
        class_stats *c = &s->cls[tensor_class(e->t.name)];
        uint64_t bytes = e->t.nbytes + e->scales_bytes;
        /* a name is counted once: at its prefill copy, or its only (decode) copy */
        tm_tensor other;
        int first = (e->stages & TM_PKG_PREFILL) || tm_pkg_lookup(p, TM_PKG_PREFILL, e->t.name, &other, NULL) != TM_OK;
        /* a decode-only "lm_head.weight" is the converter's copy of a tied embedding: not new parameters */
        int tied_copy = !(e->stages & TM_PKG_PREFILL) && strcmp(e->t.name, "lm_head.weight") == 0 && first;
        if (first) {
            c->tensors++;
            if (!tied_copy) s->params += (uint64_t)tm_tensor_numel(&e->t);
        }
        for (int st = 0; st < 2; st++) {
            if (!(e->stages & (1u << st))) continue;
            s->stage_bytes[st] += bytes;
            s->stage_tensors[st]++;
            c->present[st]++;
            if ((unsigned)e->t.dtype < 32) c->dtypes[st] |= 1u << e->t.dtype;
            if (e->stages != (TM_PKG_PREFILL | TM_PKG_DECODE)) c->unshared[st]++;
        }
        if (e->stages == (TM_PKG_PREFILL | TM_PKG_DECODE)) {
            s->shared_bytes += bytes;
            s->shared_tensors++;
        }
    }
}

static void human(char *buf, size_t n, double bytes)
{
    const char *u[] = {"B", "KB", "MB", "GB", "TB"};
    int k = 0;
    while (bytes >= 1000 && k < 4) bytes /= 1000, k++;
    snprintf(buf, n, k ? "%.1f %s" : "%.0f %s", bytes, u[k]);
}

/* "bf16" or "bf16,f32" from a dtype bit set */
static void dtype_list(char *buf, size_t n, uint32_t set)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int d = 0; d < 32 && k < n; d++)
        if (set & (1u << d)) k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? "," : "", tm_dtype_name((tm_dtype)d));
    if (k == 0) snprintf(buf, n, "-");
}

static void dims_str(char *buf, size_t n, const tm_pkg_io *io)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int d = 0; d < io->ndim && k < n; d++) {
        if (io->dims[d].sym) k += (size_t)snprintf(buf + k, n - k, "[%s]", io->dims[d].sym);
        else k += (size_t)snprintf(buf + k, n - k, "[%lld]", (long long)io->dims[d].size);
    }
}

static void ios_str(char *buf, size_t n, const tm_pkg_io *ios, int count)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < count && k < n; i++) {
        char dims[128];
        dims_str(dims, sizeof dims, &ios[i]);
        k += (size_t)snprintf(buf + k, n - k, "%s%s %s %s", i ? ", " : "", ios[i].name, tm_dtype_name(ios[i].dtype),
                              dims);
    }
}

/* config.json fields for the model line (the package's own copy) */
static cJSON *load_config(const tm_pkg *p)
{
    size_t n;
    const char *cfg = tm_pkg_doc(p, TM_PKG_DOC_CONFIG, &n);
    return cfg ? cJSON_ParseWithLength(cfg, n) : NULL;
}

static double cfg_num(const cJSON *cfg, const char *key)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!j && cfg) { /* multimodal configs keep the decoder in text_config */
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, "text_config");
        j = cJSON_GetObjectItemCaseSensitive(t, key);
    }
    return cJSON_IsNumber(j) ? j->valuedouble : -1;
}

static const char *architecture(const tm_pkg *p, const cJSON *cfg)
{
    const char *a = tm_pkg_meta_str(p, "model.architecture");
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(cfg, "architectures");
    if (!a && cJSON_IsArray(arr) && cJSON_IsString(arr->child)) a = arr->child->valuestring;
    return a ? a : "unknown";
}

static const cJSON *meta_item(const cJSON *meta, const char *a, const char *b)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(meta, a);
    return b ? cJSON_GetObjectItemCaseSensitive(j, b) : j;
}

static void print_text(const tm_pkg *p, const summary *s, const cJSON *meta, const cJSON *cfg, int tensors)
{
    char b1[32], b2[32], b3[32];
    human(b1, sizeof b1, (double)tm_pkg_file_size(p));
    printf("%s: tandem package v%u, %s, alignment %u\n", tm_pkg_label(p), tm_pkg_version(p), b1, tm_pkg_alignment(p));
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(cfg, "model_type");
    printf("model       %s (%s)", architecture(p, cfg), cJSON_IsString(mt) ? mt->valuestring : "?");
    static const char *const keys[][2] = {{"num_hidden_layers", "layers"},   {"hidden_size", "hidden"},
                                          {"num_attention_heads", "heads"},  {"num_key_value_heads", "kv heads"},
                                          {"head_dim", "head dim"},          {"intermediate_size", "ffn"},
                                          {"num_local_experts", "experts"},  {"num_experts", "experts"},
                                          {"n_routed_experts", "experts"},   {"kv_lora_rank", "kv latent"},
                                          {"qk_rope_head_dim", "rope dims"}, {"vocab_size", "vocab"}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        double v = cfg_num(cfg, keys[i][0]);
        if (v >= 0) printf(", %s %.0f", keys[i][1], v);
    }
    const cJSON *tied = cJSON_GetObjectItemCaseSensitive(cfg, "tie_word_embeddings");
    printf("%s\n", cJSON_IsTrue(tied) ? ", tied embeddings" : "");
    printf("parameters  %.2f M\n", (double)s->params / 1e6);
    const cJSON *conv = cJSON_GetObjectItemCaseSensitive(meta, "converter");
    if (conv) {
        const char *f[] = {"name", "version", "date", "source"};
        printf("converter  ");
        for (int i = 0; i < 4; i++) {
            const cJSON *j = cJSON_GetObjectItemCaseSensitive(conv, f[i]);
            if (cJSON_IsString(j)) printf("%s%s%s", i == 3 ? " from " : " ", j->valuestring, i == 1 ? "," : "");
        }
        const cJSON *cs = cJSON_GetObjectItemCaseSensitive(conv, "clip_search");
        printf("%s\n", cJSON_IsTrue(cs) ? " (clip search)" : "");
    }
    human(b1, sizeof b1, (double)s->stage_bytes[0]);
    human(b2, sizeof b2, (double)s->stage_bytes[1]);
    human(b3, sizeof b3, (double)s->shared_bytes);
    printf("stages      prefill %s in %llu tensors; decode %s in %llu tensors; shared by both %s in %llu\n", b1,
           (unsigned long long)s->stage_tensors[0], b2, (unsigned long long)s->stage_tensors[1], b3,
           (unsigned long long)s->shared_tensors);
    printf("encodings   %-12s %7s  %-16s %s\n", "class", "tensors", "prefill", "decode");
    for (int c = 0; c < N_CLS; c++) {
        const class_stats *k = &s->cls[c];
        if (!k->tensors) continue;
        char e[2][64];
        for (int st = 0; st < 2; st++) {
            dtype_list(e[st], sizeof e[st], k->dtypes[st]);
            if (k->present[st] && !k->unshared[st]) strncat(e[st], " (shared)", sizeof e[st] - strlen(e[st]) - 1);
        }
        printf("            %-12s %7d  %-16s %s\n", cls_name[c], k->tensors, e[0], e[1]);
    }
    const cJSON *chunks = meta_item(meta, "converter", "chunks");
    if (cJSON_IsArray(chunks)) {
        printf("chunks     ");
        for (const cJSON *j = chunks->child; j; j = j->next)
            if (cJSON_IsNumber(j)) printf(" %.0f", j->valuedouble);
        printf("\n");
    }
    if (tm_pkg_n_functions(p)) {
        printf("functions   %-24s %-8s %-10s %6s  %-10s %s\n", "name", "kind", "engine", "T", "state",
               "inputs -> outputs");
        for (int i = 0; i < tm_pkg_n_functions(p); i++) {
            const tm_pkg_function *f = tm_pkg_function_at(p, i);
            char in[512], out[512];
            ios_str(in, sizeof in, f->inputs, f->n_inputs);
            ios_str(out, sizeof out, f->outputs, f->n_outputs);
            printf("            %-24s %-8s %-10s %6d  %-10s %s -> %s\n", f->name,
                   f->kind == TM_PKG_FN_PREFILL ? "prefill" : "decode", f->engine_class, f->chunk,
                   f->stateful ? "stateful" : "stateless", in, out);
        }
    }
    printf("documents  ");
    for (int i = 0; i < tm_pkg_n_docs(p); i++) {
        size_t n;
        tm_pkg_doc(p, tm_pkg_doc_name(p, i), &n);
        human(b1, sizeof b1, (double)n);
        printf("%s %s (%s)", i ? "," : "", tm_pkg_doc_name(p, i), b1);
    }
    printf("%s\n", tm_pkg_n_docs(p) ? "" : " none");
    if (tensors) {
        printf("tensors     %-56s %-8s %-8s %-24s %12s %10s\n", "name", "stages", "dtype", "shape", "offset", "bytes");
        for (int i = 0; i < tm_pkg_n_tensors(p); i++) {
            const tm_pkg_entry *e = tm_pkg_tensor(p, i);
            char shape[64];
            size_t k = 0;
            for (int d = 0; d < e->t.ndim; d++)
                k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%lld", d ? "x" : "", (long long)e->t.shape[d]);
            printf("            %-56s %-8s %-8s %-24s %12llu %10llu\n", e->t.name,
                   e->stages == 3 ? "both" : e->stages == TM_PKG_PREFILL ? "prefill" : "decode",
                   tm_dtype_name(e->t.dtype), shape, (unsigned long long)e->offset,
                   (unsigned long long)(e->t.nbytes + e->scales_bytes));
        }
    }
}

static cJSON *json_report(const tm_pkg *p, const summary *s, const cJSON *meta, const cJSON *cfg, int tensors)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", tm_pkg_label(p));
    cJSON_AddNumberToObject(o, "format_version", tm_pkg_version(p));
    cJSON_AddNumberToObject(o, "file_size", (double)tm_pkg_file_size(p));
    cJSON_AddNumberToObject(o, "alignment", tm_pkg_alignment(p));
    cJSON_AddStringToObject(o, "architecture", architecture(p, cfg));
    cJSON_AddNumberToObject(o, "n_params", (double)s->params);
    const char *copy[] = {"model", "converter", "functions"};
    for (int i = 0; i < 3; i++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(meta, copy[i]);
        if (j) cJSON_AddItemToObject(o, copy[i], cJSON_Duplicate(j, 1));
    }
    cJSON *st = cJSON_AddObjectToObject(o, "stages");
    const char *sn[2] = {"prefill", "decode"};
    for (int i = 0; i < 2; i++) {
        cJSON *x = cJSON_AddObjectToObject(st, sn[i]);
        cJSON_AddNumberToObject(x, "bytes", (double)s->stage_bytes[i]);
        cJSON_AddNumberToObject(x, "tensors", (double)s->stage_tensors[i]);
    }
    cJSON *sh = cJSON_AddObjectToObject(st, "shared");
    cJSON_AddNumberToObject(sh, "bytes", (double)s->shared_bytes);
    cJSON_AddNumberToObject(sh, "tensors", (double)s->shared_tensors);
    cJSON *cls = cJSON_AddArrayToObject(o, "classes");
    for (int c = 0; c < N_CLS; c++) {
        const class_stats *k = &s->cls[c];
        if (!k->tensors) continue;
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "class", cls_name[c]);
        cJSON_AddNumberToObject(x, "tensors", k->tensors);
        for (int i = 0; i < 2; i++) {
            cJSON *a = cJSON_AddArrayToObject(x, sn[i]);
            for (int d = 0; d < 32; d++)
                if (k->dtypes[i] & (1u << d)) cJSON_AddItemToArray(a, cJSON_CreateString(tm_dtype_name((tm_dtype)d)));
        }
        cJSON_AddBoolToObject(x, "shared", k->present[0] && k->present[1] && !k->unshared[0] && !k->unshared[1]);
        cJSON_AddItemToArray(cls, x);
    }
    cJSON *docs = cJSON_AddArrayToObject(o, "documents");
    for (int i = 0; i < tm_pkg_n_docs(p); i++) {
        size_t n;
        tm_pkg_doc(p, tm_pkg_doc_name(p, i), &n);
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", tm_pkg_doc_name(p, i));
        cJSON_AddNumberToObject(x, "bytes", (double)n);
        cJSON_AddItemToArray(docs, x);
    }
    if (tensors) {
        cJSON *ts = cJSON_AddArrayToObject(o, "tensors");
        for (int i = 0; i < tm_pkg_n_tensors(p); i++) {
            const tm_pkg_entry *e = tm_pkg_tensor(p, i);
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "name", e->t.name);
            cJSON_AddStringToObject(x, "dtype", tm_dtype_name(e->t.dtype));
            cJSON_AddStringToObject(x, "stages", e->stages == 3 ? "both" : e->stages == 1 ? "prefill" : "decode");
            cJSON *sa = cJSON_AddArrayToObject(x, "shape");
            for (int d = 0; d < e->t.ndim; d++) cJSON_AddItemToArray(sa, cJSON_CreateNumber((double)e->t.shape[d]));
            cJSON_AddNumberToObject(x, "offset", (double)e->offset);
            cJSON_AddNumberToObject(x, "bytes", (double)(e->t.nbytes + e->scales_bytes));
            cJSON_AddItemToArray(ts, x);
        }
    }
    return o;
}

static void inspect_usage(FILE *f)
{
    fputs("usage: tandem inspect MODEL.tdm [--verify] [--json] [--tensors]\n\n"
          "Describe a package: architecture, parameters, bytes per stage, encodings per\n"
          "tensor class, chunk sizes, the functions table, documents and converter info.\n"
          "  --verify   check every tensor checksum (exit 1 naming the first bad tensor)\n"
          "  --json     one JSON object on stdout instead of text\n"
          "  --tensors  also list every tensor record\n",
          f);
}

int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    int verify = 0, json = 0, tensors = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            inspect_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--verify")) verify = 1;
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--tensors")) tensors = 1;
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else {
            fprintf(stderr, "tandem inspect: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!path) {
        inspect_usage(stderr);
        return 2;
    }
    tm_err err = {0};
    tm_pkg *p;
    if (tm_pkg_open(&p, path, &err) != TM_OK) {
        fprintf(stderr, "tandem inspect: %s\n", err.msg);
        return 1;
    }
    summary s;
    summarize(p, &s);
    cJSON *meta = cJSON_Parse(tm_pkg_meta_json(p)); /* the reader validated it */
    cJSON *cfg = load_config(p);
    int rc = 0;
    double secs = 0;
    if (verify) {
        double t0 = tm_now_s();
        rc = tm_pkg_verify_flags(p, TM_PKG_VERIFY_RELEASE, &err) == TM_OK ? 0 : 1;
        secs = tm_now_s() - t0;
    }
    uint64_t all = s.stage_bytes[0] + s.stage_bytes[1] - s.shared_bytes;
    if (json) {
        cJSON *o = json_report(p, &s, meta, cfg, tensors);
        if (verify) {
            cJSON *v = cJSON_AddObjectToObject(o, "verify");
            cJSON_AddBoolToObject(v, "ok", rc == 0);
            cJSON_AddNumberToObject(v, "seconds", secs);
            if (rc) cJSON_AddStringToObject(v, "error", err.msg);
        }
        char *text = cJSON_Print(o);
        if (text) puts(text);
        free(text);
        cJSON_Delete(o);
    } else {
        print_text(p, &s, meta, cfg, tensors);
        if (verify && rc == 0) {
            char b[32];
            human(b, sizeof b, (double)all / (secs > 0 ? secs : 1e-9));
            printf("verify      ok: %d tensors, %d documents in %.2f s (%s/s)\n", tm_pkg_n_tensors(p),
                   tm_pkg_n_docs(p), secs, b);
        }
    }
    if (rc) fprintf(stderr, "tandem inspect: %s\n", err.msg);
    cJSON_Delete(meta);
    cJSON_Delete(cfg);
    tm_pkg_close(p);
    return rc;
}
