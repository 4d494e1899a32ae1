/* pkg/pkg-impl.h: internals shared by pkg_read.c, pkg_write.c and pkg_meta.c. */
#ifndef TM_PKG_IMPL_H
#define TM_PKG_IMPL_H

#include <cjson/cJSON.h>

#include "pkg/pkg.h"

/* tm_pkg_functions_parse: validate the metadata's "functions" array (section
 * 4.7) into *fns [*n] (free with tm_pkg_functions_free). The strings point
 * into `arr`, which must outlive the result. A NULL arr gives zero functions.
 * Errors name `label` and the entry. */
int tm_pkg_functions_parse(const cJSON *arr, const char *label, tm_pkg_function **fns, int *n,
                           tm_err *err);
void tm_pkg_functions_free(tm_pkg_function *fns, int n);

/* tm_pkg_function_to_json: the JSON object for f (not validated; NULL when
 * out of memory or f has an unknown dtype/kind). */
cJSON *tm_pkg_function_to_json(const tm_pkg_function *f);

/* tm_pkg_legend_symbol: the static shape-legend symbol (core/tensor.h: B T P
 * D H Hk Dh F V L E N K) spelled by s[0..n), or NULL. */
const char *tm_pkg_legend_symbol(const char *s, size_t n);

/* tm_pkg_name_ok: a function or io name: 1..TM_PKG_MAX_FN_NAME of [A-Za-z0-9_.-]. */
int tm_pkg_name_ok(const char *s);

#endif
