/* hf/safetensors.c: safetensors parsing and validation, sharded sets. */
#include "hf/safetensors.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"

#define ST_MAX_DIMS 8
#define ST_MAX_EXACT 9007199254740992.0 /* 2^53: integers stored exactly in a double */

/* safetensors dtypes: name, bits per element, our dtype (-1: not loadable) */
static const struct { const char *name; int bits; int tm; } st_dtypes[] = {
    {"F32", 32, TM_DT_F32},  {"F16", 16, TM_DT_F16},  {"BF16", 16, TM_DT_BF16},
    {"F64", 64, -1},         {"I64", 64, -1},         {"I32", 32, -1},
    {"I16", 16, -1},         {"I8", 8, -1},           {"U64", 64, -1},
    {"U32", 32, -1},         {"U16", 16, -1},         {"U8", 8, TM_DT_U8},
    {"BOOL", 8, -1},         {"F8_E4M3", 8, -1},      {"F8_E5M2", 8, -1},
    {"F8_E8M0", 8, -1},      {"F6_E2M3", 6, -1},      {"F6_E3M2", 6, -1},
    {"F4", 4, -1},           {"C64", 64, -1},
};
#define ST_NDTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

typedef struct st_entry {
    char *name;
    int dt;                        /* index into st_dtypes */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin, end;           /* relative to the data buffer */
} st_entry;

struct tm_st_file {
    tm_map map;                    /* owned mapping (tm_st_open) or empty */
    const uint8_t *buf;            /* data buffer: file + 8 + header length */
    uint64_t buf_size;
    char fname[256];
    st_entry *e;                   /* [n] sorted by offset */
    int n;
    int *by_name;                  /* [n] indices into e sorted by name */
    char **meta;                   /* [2 * nmeta] key, value */
    int nmeta;
};

static void st_free_entries(tm_st_file *f)
{
    if (f->e)
        for (int i = 0; i < f->n; i++) free(f->e[i].name);
    free(f->e);
    free(f->by_name);
    if (f->meta)
        for (int i = 0; i < 2 * f->nmeta; i++) free(f->meta[i]);
    free(f->meta);
}

void tm_st_close(tm_st_file *f)
{
    if (!f) return;
    st_free_entries(f);
    tm_map_close(&f->map);
    free(f);
}

/* a JSON number that is a non-negative integer below 2^53 */
static int json_uint(const cJSON *j, uint64_t *out)
{
    if (!cJSON_IsNumber(j)) return 0;
    double v = j->valuedouble;
    if (!(v >= 0) || v > ST_MAX_EXACT || v != floor(v)) return 0;
    *out = (uint64_t)v;
    return 1;
}

static int cmp_offset(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_name_idx(const void *a, const void *b, void *ctx)
{
    const st_entry *e = ctx;
    return strcmp(e[*(const int *)a].name, e[*(const int *)b].name);
}

static int parse_entry(tm_st_file *f, const cJSON *item, st_entry *e, tm_err *err)
{
    const char *fn = f->fname, *nm = item->string;
    if (!cJSON_IsObject(item))
        return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': header entry is not an object", fn, nm);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!dt) return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': missing 'dtype'", fn, nm);
    if (!sh) return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': missing 'shape'", fn, nm);
    if (!off) return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': missing 'data_offsets'", fn, nm);
    if (!cJSON_IsString(dt))
        return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': 'dtype' is not a string", fn, nm);
    e->dt = -1;
    for (int i = 0; i < ST_NDTYPES; i++)
        if (strcmp(dt->valuestring, st_dtypes[i].name) == 0) e->dt = i;
    if (e->dt < 0)
        return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': unknown dtype '%.40s'", fn, nm, dt->valuestring);
    if (!cJSON_IsArray(sh))
        return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': 'shape' is not an array", fn, nm);
    int nd = cJSON_GetArraySize(sh);
    if (nd > ST_MAX_DIMS)
        return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': 'shape' has %d dimensions (at most %d)", fn,
                       nm, nd, ST_MAX_DIMS);
    e->ndim = nd;
    uint64_t numel = 1;
    int overflow = 0;
    int k = 0;
    for (const cJSON *d = sh->child; d; d = d->next, k++) {
        uint64_t v;
        if (!json_uint(d, &v))
            return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': shape[%d] is not a non-negative integer", fn,
                           nm, k);
        e->shape[k] = (int64_t)v;
        if (!overflow && __builtin_mul_overflow(numel, v, &numel)) overflow = 1;
    }
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': 'data_offsets' is not a [begin, end] pair", fn, nm);
    if (!json_uint(off->child, &e->begin) || !json_uint(off->child->next, &e->end))
        return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': 'data_offsets' are not non-negative integers", fn,
                       nm);
    if (e->end < e->begin)
        return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu) end before they begin",
                       fn, nm, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > f->buf_size)
        return tm_errf(err, TM_E_FORMAT,
                       "%s: tensor '%s': data_offsets [%llu, %llu) run past the end of the file (data buffer of %llu bytes)",
                       fn, nm, (unsigned long long)e->begin, (unsigned long long)e->end,
                       (unsigned long long)f->buf_size);
    uint64_t bits = 0;
    if (overflow || __builtin_mul_overflow(numel, (uint64_t)st_dtypes[e->dt].bits, &bits))
        return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': shape is absurd (element count overflows)", fn, nm);
    if (bits % 8)
        return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': %s data of %llu elements is not a whole number of bytes",
                       fn, nm, st_dtypes[e->dt].name, (unsigned long long)numel);
    if (bits / 8 != e->end - e->begin)
        return tm_errf(err, TM_E_FORMAT,
                       "%s: tensor '%s': data_offsets span %llu bytes but shape and dtype %s need %llu", fn, nm,
                       (unsigned long long)(e->end - e->begin), st_dtypes[e->dt].name,
                       (unsigned long long)(bits / 8));
    return TM_OK;
}

static int parse_metadata(tm_st_file *f, const cJSON *m, tm_err *err)
{
    if (f->meta) return tm_errf(err, TM_E_FORMAT, "%s: '__metadata__' appears twice", f->fname);
    if (cJSON_IsNull(m)) return TM_OK;
    if (!cJSON_IsObject(m))
        return tm_errf(err, TM_E_FORMAT, "%s: '__metadata__' is not an object", f->fname);
    int n = cJSON_GetArraySize(m);
    f->meta = calloc((size_t)n * 2 + 1, sizeof *f->meta);
    if (!f->meta) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", f->fname);
    for (const cJSON *kv = m->child; kv; kv = kv->next) {
        if (!cJSON_IsString(kv))
            return tm_errf(err, TM_E_FORMAT, "%s: '__metadata__' value of '%s' is not a string", f->fname,
                           kv->string);
        f->meta[2 * f->nmeta] = strdup(kv->string);
        f->meta[2 * f->nmeta + 1] = strdup(kv->valuestring);
        f->nmeta++;
        if (!f->meta[2 * f->nmeta - 2] || !f->meta[2 * f->nmeta - 1])
            return tm_errf(err, TM_E_NOMEM, "%s: out of memory", f->fname);
    }
    return TM_OK;
}

static int parse_header(tm_st_file *f, const cJSON *root, tm_err *err)
{
    if (!cJSON_IsObject(root))
        return tm_errf(err, TM_E_FORMAT, "%s: header is not a JSON object", f->fname);
    int n = cJSON_GetArraySize(root);
    f->e = calloc((size_t)n + 1, sizeof *f->e);
    if (!f->e) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", f->fname);
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) {
            int rc = parse_metadata(f, it, err);
            if (rc) return rc;
            continue;
        }
        st_entry *e = &f->e[f->n];
        int rc = parse_entry(f, it, e, err);
        if (rc) return rc;
        e->name = strdup(it->string);
        if (!e->name) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", f->fname);
        f->n++;
    }
    /* the tensors must tile the data buffer exactly */
    qsort(f->e, (size_t)f->n, sizeof *f->e, cmp_offset);
    uint64_t at = 0;
    for (int i = 0; i < f->n; i++) {
        const st_entry *e = &f->e[i];
        if (e->begin < at)
            return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu) overlap tensor '%s'",
                           f->fname, e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                           f->e[i - 1].name);
        if (e->begin > at)
            return tm_errf(err, TM_E_FORMAT, "%s: bytes [%llu, %llu) of the data buffer belong to no tensor",
                           f->fname, (unsigned long long)at, (unsigned long long)e->begin);
        at = e->end;
    }
    if (at != f->buf_size)
        return tm_errf(err, TM_E_FORMAT, "%s: the last %llu bytes of the file belong to no tensor", f->fname,
                       (unsigned long long)(f->buf_size - at));
    f->by_name = malloc(((size_t)f->n + 1) * sizeof *f->by_name);
    if (!f->by_name) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", f->fname);
    for (int i = 0; i < f->n; i++) f->by_name[i] = i;
    qsort_r(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_name_idx, f->e);
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->e[f->by_name[i]].name, f->e[f->by_name[i - 1]].name) == 0)
            return tm_errf(err, TM_E_FORMAT, "%s: tensor '%s' appears twice in the header", f->fname,
                           f->e[f->by_name[i]].name);
    return TM_OK;
}

int tm_st_parse(tm_st_file **out, const uint8_t *data, size_t size, const char *name, tm_err *err)
{
    *out = NULL;
    tm_st_file *f = calloc(1, sizeof *f);
    if (!f) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", name);
    snprintf(f->fname, sizeof f->fname, "%s", name);
    int rc;
    if (size < 8) {
        rc = tm_errf(err, TM_E_FORMAT, "%s: truncated: %zu bytes, no header length", f->fname, size);
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | data[i];
    if (hlen > size - 8) {
        rc = tm_errf(err, TM_E_FORMAT, "%s: header length %llu runs past the end of the file (%zu bytes)",
                     f->fname, (unsigned long long)hlen, size);
        goto fail;
    }
    if (hlen > TM_ST_MAX_HEADER) {
        rc = tm_errf(err, TM_E_FORMAT, "%s: header length %llu exceeds the 100 MB limit", f->fname,
                     (unsigned long long)hlen);
        goto fail;
    }
    if (hlen < 2) {
        rc = tm_errf(err, TM_E_FORMAT, "%s: header of %llu bytes cannot hold a JSON object", f->fname,
                     (unsigned long long)hlen);
        goto fail;
    }
    f->buf = data + 8 + hlen;
    f->buf_size = size - 8 - hlen;
    const char *hdr = (const char *)data + 8, *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)hlen, &end, 0);
    if (!root) {
        size_t at = end && end >= hdr ? (size_t)(end - hdr) : 0;
        rc = tm_errf(err, TM_E_FORMAT, "%s: header is not valid JSON (near byte %zu)", f->fname, at);
        goto fail;
    }
    for (const char *p = end; p && p < hdr + hlen; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\0') {
            cJSON_Delete(root);
            rc = tm_errf(err, TM_E_FORMAT, "%s: header has trailing bytes after the JSON object", f->fname);
            goto fail;
        }
    rc = parse_header(f, root, err);
    cJSON_Delete(root);
    if (rc) goto fail;
    *out = f;
    return TM_OK;
fail:
    tm_st_close(f);
    return rc;
}

int tm_st_open(tm_st_file **out, const char *path, tm_err *err)
{
    *out = NULL;
    tm_map m;
    int rc = tm_map_open(&m, path, err);
    if (rc) return rc;
    const char *base = strrchr(path, '/');
    rc = tm_st_parse(out, m.data, m.size, base ? base + 1 : path, err);
    if (rc) {
        tm_map_close(&m);
        return rc;
    }
    (*out)->map = m;
    return TM_OK;
}

int tm_st_count(const tm_st_file *f) { return f->n; }
const char *tm_st_name(const tm_st_file *f, int i) { return f->e[i].name; }
const char *tm_st_dtype_str(const tm_st_file *f, int i) { return st_dtypes[f->e[i].dt].name; }
int tm_st_ndim(const tm_st_file *f, int i) { return f->e[i].ndim; }
const int64_t *tm_st_shape(const tm_st_file *f, int i) { return f->e[i].shape; }

const char *tm_st_metadata(const tm_st_file *f, const char *key)
{
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
    return NULL;
}

static int find_index(const tm_st_file *f, const char *name)
{
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(f->e[f->by_name[mid]].name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int tm_st_find(const tm_st_file *f, const char *name, tm_tensor *out, tm_err *err)
{
    int i = find_index(f, name);
    if (i < 0) return tm_errf(err, TM_E_NOTFOUND, "%s: no tensor '%s'", f->fname, name);
    const st_entry *e = &f->e[i];
    if (st_dtypes[e->dt].tm < 0)
        return tm_errf(err, TM_E_UNSUPPORTED, "%s: tensor '%s': dtype %s is not supported (F32, F16, BF16 are; U8 as MXFP4 blocks)",
                       f->fname, name, st_dtypes[e->dt].name);
    if (e->ndim > TM_MAX_DIMS)
        return tm_errf(err, TM_E_UNSUPPORTED, "%s: tensor '%s': %d dimensions (at most %d supported)", f->fname,
                       name, e->ndim, TM_MAX_DIMS);
    memset(out, 0, sizeof *out);
    out->name = e->name;
    out->dtype = (tm_dtype)st_dtypes[e->dt].tm;
    out->ndim = e->ndim;
    for (int d = 0; d < e->ndim; d++) out->shape[d] = e->shape[d];
    out->data = f->buf + e->begin;
    out->nbytes = (size_t)(e->end - e->begin);
    out->scales = NULL;
    return TM_OK;
}

/* ---- sharded sets ---- */

typedef struct st_wm { char *name; int file; } st_wm;

struct tm_st_set {
    tm_st_file **files;   /* [nfiles] */
    int nfiles;
    st_wm *map;           /* [nmap] sorted by name; empty for a single file */
    int nmap;
    int sharded;
};

void tm_st_set_close(tm_st_set *s)
{
    if (!s) return;
    for (int i = 0; i < s->nfiles; i++) tm_st_close(s->files[i]);
    free(s->files);
    for (int i = 0; i < s->nmap; i++) free(s->map[i].name);
    free(s->map);
    free(s);
}

static int cmp_wm(const void *a, const void *b)
{
    return strcmp(((const st_wm *)a)->name, ((const st_wm *)b)->name);
}

static int valid_shard_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 255 || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) return 0;
    return 1;
}

#define ST_INDEX "model.safetensors.index.json"

static int open_sharded(tm_st_set *s, const char *dir, const char *ipath, tm_err *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc = tm_read_file(ipath, &text, &len, (size_t)64 << 20, err);
    if (rc) return rc;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root) return tm_errf(err, TM_E_FORMAT, "%s: not valid JSON", ST_INDEX);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm)) {
        cJSON_Delete(root);
        return tm_errf(err, TM_E_FORMAT, "%s: 'weight_map' is missing or not an object", ST_INDEX);
    }
    int n = cJSON_GetArraySize(wm);
    s->map = calloc((size_t)n + 1, sizeof *s->map);
    s->files = calloc((size_t)n + 1, sizeof *s->files);
    char **fnames = calloc((size_t)n + 1, sizeof *fnames);
    rc = TM_OK;
    if (!s->map || !s->files || !fnames) rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", ST_INDEX);
    for (const cJSON *it = rc ? NULL : wm->child; it; it = it->next) {
        if (!cJSON_IsString(it) || !valid_shard_name(it->valuestring)) {
            rc = tm_errf(err, TM_E_FORMAT, "%s: weight_map['%s'] is not a plain file name", ST_INDEX, it->string);
            break;
        }
        int fi = -1;
        for (int i = 0; i < s->nfiles; i++)
            if (strcmp(fnames[i], it->valuestring) == 0) fi = i;
        if (fi < 0) {
            char path[4096];
            if (tm_path_join(path, sizeof path, dir, it->valuestring)) {
                rc = tm_errf(err, TM_E_INVALID, "%s: path too long", it->valuestring);
                break;
            }
            fi = s->nfiles;
            fnames[fi] = strdup(it->valuestring);
            rc = tm_st_open(&s->files[fi], path, err);
            if (rc) {
                free(fnames[fi]);
                fnames[fi] = NULL;
                tm_err_prefix(err, "%s: weight_map['%s']", ST_INDEX, it->string);
                break;
            }
            s->nfiles++;
        }
        s->map[s->nmap].name = strdup(it->string);
        s->map[s->nmap].file = fi;
        if (!s->map[s->nmap].name) {
            rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", ST_INDEX);
            break;
        }
        s->nmap++;
    }
    cJSON_Delete(root);
    for (int i = 0; fnames && i < n; i++) free(fnames[i]);
    free(fnames);
    if (rc) return rc;
    if (s->nmap == 0) return tm_errf(err, TM_E_FORMAT, "%s: 'weight_map' is empty", ST_INDEX);
    qsort(s->map, (size_t)s->nmap, sizeof *s->map, cmp_wm);
    for (int i = 1; i < s->nmap; i++)
        if (strcmp(s->map[i].name, s->map[i - 1].name) == 0)
            return tm_errf(err, TM_E_FORMAT, "%s: weight_map lists '%s' twice", ST_INDEX, s->map[i].name);
    return TM_OK;
}

int tm_st_set_open(tm_st_set **out, const char *dir, tm_err *err)
{
    *out = NULL;
    tm_st_set *s = calloc(1, sizeof *s);
    if (!s) return tm_errf(err, TM_E_NOMEM, "out of memory");
    char path[4096];
    int rc;
    if (tm_path_join(path, sizeof path, dir, "model.safetensors")) {
        rc = tm_errf(err, TM_E_INVALID, "%s: path too long", dir);
    } else if (tm_file_exists(path)) {
        s->files = calloc(1, sizeof *s->files);
        if (!s->files) rc = tm_errf(err, TM_E_NOMEM, "out of memory");
        else rc = tm_st_open(&s->files[0], path, err);
        if (rc == TM_OK) s->nfiles = 1;
    } else if (tm_path_join(path, sizeof path, dir, ST_INDEX) == 0 && tm_file_exists(path)) {
        s->sharded = 1;
        rc = open_sharded(s, dir, path, err);
    } else {
        rc = tm_errf(err, TM_E_NOTFOUND, "%s: neither model.safetensors nor %s found", dir, ST_INDEX);
    }
    if (rc) {
        tm_st_set_close(s);
        return rc;
    }
    *out = s;
    return TM_OK;
}

int tm_st_set_lookup(tm_st_set *s, const char *name, tm_tensor *out, tm_err *err)
{
    if (!s->sharded) return tm_st_find(s->files[0], name, out, err);
    st_wm key = {(char *)name, 0};
    const st_wm *w = bsearch(&key, s->map, (size_t)s->nmap, sizeof *s->map, cmp_wm);
    if (!w) return tm_errf(err, TM_E_NOTFOUND, "%s: no tensor '%s' in weight_map", ST_INDEX, name);
    int rc = tm_st_find(s->files[w->file], name, out, err);
    if (rc == TM_E_NOTFOUND)
        return tm_errf(err, TM_E_FORMAT, "%s: weight_map puts '%s' in %s, which has no such tensor", ST_INDEX,
                       name, s->files[w->file]->fname);
    return rc;
}

int tm_st_set_nfiles(const tm_st_set *s) { return s->nfiles; }
const tm_st_file *tm_st_set_file(const tm_st_set *s, int i) { return s->files[i]; }
