/* hf/hf_model.c: config.json + safetensors → bound tm_model. */
#include "hf/hf_model.h"

#include <stdio.h>

#include "core/fileio.h"
#include "hf/config.h"

static int st_lookup(void *ctx, const char *name, tm_tensor *out, tm_err *err)
{
    return tm_st_set_lookup(ctx, name, out, err);
}

tm_tensor_source tm_st_set_source(tm_st_set *s)
{
    tm_tensor_source src = {s, st_lookup, 0};
    return src;
}

static void st_owner_free(void *p) { tm_st_set_close(p); }

int tm_hf_model_open(tm_model **out, const char *dir, const char *config_path, tm_err *err)
{
    *out = NULL;
    char path[4096];
    if (!config_path) {
        if (tm_path_join(path, sizeof path, dir, "config.json"))
            return tm_errf(err, TM_E_INVALID, "%s: path too long", dir);
        config_path = path;
    }
    tm_hf_config cfg;
    int rc = tm_hf_config_load(&cfg, config_path, err);
    if (rc) return rc;
    tm_model *m = NULL;
    rc = tm_model_init(&m, &cfg, err);
    tm_hf_config_free(&cfg);
    if (rc) return rc;
    tm_st_set *s = NULL;
    rc = tm_st_set_open(&s, dir, err);
    if (rc) {
        tm_model_free(m);
        return rc;
    }
    tm_model_set_owner(m, s, st_owner_free);
    tm_tensor_source src = tm_st_set_source(s);
    rc = tm_model_bind(m, &src, err);
    if (rc) {
        tm_model_free(m);
        return rc;
    }
    *out = m;
    return TM_OK;
}
