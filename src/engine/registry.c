/* engine/registry.c: every engine compiled in, best first. A build without
 * an engine (e.g. no CUDA: make CUDA=1 adds it) simply has no entry here. */
#include <string.h>

#include "engine/engine.h"

extern const tm_engine_vt tm_engine_cpu_amx, tm_engine_cpu_avx512, tm_engine_cpu_avx2, tm_engine_cpu_scalar,
    tm_engine_cpu_amx_emu;

#ifdef TM_CUDA
extern const tm_engine_vt tm_engine_cuda; /* make CUDA=1: an NVIDIA GPU, both roles */
#endif

/* The CUDA engine comes last although it prefills fastest: a session picks engines by role in this
 * order, and the GPU is taken only when asked for (--prefill cuda, --decode cuda): its weights go up
 * as bf16 whatever the package's encodings (docs/status.md), and a CPU-only session stays the
 * default on a machine that happens to have a GPU. */
static const tm_engine_vt *const engines[] = {
    &tm_engine_cpu_amx,
    &tm_engine_cpu_avx512,
    &tm_engine_cpu_avx2,
    &tm_engine_cpu_scalar,
#ifdef TM_CUDA
    &tm_engine_cuda,
#endif
};

const tm_engine_vt *const *tm_engines(int *n)
{
    *n = (int)(sizeof engines / sizeof engines[0]);
    return engines;
}

/* engines that are neither listed nor picked, found only by their full name:
 * cpu-amx over emulated tiles, so the tests run the AMX path anywhere */
static const tm_engine_vt *const hidden[] = {&tm_engine_cpu_amx_emu};

/* By full name ("cpu-amx"), or by the part after the device prefix ("amx"),
 * the first such engine in best-first order. */
const tm_engine_vt *tm_engine_find(const char *name)
{
    int n;
    const tm_engine_vt *const *e = tm_engines(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(e[i]->name, name) == 0) return e[i];
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++)
        if (strcmp(hidden[i]->name, name) == 0) return hidden[i];
    for (int i = 0; i < n; i++) {
        const char *dash = strchr(e[i]->name, '-');
        if (dash && strcmp(dash + 1, name) == 0) return e[i];
    }
    return NULL;
}
