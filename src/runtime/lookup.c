/* runtime/lookup.c: prompt lookup's drafts (runtime/lookup.h has the design block). */
#include "runtime/lookup.h"

#include <string.h>

int tm_lookup_draft(const int32_t *hist, int n, int ngram_max, int ngram_min, int32_t *draft, int kmax)
{
    if (!hist || !draft || kmax < 1 || ngram_min < 1 || ngram_max < ngram_min) return 0;
    for (int g = ngram_max; g >= ngram_min; g--) {
        if (g >= n) continue;
        const int32_t *key = hist + n - g;
        /* the latest start i < n - g of an earlier occurrence; its continuation hist[i + g ..) */
        for (int i = n - g - 1; i >= 0; i--) {
            if (hist[i] != key[0] || memcmp(hist + i, key, sizeof(int32_t) * (size_t)g)) continue;
            int k = n - (i + g);
            k = k < kmax ? k : kmax;
            memcpy(draft, hist + i + g, sizeof(int32_t) * (size_t)k);
            return k;
        }
    }
    return 0;
}
