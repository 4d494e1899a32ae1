/* pkg/pkg_meta.c: the functions table (pkg_format.h section 4.7) to and from
 * JSON, with the validation every reader and writer applies. */
#include "pkg/pkg-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const legend[] = {"B", "T", "P", "D", "H", "Hk", "Dh", "F", "V", "L", "E", "N", "K"};

const char *tm_pkg_legend_symbol(const char *s, size_t n)
{
    for (size_t i = 0; i < sizeof legend / sizeof legend[0]; i++)
        if (strlen(legend[i]) == n && strncmp(s, legend[i], n) == 0) return legend[i];
    return NULL;
}

int tm_pkg_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > TM_PKG_MAX_FN_NAME) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

/* the integer in a JSON number, if it is one in [lo, hi] */
static int json_int(const cJSON *j, double lo, double hi, int64_t *out)
{
    if (!cJSON_IsNumber(j)) return -1;
    double v = j->valuedouble;
    if (!(v >= lo && v <= hi) || floor(v) != v) return -1;
    *out = (int64_t)v;
    return 0;
}

static int parse_io(const cJSON *j, tm_pkg_io *io, const char *where, tm_err *err)
{
    if (!cJSON_IsObject(j)) return tm_errf(err, TM_E_FORMAT, "%s: not an object", where);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
    if (!cJSON_IsString(name) || !tm_pkg_name_ok(name->valuestring))
        return tm_errf(err, TM_E_FORMAT, "%s.name: missing or not 1..%d of [A-Za-z0-9_.-]", where,
                       TM_PKG_MAX_FN_NAME);
    io->name = name->valuestring;
    int d = cJSON_IsString(dt) ? tm_dtype_from_name(dt->valuestring) : -1;
    if (d < 0) return tm_errf(err, TM_E_FORMAT, "%s.dtype: missing or not a known dtype name", where);
    io->dtype = (tm_dtype)d;
    int nd = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : -1;
    if (nd < 1 || nd > TM_PKG_MAX_FN_DIMS)
        return tm_errf(err, TM_E_FORMAT, "%s.shape: missing or not an array of 1..%d dims", where,
                       TM_PKG_MAX_FN_DIMS);
    io->ndim = nd;
    int k = 0;
    for (const cJSON *e = shape->child; e; e = e->next, k++) {
        tm_pkg_dim *dim = &io->dims[k];
        dim->sym = NULL;
        dim->size = 0;
        if (cJSON_IsString(e)) {
            dim->sym = tm_pkg_legend_symbol(e->valuestring, strlen(e->valuestring));
            if (!dim->sym)
                return tm_errf(err, TM_E_FORMAT, "%s.shape[%d]: '%.32s' is not a shape-legend symbol", where, k,
                               e->valuestring);
        } else if (json_int(e, 1, (double)TM_PKG_MAX_DIM, &dim->size) != 0) {
            return tm_errf(err, TM_E_FORMAT, "%s.shape[%d]: neither a symbol nor an integer in [1, 2^40]", where,
                           k);
        }
    }
    return TM_OK;
}

static int parse_ios(const cJSON *fn, const char *key, tm_pkg_io *ios, int n, const char *where, tm_err *err)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(fn, key);
    int k = 0;
    char at[200];
    for (const cJSON *e = arr->child; e && k < n; e = e->next, k++) {
        snprintf(at, sizeof at, "%s.%s[%d]", where, key, k);
        int rc = parse_io(e, &ios[k], at, err);
        if (rc) return rc;
    }
    return TM_OK;
}

static int io_count(const cJSON *fn, const char *key, const char *where, int *n, tm_err *err)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(fn, key);
    *n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : -1;
    if (*n < 0 || *n > TM_PKG_MAX_FN_IO)
        return tm_errf(err, TM_E_FORMAT, "%s.%s: missing or not an array of at most %d entries", where, key,
                       TM_PKG_MAX_FN_IO);
    return TM_OK;
}

static int parse_function(const cJSON *j, tm_pkg_function *f, const char *where, tm_err *err)
{
    if (!cJSON_IsObject(j)) return tm_errf(err, TM_E_FORMAT, "%s: not an object", where);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(j, "engine_class");
    const cJSON *chunk = cJSON_GetObjectItemCaseSensitive(j, "chunk");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "stateful");
    if (!cJSON_IsString(name) || !tm_pkg_name_ok(name->valuestring))
        return tm_errf(err, TM_E_FORMAT, "%s.name: missing or not 1..%d of [A-Za-z0-9_.-]", where,
                       TM_PKG_MAX_FN_NAME);
    f->name = name->valuestring;
    if (cJSON_IsString(kind) && strcmp(kind->valuestring, "prefill") == 0) f->kind = TM_PKG_FN_PREFILL;
    else if (cJSON_IsString(kind) && strcmp(kind->valuestring, "decode") == 0) f->kind = TM_PKG_FN_DECODE;
    else return tm_errf(err, TM_E_FORMAT, "%s ('%s').kind: not \"prefill\" or \"decode\"", where, f->name);
    if (!cJSON_IsString(cls) || !tm_pkg_name_ok(cls->valuestring) || strlen(cls->valuestring) > 32)
        return tm_errf(err, TM_E_FORMAT, "%s ('%s').engine_class: missing or not 1..32 of [A-Za-z0-9_.-]",
                       where, f->name);
    f->engine_class = cls->valuestring;
    int64_t c;
    if (json_int(chunk, 1, TM_PKG_MAX_FN_CHUNK, &c) != 0)
        return tm_errf(err, TM_E_FORMAT, "%s ('%s').chunk: not an integer in [1, %d]", where, f->name,
                       TM_PKG_MAX_FN_CHUNK);
    f->chunk = (int)c;
    if (!cJSON_IsBool(st)) return tm_errf(err, TM_E_FORMAT, "%s ('%s').stateful: not a boolean", where, f->name);
    f->stateful = cJSON_IsTrue(st);
    int ni, no, rc;
    if ((rc = io_count(j, "inputs", where, &ni, err)) || (rc = io_count(j, "outputs", where, &no, err))) return rc;
    tm_pkg_io *ios = calloc((size_t)(ni + no) + 1, sizeof *ios);
    if (!ios) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", where);
    f->inputs = ios;
    f->outputs = ios + ni;
    f->n_inputs = ni;
    f->n_outputs = no;
    if ((rc = parse_ios(j, "inputs", ios, ni, where, err)) || (rc = parse_ios(j, "outputs", ios + ni, no, where, err)))
        return rc;
    return TM_OK;
}

int tm_pkg_functions_parse(const cJSON *arr, const char *label, tm_pkg_function **fns, int *n, tm_err *err)
{
    *fns = NULL;
    *n = 0;
    if (!arr) return TM_OK;
    int count = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : -1;
    if (count < 0 || count > TM_PKG_MAX_FUNCTIONS)
        return tm_errf(err, TM_E_FORMAT, "%s: metadata: functions: not an array of at most %d entries", label,
                       TM_PKG_MAX_FUNCTIONS);
    tm_pkg_function *f = calloc((size_t)count + 1, sizeof *f);
    if (!f) return tm_errf(err, TM_E_NOMEM, "%s: metadata: functions: out of memory", label);
    int k = 0, rc = TM_OK;
    char where[300];
    for (const cJSON *e = arr->child; e && k < count; e = e->next, k++) {
        snprintf(where, sizeof where, "%.200s: metadata: functions[%d]", label, k);
        rc = parse_function(e, &f[k], where, err);
        for (int i = 0; rc == TM_OK && i < k; i++)
            if (strcmp(f[i].name, f[k].name) == 0)
                rc = tm_errf(err, TM_E_FORMAT, "%s: name '%s' repeats functions[%d]", where, f[k].name, i);
        if (rc) {
            tm_pkg_functions_free(f, k + 1);
            return rc;
        }
    }
    *fns = f;
    *n = count;
    return TM_OK;
}

void tm_pkg_functions_free(tm_pkg_function *fns, int n)
{
    if (!fns) return;
    for (int i = 0; i < n; i++) free((void *)fns[i].inputs);
    free(fns);
}

static cJSON *io_to_json(const tm_pkg_io *io)
{
    cJSON *o = cJSON_CreateObject(), *shape = NULL;
    if (!o || !cJSON_AddStringToObject(o, "name", io->name ? io->name : "") ||
        !cJSON_AddStringToObject(o, "dtype", tm_dtype_name(io->dtype)) ||
        !(shape = cJSON_AddArrayToObject(o, "shape"))) {
        cJSON_Delete(o);
        return NULL;
    }
    for (int d = 0; d < io->ndim && d < TM_PKG_MAX_FN_DIMS; d++) {
        const tm_pkg_dim *dim = &io->dims[d];
        cJSON *v = dim->sym ? cJSON_CreateString(dim->sym) : cJSON_CreateNumber((double)dim->size);
        if (!v || !cJSON_AddItemToArray(shape, v)) {
            cJSON_Delete(v);
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

static int add_ios(cJSON *o, const char *key, const tm_pkg_io *ios, int n)
{
    cJSON *arr = cJSON_AddArrayToObject(o, key);
    if (!arr) return -1;
    for (int i = 0; i < n; i++) {
        cJSON *e = io_to_json(&ios[i]);
        if (!e || !cJSON_AddItemToArray(arr, e)) {
            cJSON_Delete(e);
            return -1;
        }
    }
    return 0;
}

cJSON *tm_pkg_function_to_json(const tm_pkg_function *f)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    const char *kind = f->kind == TM_PKG_FN_PREFILL ? "prefill" : f->kind == TM_PKG_FN_DECODE ? "decode" : "?";
    int ok = cJSON_AddStringToObject(o, "name", f->name ? f->name : "") &&
             cJSON_AddStringToObject(o, "kind", kind) &&
             cJSON_AddStringToObject(o, "engine_class", f->engine_class ? f->engine_class : "") &&
             cJSON_AddNumberToObject(o, "chunk", f->chunk) && cJSON_AddBoolToObject(o, "stateful", f->stateful);
    if (!ok || f->n_inputs < 0 || f->n_outputs < 0 || (f->n_inputs && !f->inputs) || (f->n_outputs && !f->outputs) ||
        add_ios(o, "inputs", f->inputs, f->n_inputs) || add_ios(o, "outputs", f->outputs, f->n_outputs)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}
