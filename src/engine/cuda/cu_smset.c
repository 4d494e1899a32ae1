/* engine/cuda/cu_smset.c: a share of the GPU's multiprocessors for one engine instance (cu_smset.h has
 * the design block). The driver's green-context entry points are fetched at run time through the
 * runtime (cudaGetDriverEntryPointByVersion), so the library links only libcudart and still loads
 * where the driver is older than green contexts (12.4): there the open reports TM_E_UNSUPPORTED and the
 * engine runs on the whole device. */
#include "engine/cuda/cu_smset.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*fn_get_res)(CUdevice, CUdevResource *, CUdevResourceType);
typedef CUresult (*fn_split)(CUdevResource *, unsigned *, const CUdevResource *, CUdevResource *, unsigned, unsigned);
typedef CUresult (*fn_desc)(CUdevResourceDesc *, CUdevResource *, unsigned);
typedef CUresult (*fn_gctx)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned);
typedef CUresult (*fn_gdestroy)(CUgreenCtx);
typedef CUresult (*fn_gstream)(CUstream *, CUgreenCtx, unsigned, int);
typedef CUresult (*fn_from_g)(CUcontext *, CUgreenCtx);
typedef CUresult (*fn_push)(CUcontext);
typedef CUresult (*fn_pop)(CUcontext *);

typedef struct drv {
    fn_get_res get_res;
    fn_split split;
    fn_desc desc;
    fn_gctx gctx;
    fn_gdestroy gdestroy;
    fn_gstream gstream;
    fn_from_g from_g;
    fn_push push;
    fn_pop pop;
} drv;

/* the entry points at the ABI of the headers this file was built with (CUDART_VERSION: cuGreenCtxStreamCreate
 * is 12.5's, the CUdevResource layout changed in 13.0); 0, or the symbol that is missing */
static const char *drv_load(drv *d)
{
    struct { const char *sym; void **fn; } t[] = {
        {"cuDeviceGetDevResource", (void **)&d->get_res}, {"cuDevSmResourceSplitByCount", (void **)&d->split},
        {"cuDevResourceGenerateDesc", (void **)&d->desc}, {"cuGreenCtxCreate", (void **)&d->gctx},
        {"cuGreenCtxDestroy", (void **)&d->gdestroy},     {"cuGreenCtxStreamCreate", (void **)&d->gstream},
        {"cuCtxFromGreenCtx", (void **)&d->from_g},       {"cuCtxPushCurrent", (void **)&d->push},
        {"cuCtxPopCurrent", (void **)&d->pop},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        enum cudaDriverEntryPointQueryResult q;
        *t[i].fn = NULL;
        if (cudaGetDriverEntryPointByVersion(t[i].sym, t[i].fn, CUDART_VERSION, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !*t[i].fn)
            return t[i].sym;
    }
    return NULL;
}

int cu_smset_open(cu_smset *s, int dev, int part, double share, int prio, tm_err *err)
{
    memset(s, 0, sizeof *s);
    if (part != 1 && part != 2) return tm_errf(err, TM_E_INVALID, "cuda engine: device part %d (1 or 2)", part);
    if (!(share > 0 && share < 1)) return tm_errf(err, TM_E_INVALID, "cuda engine: device share %g (between 0 and 1)", share);
    drv d;
    const char *miss = drv_load(&d);
    if (miss)
        return tm_errf(err, TM_E_UNSUPPORTED, "cuda engine: the driver has no %s at CUDA %d.%d's interface (green contexts)",
                       miss, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    CUdevResource all, grp, rest;
    memset(&all, 0, sizeof all), memset(&grp, 0, sizeof grp), memset(&rest, 0, sizeof rest);
    CUresult r = d.get_res((CUdevice)dev, &all, CU_DEV_RESOURCE_TYPE_SM);
    if (r != CUDA_SUCCESS) return tm_errf(err, TM_E_UNSUPPORTED, "cuda engine: the device's multiprocessors (driver error %d)", (int)r);
    unsigned total = all.sm.smCount, want = (unsigned)(share * total + 0.5), n = 1;
    want = want < 1 ? 1 : want >= total ? total - 1 : want;
    /* one group of at least `want` (the driver rounds up to its granularity) and the rest: the same
       call in both instances, so part 1 and part 2 are disjoint */
    r = d.split(&grp, &n, &all, &rest, 0, want);
    if (r != CUDA_SUCCESS || n != 1 || grp.sm.smCount == 0 || rest.sm.smCount == 0)
        return tm_errf(err, TM_E_UNSUPPORTED, "cuda engine: %u of %u multiprocessors cannot be split off (driver error %d)",
                       want, total, (int)r);
    CUdevResourceDesc desc;
    CUgreenCtx g = NULL;
    if ((r = d.desc(&desc, part == 1 ? &grp : &rest, 1)) != CUDA_SUCCESS ||
        (r = d.gctx(&g, desc, (CUdevice)dev, CU_GREEN_CTX_DEFAULT_STREAM)) != CUDA_SUCCESS)
        return tm_errf(err, TM_E_UNSUPPORTED, "cuda engine: a green context of %u multiprocessors (driver error %d)",
                       part == 1 ? grp.sm.smCount : rest.sm.smCount, (int)r);
    CUstream st = NULL;
    CUcontext c = NULL, popped = NULL;
    int ok = (r = d.gstream(&st, g, CU_STREAM_NON_BLOCKING, prio)) == CUDA_SUCCESS;
    /* events must be of the stream's context: made with the green context current */
    if (ok && (r = d.from_g(&c, g)) == CUDA_SUCCESS && (r = d.push(c)) == CUDA_SUCCESS) {
        for (int i = 0; i < 2 && ok; i++)
            ok = cudaEventCreateWithFlags(&s->ev[i], cudaEventDisableTiming) == cudaSuccess;
        d.pop(&popped);
    } else ok = 0;
    s->gctx = g, s->st = (cudaStream_t)st, s->sms = (int)(part == 1 ? grp.sm.smCount : rest.sm.smCount);
    s->ctx = c, s->push = (void *)d.push, s->pop = (void *)d.pop;
    s->total = (int)total;
    if (!ok) {
        cu_smset_close(s);
        return tm_errf(err, TM_E_UNSUPPORTED, "cuda engine: a stream in the green context (driver error %d)", (int)r);
    }
    return TM_OK;
}

int cu_smset_enter(const cu_smset *s)
{
    static int cur = -1; /* TANDEM_CUDA_GREEN_CURRENT=0: calls leave the primary context current */
    if (cur < 0) cur = !getenv("TANDEM_CUDA_GREEN_CURRENT") || strcmp(getenv("TANDEM_CUDA_GREEN_CURRENT"), "0");
    return cur && s->ctx && ((fn_push)s->push)((CUcontext)s->ctx) == CUDA_SUCCESS;
}

void cu_smset_leave(const cu_smset *s)
{
    CUcontext c;
    ((fn_pop)s->pop)(&c);
}

void cu_smset_close(cu_smset *s)
{
    for (int i = 0; i < 2; i++)
        if (s->ev[i]) cudaEventDestroy(s->ev[i]);
    if (s->st) cudaStreamDestroy(s->st);
    drv d;
    if (s->gctx && !drv_load(&d)) d.gdestroy((CUgreenCtx)s->gctx);
    memset(s, 0, sizeof *s);
}
