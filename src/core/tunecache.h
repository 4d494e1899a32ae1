/* core/tunecache.h: measured choices kept per machine, so that every session
 * on it makes the same one.
 *
 *   char v[16];
 *   if (tm_tune_get("gemv q4 896 4864", v, sizeof v)) use(v);
 *   else { measure ...; tm_tune_put("gemv q4 896 4864", "avx2"); }
 *
 * A choice made by timing (which ISA's GEMV streams faster on this core, say)
 * can come out either way where the two are close, and the two compute the
 * same sums in different orders: two sessions would then give different
 * last bits, and a seeded generation would not repeat. Kept here, the first
 * measurement decides for every later session on the machine.
 *
 * The file is <cache>/tune.txt (<cache>: $XDG_CACHE_HOME/tandem, else
 * ~/.cache/tandem, the router's directory): one "key<TAB>value" line each,
 * keys prefixed by the build's identity and the CPU's brand string, so a
 * new build or another CPU measures again. Writes replace the file
 * atomically (temporary file, rename); two processes writing at once may
 * lose one's line, which is then measured again. Best effort throughout: an
 * unreadable or unwritable cache only means measuring. TANDEM_TUNE_CACHE=0
 * turns it off (every session measures). Thread-safe. */
#ifndef TM_CORE_TUNECACHE_H
#define TM_CORE_TUNECACHE_H

#include <stddef.h>

#include "core/status.h"

/* tm_build_id: the build's identity (git describe of the source the Makefile built, or "unknown"). */
const char *tm_build_id(void);

/* tm_cache_dir: the directory of tandem's per-machine caches ($XDG_CACHE_HOME/tandem when
 * XDG_CACHE_HOME is absolute, else $HOME/.cache/tandem), not created. */
int tm_cache_dir(char *buf, size_t n, tm_err *err);

/* tm_mkdir_p: dir and its missing parents (mode 0755). */
int tm_mkdir_p(const char *dir, tm_err *err);

/* tm_tune_get: 1 and the value (NUL-terminated, truncated to n) if key was stored, else 0. */
int tm_tune_get(const char *key, char *val, size_t n);

/* tm_tune_put: store key = val (no tabs or newlines in either), replacing an earlier value. */
void tm_tune_put(const char *key, const char *val);

#endif
