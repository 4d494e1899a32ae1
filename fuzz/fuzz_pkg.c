/* fuzz/fuzz_pkg.c: the package reader on arbitrary bytes (libFuzzer).
 *
 * Each input is opened twice: as given, and after tm_pkg_reseal() has made
 * its header and index hashes consistent, so that mutations get past the
 * hashes and reach the structural checks behind them (which must hold on
 * their own: a hash is no defence against a hostile file). On success every
 * accessor runs: all tensors looked up for both stages, verify, documents,
 * metadata and the functions table. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkg/pkg.h"
#include "pkg/pkg_format.h"

static void exercise(tm_pkg *p)
{
    tm_err err = {0};
    volatile size_t sink = 0;
    for (int i = 0; i < tm_pkg_n_tensors(p); i++) {
        const tm_pkg_entry *e = tm_pkg_tensor(p, i);
        tm_tensor t;
        for (unsigned s = TM_PKG_PREFILL; s <= TM_PKG_DECODE; s++)
            if (tm_pkg_lookup(p, s, e->t.name, &t, &err) == TM_OK) sink += t.nbytes + ((const uint8_t *)t.data)[0];
    }
    tm_pkg_verify(p, &err);
    for (int i = 0; i < tm_pkg_n_docs(p); i++) {
        size_t n;
        const char *d = tm_pkg_doc(p, tm_pkg_doc_name(p, i), &n);
        sink += n + (d ? (size_t)d[n] : 0);
    }
    double v;
    const char *s = tm_pkg_meta_str(p, "converter.encodings.decode");
    sink += s ? strlen(s) : 0;
    sink += (size_t)tm_pkg_meta_num(p, "model.n_params", &v);
    for (int i = 0; i < tm_pkg_n_functions(p); i++) {
        const tm_pkg_function *f = tm_pkg_function_at(p, i);
        for (int k = 0; k < f->n_inputs; k++) sink += strlen(f->inputs[k].name) + (size_t)f->inputs[k].ndim;
        for (int k = 0; k < f->n_outputs; k++) sink += strlen(f->outputs[k].name) + (size_t)f->outputs[k].ndim;
        sink += tm_pkg_function_find(p, f->name) == f;
    }
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tm_err err = {0};
    tm_pkg *p = NULL;
    if (tm_pkg_open_mem(&p, data, size, "fuzz.tdm", &err) == TM_OK) {
        exercise(p);
        tm_pkg_close(p);
    }
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    if (tm_pkg_reseal(copy, size) == 0 && tm_pkg_open_mem(&p, copy, size, "fuzz.tdm", &err) == TM_OK) {
        exercise(p);
        tm_pkg_close(p);
    }
    free(copy);
    return 0;
}
