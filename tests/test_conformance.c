/* tests/test_conformance.c: the reference engine against Hugging Face
 * transformers' own outputs (../shared/conformance/models, every model dir,
 * both config styles) and the demo model's reference logits.
 *
 * Per model and config: RoPE inv_freq within 1 ulp of transformers', logits
 * within 1e-4 at every position of every case, identical argmax, the
 * 24-step greedy continuation reproduced with the KV cache (incremental
 * decoding vs the reference's full recompute), the residual stream of the
 * 37-token case, and thread-count independence. Under TM_SANITIZER the
 * 300-token cases are skipped (only them).
 * The same checks run over tests/data/refs (tools/gen_refs.py): Gemma 3,
 * YaRN, linear RoPE, partial rotary, LongRoPE, Qwen2 sliding window, Mixtral. */
#include <cJSON.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileio.h"
#include "engine/ref/ref.h"
#include "harness.h"
#include "hf/hf_model.h"

static int sanitizer;

static cJSON *load_json(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    tm_err err = {0};
    if (tm_read_file(path, &text, &len, 0, &err) != TM_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    return j;
}

/* floats from a little-endian f32 file; *n receives the count */
static float *load_f32(const char *path, size_t *n)
{
    char *buf = NULL;
    size_t len = 0;
    tm_err err = {0};
    if (tm_read_file(path, &buf, &len, 0, &err) != TM_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    float *f = malloc(len + 4);
    memcpy(f, buf, len);
    free(buf);
    *n = len / 4;
    return f;
}

static int32_t *json_ids(const cJSON *arr, int *n)
{
    *n = cJSON_GetArraySize(arr);
    int32_t *ids = malloc(((size_t)*n + 1) * sizeof *ids);
    int i = 0;
    for (const cJSON *e = arr ? arr->child : NULL; e; e = e->next) ids[i++] = (int32_t)e->valuedouble;
    return ids;
}

static int argmax(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

static int ulp_diff(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    return ia > ib ? ia - ib : ib - ia;
}

/* logits of all positions; compare with a reference file */
static void check_case(tm_ref *r, const tm_model *m, const char *tag, const char *dir, const cJSON *c)
{
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    int T;
    int32_t *ids = json_ids(cJSON_GetObjectItem(c, "input_ids"), &T);
    /* the file holds positions [r0, r1) (all of them unless "rows" says otherwise) */
    const cJSON *rows = cJSON_GetObjectItem(c, "rows");
    int r0 = rows ? cJSON_GetArrayItem(rows, 0)->valueint : 0, r1 = rows ? cJSON_GetArrayItem(rows, 1)->valueint : T;
    size_t nr = (size_t)(r1 - r0);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, cJSON_GetObjectItem(c, "logits_file")->valuestring);
    size_t n = 0;
    float *ref = load_f32(path, &n);
    CHECKF(ref && n == nr * m->V, "%s %s: reference logits file %s", tag, name, path);
    float *out = malloc((size_t)T * m->V * sizeof(float));
    tm_err err = {0};
    tm_ref_reset(r);
    int rc = tm_ref_forward(r, ids, T, 0, out, 1, &err);
    CHECKF(rc == TM_OK, "%s %s: forward: %s", tag, name, err.msg);
    if (rc == TM_OK && ref && n == nr * m->V) {
        double maxd = 0;
        int bad_argmax = 0, first_bad = -1;
        const cJSON *am = cJSON_GetObjectItem(c, "argmax_per_position");
        const cJSON *ae = am ? am->child : NULL;
        for (int t = r0; t < r1; t++) {
            const float *rt = ref + (size_t)(t - r0) * m->V;
            for (int v = 0; v < m->V; v++) {
                double d = fabs((double)out[(size_t)t * m->V + v] - rt[v]);
                if (d > maxd || d != d) maxd = d != d ? 1e30 : d;
            }
            int a = argmax(out + (size_t)t * m->V, m->V);
            int want = ae ? (int)ae->valuedouble : argmax(rt, m->V);
            if (ae) ae = ae->next;
            if (a != want) {
                bad_argmax++;
                if (first_bad < 0) first_bad = t;
            }
        }
        CHECKF(maxd <= 1e-4, "%s %s: max |logit - reference| = %.3g > 1e-4", tag, name, maxd);
        CHECKF(bad_argmax == 0, "%s %s: argmax differs at %d positions (first %d)", tag, name, bad_argmax, first_bad);
        if (getenv("TM_VERBOSE")) printf("  %s %s: max diff %.3g\n", tag, name, maxd);
    }
    free(ids);
    free(ref);
    free(out);
}

/* greedy continuation through the KV cache */
/* margins (optional): the reference's top-1 minus top-2 logit per step; a
 * step whose margin is below float32 noise (1e-5) may legitimately differ,
 * so the comparison stops there. */
static void check_greedy(tm_ref *r, const tm_model *m, const char *tag, const cJSON *prompt, const cJSON *gen,
                         const cJSON *margins)
{
    int T, G;
    int32_t *ids = json_ids(prompt, &T);
    int32_t *want = json_ids(gen, &G);
    float *lg = malloc((size_t)m->V * sizeof(float));
    tm_err err = {0};
    tm_ref_reset(r);
    int rc = tm_ref_forward(r, ids, T, 0, lg, 0, &err);
    int first_bad = -1;
    const cJSON *mg = margins ? margins->child : NULL;
    for (int s = 0; s < G && rc == TM_OK; s++, mg = mg ? mg->next : NULL) {
        if (mg && mg->valuedouble < 1e-5) {
            printf("  %s greedy: step %d has a margin of %.2g, compared up to there\n", tag, s, mg->valuedouble);
            break;
        }
        int32_t tok = argmax(lg, m->V);
        if (tok != want[s] && first_bad < 0) first_bad = s;
        /* feed the reference's token, so one step cannot derail the rest */
        tok = want[s];
        rc = tm_ref_forward(r, &tok, 1, T + s, lg, 0, &err);
    }
    CHECKF(rc == TM_OK, "%s greedy: forward: %s", tag, err.msg);
    CHECKF(first_bad < 0, "%s greedy: continuation differs from step %d on", tag, first_bad);
    free(ids);
    free(want);
    free(lg);
}

/* each entry: inv_freq, attention_scaling, and (tests/data/refs) layer_type
 * (the rope of layers of that type) and table ("long": LongRoPE's long factors) */
static void check_rope(const tm_model *m, const char *tag, const cJSON *rope)
{
    for (const cJSON *it = rope ? rope->child : NULL; it; it = it->next) {
        const cJSON *lt = cJSON_GetObjectItem(it, "layer_type"), *tb = cJSON_GetObjectItem(it, "table");
        int ri = 0;
        for (int l = 0; l < m->L && cJSON_IsString(lt); l++)
            if (m->layer[l].sliding == (strcmp(lt->valuestring, "sliding_attention") == 0) && m->layer[l].rope >= 0)
                ri = m->layer[l].rope;
        const tm_rope *rp = &m->rope[ri];
        const float *mine = cJSON_IsString(tb) && strcmp(tb->valuestring, "long") == 0 ? rp->inv_freq_long : rp->inv_freq;
        const cJSON *inv = cJSON_GetObjectItem(it, "inv_freq");
        int n = cJSON_GetArraySize(inv), worst = 0;
        CHECKF(n == rp->rot_dim / 2 && mine, "%s rope %s: %d frequencies, want %d", tag, it->string, rp->rot_dim / 2, n);
        if (!mine) continue;
        int i = 0;
        for (const cJSON *e = inv->child; e && i < rp->rot_dim / 2; e = e->next, i++) {
            int u = ulp_diff(mine[i], (float)e->valuedouble);
            if (u > worst) worst = u;
        }
        CHECKF(worst <= 1, "%s rope %s: inv_freq differs by %d ulp", tag, it->string, worst);
        double as = cJSON_GetObjectItem(it, "attention_scaling")->valuedouble;
        CHECKF(fabs(rp->attn_scaling - as) <= 1e-7, "%s rope %s: attention scaling %.9g, want %.9g", tag, it->string,
               rp->attn_scaling, as);
    }
}

/* residual stream of the 37-token case, and thread independence */
static void check_residual(const tm_model *m, const char *tag, const char *dir, const cJSON *man)
{
    const cJSON *rs = cJSON_GetObjectItem(man, "residual_stream");
    const cJSON *cases = cJSON_GetObjectItem(man, "cases");
    const cJSON *c37 = NULL;
    for (const cJSON *c = cases->child; c; c = c->next)
        if (strcmp(cJSON_GetObjectItem(c, "name")->valuestring, cJSON_GetObjectItem(rs, "case")->valuestring) == 0) c37 = c;
    if (!c37) return;
    int T;
    int32_t *ids = json_ids(cJSON_GetObjectItem(c37, "input_ids"), &T);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, cJSON_GetObjectItem(rs, "file")->valuestring);
    size_t n = 0;
    float *ref = load_f32(path, &n);
    size_t want = (size_t)(m->L + 2) * T * m->D;
    float *tr = malloc(want * sizeof(float));
    float *l1 = malloc((size_t)T * m->V * sizeof(float)), *l3 = malloc((size_t)T * m->V * sizeof(float));
    tm_ref *r1 = NULL, *r3 = NULL;
    tm_err err = {0};
    CHECK(tm_ref_init(&r1, m, T, 1, &err) == TM_OK);
    CHECK(tm_ref_init(&r3, m, T, 3, &err) == TM_OK);
    if (r1 && r3 && ref && n == want) {
        tm_ref_trace(r1, tr);
        CHECK(tm_ref_forward(r1, ids, T, 0, l1, 1, &err) == TM_OK);
        CHECK(tm_ref_forward(r3, ids, T, 0, l3, 1, &err) == TM_OK);
        CHECKF(memcmp(l1, l3, (size_t)T * m->V * sizeof(float)) == 0, "%s: 1 and 3 threads give different logits", tag);
        int bad_slot = -1;
        double worst = 0;
        for (int s = 0; s < m->L + 2 && bad_slot < 0; s++)
            for (size_t i = 0; i < (size_t)T * m->D; i++) {
                double a = tr[(size_t)s * T * m->D + i], b = ref[(size_t)s * T * m->D + i];
                double d = fabs(a - b) / (1.0 + fabs(b));
                if (d > worst) worst = d;
                if (d > 1e-4 && bad_slot < 0) bad_slot = s;
            }
        CHECKF(bad_slot < 0, "%s: residual stream diverges at slot %d (worst rel diff %.3g)", tag, bad_slot, worst);
    } else {
        CHECKF(0, "%s: residual file %s (%zu floats, want %zu)", tag, path, n, want);
    }
    tm_ref_free(r1);
    tm_ref_free(r3);
    free(ids);
    free(ref);
    free(tr);
    free(l1);
    free(l3);
}

/* hf_dir: NULL for the manifest's; config_file: relative to dir, or a path if hf_dir is given */
static void run_model_at(const char *dir, const cJSON *man, const char *hf_dir, const char *config_file)
{
    char hf[1024], cfg[1024], tag[256];
    if (hf_dir) snprintf(hf, sizeof hf, "%s", hf_dir);
    else snprintf(hf, sizeof hf, "%s/%s", dir, cJSON_GetObjectItem(man, "hf_dir")->valuestring);
    if (hf_dir) snprintf(cfg, sizeof cfg, "%s", config_file);
    else snprintf(cfg, sizeof cfg, "%s/%s", dir, config_file);
    snprintf(tag, sizeof tag, "%s [%s]", cJSON_GetObjectItem(man, "name")->valuestring, config_file);
    tm_model *m = NULL;
    tm_err err = {0};
    int rc = tm_hf_model_open(&m, hf, cfg, &err);
    CHECKF(rc == TM_OK, "%s: open: %s", tag, err.msg);
    if (rc) return;
    check_rope(m, tag, cJSON_GetObjectItem(man, "rope"));
    tm_ref *r = NULL;
    rc = tm_ref_init(&r, m, 512, 2, &err);
    CHECKF(rc == TM_OK, "%s: ref init: %s", tag, err.msg);
    if (rc == TM_OK) {
        const cJSON *cases = cJSON_GetObjectItem(man, "cases");
        for (const cJSON *c = cases->child; c; c = c->next) {
            if (sanitizer && cJSON_GetObjectItem(c, "length")->valueint > 100) continue;
            check_case(r, m, tag, dir, c);
        }
        const cJSON *g = cJSON_GetObjectItem(man, "greedy");
        check_greedy(r, m, tag, cJSON_GetObjectItem(g, "prompt_ids"), cJSON_GetObjectItem(g, "generated_ids"),
                     cJSON_GetObjectItem(g, "step_margins_top1_minus_top2"));
        check_residual(m, tag, dir, man);
    }
    tm_ref_free(r);
    tm_model_free(m);
}

static void run_model(const char *dir, const cJSON *man, const char *config_file)
{
    run_model_at(dir, man, NULL, config_file);
}

/* dir/model.safetensors (dir made under build/test_conformance) from a header and the data section; 1 if
 * written */
static int write_st(const char *dir, const cJSON *header, const void *data, size_t n)
{
    char path[512], *hs = cJSON_PrintUnformatted(header);
    size_t hn = strlen(hs), pad = (8 - hn % 8) % 8;
    mkdir("build/test_conformance", 0755);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((hn + pad) >> (8 * i));
    int ok = f && fwrite(len8, 1, 8, f) == 8 && fwrite(hs, 1, hn, f) == hn && fwrite("        ", 1, pad, f) == pad &&
             fwrite(data, 1, n, f) == n;
    if (f) fclose(f);
    free(hs);
    return ok;
}

/* A committed fixture re-laid out as other checkpoints of its architecture
 * are: the tensors' prefix `from` replaced by `to`, and the Hub-style config
 * as it is, or (wrap: the multimodal class) under "text_config". Written to
 * build/test_conformance/<out>/. Gemma3ForConditionalGeneration checkpoints
 * name the decoder either way round; GPT-2's on the Hub have no
 * "transformer." prefix. */
static void relaid(const char *fix, const char *from, const char *to, const char *wrap, const char *out)
{
    char src[256], path[512], dir[256];
    snprintf(src, sizeof src, "tests/data/refs/%s", fix);
    snprintf(dir, sizeof dir, "build/test_conformance/%s", out);
    char *text = NULL, *cfgtext = NULL;
    size_t n = 0, cn = 0, fl = strlen(from);
    tm_err err = {0};
    snprintf(path, sizeof path, "%s/hf/model.safetensors", src);
    int ok = tm_read_file(path, &text, &n, 0, &err) == TM_OK;
    snprintf(path, sizeof path, "%s/config.hub_style.json", src);
    ok = ok && tm_read_file(path, &cfgtext, &cn, 0, &err) == TM_OK;
    CHECKF(ok, "%s: %s", out, err.msg);
    snprintf(path, sizeof path, "%s/manifest.json", src);
    cJSON *man = load_json(path);
    if (!ok || !man || n < 8) goto done;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | (uint8_t)text[i];
    cJSON *hdr = cJSON_ParseWithLength(text + 8, (size_t)hl);
    cJSON *nh = cJSON_CreateObject();
    for (cJSON *it = hdr ? hdr->child : NULL; it; it = it->next) {
        char name[256];
        if (strncmp(it->string, from, fl) == 0) snprintf(name, sizeof name, "%s%s", to, it->string + fl);
        else snprintf(name, sizeof name, "%s", it->string);
        cJSON_AddItemToObject(nh, name, cJSON_Duplicate(it, 1));
    }
    ok = write_st(dir, nh, text + 8 + hl, n - 8 - hl);
    char *cfg = malloc(cn + 256);
    if (wrap)
        snprintf(cfg, cn + 256, "{\"architectures\": [\"%s\"], \"model_type\": \"%s\", \"text_config\": %s}", wrap, fix,
                 cfgtext);
    else
        snprintf(cfg, cn + 256, "%s", cfgtext);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    ok = ok && f && fwrite(cfg, 1, strlen(cfg), f) == strlen(cfg);
    if (f) fclose(f);
    CHECKF(ok, "%s: cannot write %s", out, dir);
    if (ok) run_model_at(src, man, dir, path);
    free(cfg);
    cJSON_Delete(nh);
    cJSON_Delete(hdr);
done:
    cJSON_Delete(man);
    free(text);
    free(cfgtext);
}

/* A MoE fixture's experts as transformers 5 saves them: per layer, mlp.experts.gate_up_proj [E][2F][D]
 * (expert e's gate rows, then its up rows) and mlp.experts.down_proj [E][D][F], and Mixtral's
 * block_sparse_moe.* renamed mlp.*; the rest as it is. The model must give the fixture's logits. */
#define FUSED_MAX 64
typedef struct fused_layer {
    char name[256];           /* "model.layers.0.mlp." */
    int E;
    const char *part[3][FUSED_MAX]; /* gate, up, down of each expert: their bytes */
    size_t bytes[3];          /* of one expert's tensor */
    int64_t shape[3][2];
    char dtype[8];
} fused_layer;

static void fused_moe(const char *fixdir, const char *config_key, const char *out)
{
    char path[1024], dir[256];
    snprintf(dir, sizeof dir, "build/test_conformance/%s", out);
    snprintf(path, sizeof path, "%s/hf/model.safetensors", fixdir);
    char *text = NULL;
    size_t n = 0;
    tm_err err = {0};
    CHECKF(tm_read_file(path, &text, &n, 0, &err) == TM_OK, "%s: %s", out, err.msg);
    snprintf(path, sizeof path, "%s/manifest.json", fixdir);
    cJSON *man = load_json(path);
    if (!text || !man || n < 8) goto done;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | (uint8_t)text[i];
    cJSON *hdr = cJSON_ParseWithLength(text + 8, (size_t)hl), *nh = cJSON_CreateObject();
    const char *data = text + 8 + hl;
    static fused_layer ly[16];
    int nl = 0;
    size_t total = 0;
    char *blob = malloc(n), *o = blob; /* the new data section: never larger than the old one */
    for (cJSON *it = hdr ? hdr->child : NULL; it && blob; it = it->next) {
        if (!strcmp(it->string, "__metadata__")) continue;
        const cJSON *offs = cJSON_GetObjectItem(it, "data_offsets"), *shape = cJSON_GetObjectItem(it, "shape");
        size_t a = (size_t)cJSON_GetArrayItem(offs, 0)->valuedouble, b = (size_t)cJSON_GetArrayItem(offs, 1)->valuedouble;
        char nm[256];
        snprintf(nm, sizeof nm, "%s", it->string);
        char *moe = strstr(nm, ".block_sparse_moe."); /* Mixtral's Hub name: mlp. in transformers 5 */
        if (moe) memmove(moe + 5, moe + 18, strlen(moe + 18) + 1), memcpy(moe, ".mlp.", 5);
        char *ex = strstr(nm, ".mlp.experts.");
        if (!ex) { /* copied as it is */
            cJSON *e = cJSON_Duplicate(it, 1);
            cJSON_ReplaceItemInObject(e, "data_offsets", cJSON_CreateIntArray((int[]){(int)total, (int)(total + b - a)}, 2));
            cJSON_AddItemToObject(nh, nm, e);
            memcpy(o, data + a, b - a);
            o += b - a, total += b - a;
            continue;
        }
        int e = atoi(ex + 13), k = strstr(ex, "gate_proj") || strstr(ex, ".w1.") ? 0 : strstr(ex, "up_proj") || strstr(ex, ".w3.") ? 1 : 2;
        ex[5] = 0; /* "...mlp." */
        int li = 0;
        while (li < nl && strcmp(ly[li].name, nm)) li++;
        if (li == nl && nl < 16) snprintf(ly[nl++].name, sizeof ly[0].name, "%s", nm);
        if (li >= 16 || e >= FUSED_MAX) continue;
        ly[li].part[k][e] = data + a;
        ly[li].bytes[k] = b - a;
        ly[li].shape[k][0] = (int64_t)cJSON_GetArrayItem(shape, 0)->valuedouble;
        ly[li].shape[k][1] = (int64_t)cJSON_GetArrayItem(shape, 1)->valuedouble;
        snprintf(ly[li].dtype, sizeof ly[li].dtype, "%s", cJSON_GetObjectItem(it, "dtype")->valuestring);
        ly[li].E = e + 1 > ly[li].E ? e + 1 : ly[li].E;
    }
    for (int li = 0; li < nl && blob; li++) {
        fused_layer *L = &ly[li];
        for (int k = 0; k < 2; k++) { /* gate_up, then down */
            char nm[300];
            snprintf(nm, sizeof nm, "%.250sexperts.%s", L->name, k ? "down_proj" : "gate_up_proj");
            size_t start = total;
            for (int e = 0; e < L->E; e++)
                for (int p = k ? 2 : 0; p <= (k ? 2 : 1); p++) {
                    memcpy(o, L->part[p][e], L->bytes[p]);
                    o += L->bytes[p], total += L->bytes[p];
                }
            cJSON *t = cJSON_CreateObject();
            cJSON_AddStringToObject(t, "dtype", L->dtype);
            int64_t r = k ? L->shape[2][0] : 2 * L->shape[0][0], c = k ? L->shape[2][1] : L->shape[0][1];
            cJSON_AddItemToObject(t, "shape", cJSON_CreateIntArray((int[]){L->E, (int)r, (int)c}, 3));
            cJSON_AddItemToObject(t, "data_offsets", cJSON_CreateIntArray((int[]){(int)start, (int)total}, 2));
            cJSON_AddItemToObject(nh, nm, t);
        }
    }
    CHECKF(nl >= 1, "%s: no experts found", out);
    int ok = blob && write_st(dir, nh, blob, total);
    FILE *f;
    char src_cfg[1024], cfg[512];
    snprintf(src_cfg, sizeof src_cfg, "%s/%s", fixdir, cJSON_GetObjectItem(man, config_key)->valuestring);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    char *ct = NULL;
    size_t cn = 0;
    ok = ok && tm_read_file(src_cfg, &ct, &cn, 0, &err) == TM_OK && (f = fopen(cfg, "wb")) != NULL;
    if (ok) {
        ok = fwrite(ct, 1, cn, f) == cn;
        fclose(f);
    }
    CHECKF(ok, "%s: cannot write %s", out, dir);
    if (ok) run_model_at(fixdir, man, dir, cfg);
    free(ct);
    free(blob);
    cJSON_Delete(nh);
    cJSON_Delete(hdr);
done:
    cJSON_Delete(man);
    free(text);
}

static void conformance_models(void)
{
    char root[1024];
    snprintf(root, sizeof root, "%s/conformance/models", th_shared());
    DIR *d = opendir(root);
    CHECKF(d != NULL, "cannot open %s", root);
    if (!d) return;
    char *names[64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(d);
    int models = 0;
    for (int i = 0; i < n; i++) {
        char dir[2048], mp[2100];
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        snprintf(mp, sizeof mp, "%s/manifest.json", dir);
        free(names[i]);
        if (!tm_file_exists(mp)) continue;
        cJSON *man = load_json(mp);
        CHECKF(man != NULL, "%s: unreadable", mp);
        if (!man) continue;
        models++;
        run_model(dir, man, cJSON_GetObjectItem(man, "config_file")->valuestring);
        run_model(dir, man, cJSON_GetObjectItem(man, "native_config_file")->valuestring);
        cJSON_Delete(man);
    }
    CHECKF(models >= 7, "found %d conformance models, expected 7", models);
}

/* tests/data/refs: fixtures made by tools/gen_refs.py with transformers 5
 * (Gemma 3, YaRN, linear, partial rotary, LongRoPE, Qwen2 sliding window,
 * Mixtral), each with its transformers-5 config and the Hub-style one. */
static void extra_refs(void)
{
    const char *root = "tests/data/refs";
    DIR *d = opendir(root);
    CHECKF(d != NULL, "cannot open %s", root);
    if (!d) return;
    char *names[128];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 128)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(d);
    int models = 0;
    for (int i = 0; i < n; i++) {
        char dir[2048], mp[2100];
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        snprintf(mp, sizeof mp, "%s/manifest.json", dir);
        free(names[i]);
        if (!tm_file_exists(mp)) continue;
        cJSON *man = load_json(mp);
        CHECKF(man != NULL, "%s: unreadable", mp);
        if (!man) continue;
        models++;
        run_model(dir, man, cJSON_GetObjectItem(man, "config_file")->valuestring);
        const cJSON *hub = cJSON_GetObjectItem(man, "hub_config_file");
        if (cJSON_IsString(hub)) run_model(dir, man, hub->valuestring);
        cJSON_Delete(man);
    }
    CHECKF(models >= 7, "found %d fixtures in %s, expected 7", models, root);
}

static void demo_model(void)
{
    const char *dir = "models/tiny-classics-llama";
    cJSON *man = load_json("models/tiny-classics-llama/reference/manifest.json");
    CHECK(man != NULL);
    if (!man) return;
    tm_model *m = NULL;
    tm_err err = {0};
    int rc = tm_hf_model_open(&m, dir, NULL, &err);
    CHECKF(rc == TM_OK, "demo model: %s", err.msg);
    tm_ref *r = NULL;
    if (rc == TM_OK) rc = tm_ref_init(&r, m, 128, 2, &err);
    CHECKF(rc == TM_OK, "demo model: ref init: %s", err.msg);
    if (rc == TM_OK) {
        for (const cJSON *c = cJSON_GetObjectItem(man, "cases")->child; c; c = c->next) {
            char tag[128];
            snprintf(tag, sizeof tag, "demo %s", cJSON_GetObjectItem(c, "name")->valuestring);
            check_case(r, m, tag, "models/tiny-classics-llama/reference", c);
            check_greedy(r, m, tag, cJSON_GetObjectItem(c, "input_ids"), cJSON_GetObjectItem(c, "greedy_ids"), NULL);
        }
    }
    tm_ref_free(r);
    tm_model_free(m);
    cJSON_Delete(man);
}

int main(void)
{
    sanitizer = getenv("TM_SANITIZER") != NULL;
    conformance_models();
    extra_refs();
    relaid("gemma3", "model.", "language_model.model.", "Gemma3ForConditionalGeneration", "gemma3_mm");
    relaid("gemma3", "model.", "model.language_model.", "Gemma3ForConditionalGeneration", "gemma3_mm2");
    relaid("gpt2", "transformer.", "", NULL, "gpt2_hub_names");
    fused_moe("tests/data/refs/mixtral", "config_file", "mixtral_fused");
    fused_moe("tests/data/refs/qwen2_moe", "config_file", "qwen2_moe_fused");
    fused_moe("tests/data/refs/olmoe", "hub_config_file", "olmoe_fused");
    char q3[512];
    snprintf(q3, sizeof q3, "%s/conformance/models/qwen3_moe", th_shared());
    fused_moe(q3, "native_config_file", "qwen3_moe_fused");
    demo_model();
    return th_done("test_conformance");
}
