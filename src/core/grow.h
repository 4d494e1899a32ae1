/* core/grow.h: arrays that grow by doubling.
 *
 *   T *v = NULL; size_t cap = 0, n = 0;
 *   if (tm_grow((void **)&v, &cap, n + 1, sizeof *v)) return TM_E_NOMEM;
 *   v[n++] = x;
 */
#ifndef TM_CORE_GROW_H
#define TM_CORE_GROW_H

#include <stdlib.h>

#include "core/status.h"

/* tm_grow: *v (of *cap elements of size bytes) holds at least need: reallocated to the first
 * doubling of *cap (16 from empty) that does. TM_OK, or TM_E_NOMEM with *v and *cap unchanged. */
static inline int tm_grow(void **v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return TM_OK;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *nv = realloc(*v, c * size);
    if (!nv) return TM_E_NOMEM;
    *v = nv;
    *cap = c;
    return TM_OK;
}

#endif
