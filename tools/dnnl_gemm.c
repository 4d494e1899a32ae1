/* tools/dnnl_gemm.c: oneDNN's int8 matmul on the prefill GEMM shapes, a
 * reference for what a tuned AMX GEMM reaches on this machine (not part of
 * the build; Debian's libdnnl-dev):
 *
 *   cc -O2 -o /tmp/dnnl_gemm tools/dnnl_gemm.c -ldnnl
 *   OMP_NUM_THREADS=2 ONEDNN_MAX_CPU_ISA=AVX512_CORE_AMX /tmp/dnnl_gemm M N K [seconds] [dst] [wMiB] [yMiB]
 *
 * y[M][N] = a[M][K] (u8) . w[K][N] (s8), scaled per column, stored as dst
 * (bf16 by default, or f32 / s32): tandem's W8A8 GEMM with its bf16 output
 * (the per-row activation scale is one more multiply in tandem's epilogue).
 * The weights are reordered once to the layout the primitive asks for, as
 * tandem packs them at bind. wMiB / yMiB (as kbench's -m / -y): the calls cycle
 * through that many MiB of weight copies / outputs, so the weights come from
 * memory and y's lines are out of the caches, as in the engine (0: one of
 * each, warm). Prints the median of 9 rounds in GOP/s (2 ops a
 * multiply-add) and the implementation oneDNN chose. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oneapi/dnnl/dnnl.h>

#define CK(x)                                                                        \
    do {                                                                             \
        dnnl_status_t s_ = (x);                                                      \
        if (s_ != dnnl_success) {                                                    \
            fprintf(stderr, "dnnl_gemm: %s failed (%d)\n", #x, (int)s_);             \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: dnnl_gemm M N K [seconds per round] [bf16|f32|s32] [wMiB] [yMiB]\n");
        return 2;
    }
    long M = atol(argv[1]), N = atol(argv[2]), K = atol(argv[3]);
    double secs = argc > 4 ? atof(argv[4]) : 0.1;
    const char *dn = argc > 5 ? argv[5] : "bf16";
    dnnl_data_type_t ddt = !strcmp(dn, "f32") ? dnnl_f32 : !strcmp(dn, "s32") ? dnnl_s32 : dnnl_bf16;
    double wmib = argc > 6 ? atof(argv[6]) : 0, ymib = argc > 7 ? atof(argv[7]) : 0;
    if (M <= 0 || N <= 0 || K <= 0 || secs <= 0) return 2;
    int ysz = ddt == dnnl_bf16 ? 2 : 4;
    long nwc = (long)(wmib * (1 << 20) / ((double)N * K)) + 1, nyc = (long)(ymib * (1 << 20) / ((double)M * N * ysz)) + 1;

    dnnl_engine_t eng;
    dnnl_stream_t st;
    CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));

    dnnl_dims_t ad = {M, K}, wd = {K, N}, yd = {M, N};
    dnnl_memory_desc_t a_md, w_any, w_plain, y_md;
    CK(dnnl_memory_desc_init_by_tag(&a_md, 2, ad, dnnl_u8, dnnl_ab));
    CK(dnnl_memory_desc_init_by_tag(&w_any, 2, wd, dnnl_s8, dnnl_format_tag_any));
    CK(dnnl_memory_desc_init_by_tag(&w_plain, 2, wd, dnnl_s8, dnnl_ba)); /* [N][K], as HF stores it */
    CK(dnnl_memory_desc_init_by_tag(&y_md, 2, yd, ddt, dnnl_ab));

    dnnl_matmul_desc_t md;
    CK(dnnl_matmul_desc_init(&md, &a_md, &w_any, NULL, &y_md));
    dnnl_primitive_attr_t attr;
    CK(dnnl_primitive_attr_create(&attr));
    float *scales = malloc(sizeof(float) * N);
    for (long j = 0; j < N; j++) scales[j] = 1e-3f * (1 + j % 7);
    if (ddt != dnnl_s32) CK(dnnl_primitive_attr_set_output_scales(attr, N, 1 << 1, scales));
    dnnl_primitive_desc_t pd;
    CK(dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL));
    const char *impl = NULL;
    CK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);

    dnnl_memory_t a_m, wp_m, *w_m = calloc(nwc, sizeof *w_m), *y_m = calloc(nyc, sizeof *y_m);
    CK(dnnl_memory_create(&a_m, &a_md, eng, DNNL_MEMORY_ALLOCATE));
    CK(dnnl_memory_create(&wp_m, &w_plain, eng, DNNL_MEMORY_ALLOCATE));
    for (long i = 0; i < nwc; i++) CK(dnnl_memory_create(&w_m[i], w_md, eng, DNNL_MEMORY_ALLOCATE));
    for (long i = 0; i < nyc; i++) {
        CK(dnnl_memory_create(&y_m[i], &y_md, eng, DNNL_MEMORY_ALLOCATE));
        void *yp;
        CK(dnnl_memory_get_data_handle(y_m[i], &yp));
        memset(yp, 0, (size_t)M * N * ysz); /* paged in */
    }
    unsigned char *ap, *wp;
    CK(dnnl_memory_get_data_handle(a_m, (void **)&ap));
    CK(dnnl_memory_get_data_handle(wp_m, (void **)&wp));
    for (long i = 0; i < M * K; i++) ap[i] = (unsigned char)(i * 131 + 7);
    for (long i = 0; i < N * K; i++) wp[i] = (unsigned char)(i * 17 + 3);

    /* the weights into the primitive's layout, once */
    dnnl_primitive_desc_t rpd;
    dnnl_primitive_t rp;
    CK(dnnl_reorder_primitive_desc_create(&rpd, &w_plain, eng, w_md, eng, NULL));
    CK(dnnl_primitive_create(&rp, rpd));
    for (long i = 0; i < nwc; i++) {
        dnnl_exec_arg_t rargs[2] = {{DNNL_ARG_FROM, wp_m}, {DNNL_ARG_TO, w_m[i]}};
        CK(dnnl_primitive_execute(rp, st, 2, rargs));
    }
    CK(dnnl_stream_wait(st));

    dnnl_primitive_t mm;
    CK(dnnl_primitive_create(&mm, pd));
    double r[9];
    long call = 0;
    for (int round = -1; round < 9; round++) { /* round -1 warms up */
        long n = 0;
        double t0 = now_s(), t;
        do {
            dnnl_exec_arg_t args[3] = {
                {DNNL_ARG_SRC, a_m}, {DNNL_ARG_WEIGHTS, w_m[call % nwc]}, {DNNL_ARG_DST, y_m[call % nyc]}};
            call++;
            CK(dnnl_primitive_execute(mm, st, 3, args));
            CK(dnnl_stream_wait(st));
            n++;
        } while ((t = now_s() - t0) < secs);
        if (round >= 0) r[round] = 2.0 * M * N * K * n / t / 1e9;
    }
    qsort(r, 9, sizeof r[0], cmp_d);
    printf("dnnl %ld x %ld x %ld u8.s8->%s (%ld weight copies, %ld outputs): %.0f GOP/s (median of 9; %.0f-%.0f) impl %s\n",
           M, N, K, dn, nwc, nyc, r[4], r[0], r[8], impl ? impl : "?");
    return 0;
}
