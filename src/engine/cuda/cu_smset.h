/* engine/cuda/cu_smset.h: one engine instance's share of the GPU's multiprocessors (engine.h's
 * tm_engine_opts.part), so that the prefill and the decode engine bound to one GPU run side by side on
 * disjoint SMs: a long prompt's GEMMs then cannot hold every SM while a decode step waits.
 *
 *   cu_smset s;
 *   if (cu_smset_open(&s, dev, part, share, prio, &err) == TM_OK) { // part 1: the first share, 2: the rest;
 *                                                                     // prio: its stream's priority
 *       ... launch on s.st (kernels, cuBLAS, copies); record s.ev[i] on it ...
 *       cu_smset_close(&s);
 *   }
 *
 * Design block
 * ------------
 * A green context (CUDA 12.4+): the device's SM resource is split in one call into a group of at
 * least round(share * SMs) multiprocessors (the driver rounds up to its partition granularity) and the
 * remainder; part 1 takes the group, part 2 the remainder. Both instances make the same call on the
 * same device, so their parts are disjoint. Work goes to a part only through its stream (s.st):
 * kernels, cuBLAS and copies launched on it run on the part's SMs; memory is the device's, shared with
 * the primary context, so weights, scratch and pinned buffers made there serve both. Events recorded
 * on a stream must be of its context: s.ev are made with the green context current, and a call on the
 * part runs with it current (cu_smset_enter; TANDEM_CUDA_GREEN_CURRENT=0: not, a diagnosis switch). The engine keeps
 * its primary-context stream too and runs a call on the whole device where the caller says the other
 * engine is idle (tm_prefill_args.alone), as the CPU engines borrow the idle side's cores.
 * A captured CUDA graph runs where it was captured, so the engine keeps its graphs per stream. */
#ifndef TM_ENGINE_CUDA_CU_SMSET_H
#define TM_ENGINE_CUDA_CU_SMSET_H

#include <cuda_runtime.h>

#include "core/status.h"

typedef struct cu_smset {
    void *gctx;          /* the green context (CUgreenCtx) */
    cudaStream_t st;     /* a stream on it */
    cudaEvent_t ev[2];   /* events of its context (timing off) */
    int sms, total;      /* its multiprocessors, the device's */
    void *ctx;           /* the green context as a CUcontext, made current around a call (cu_smset_enter) */
    void *push, *pop;    /* the driver's cuCtxPushCurrent / cuCtxPopCurrent */
} cu_smset;

/* TM_E_UNSUPPORTED (named) where the driver or device cannot split (nothing held then) */
int cu_smset_open(cu_smset *s, int dev, int part, double share, int prio, tm_err *err);
void cu_smset_close(cu_smset *s);
/* around a call on the part: its context current on the calling thread (runtime calls that take no stream,
 * cuBLAS's and the lazy allocations, then act in it), the one before restored after; 0 where it is not */
int cu_smset_enter(const cu_smset *s);
void cu_smset_leave(const cu_smset *s);

#endif
