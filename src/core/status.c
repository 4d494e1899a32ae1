/* core/status.c: error context helpers. */
#include "core/status.h"

#include <stdio.h>
#include <string.h>

int tm_verrf(tm_err *err, int code, const char *fmt, va_list ap)
{
    if (err) {
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    }
    return code;
}

int tm_errf(tm_err *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tm_verrf(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int tm_err_prefix(tm_err *err, const char *fmt, ...)
{
    if (!err) return TM_E_INVALID;
    char pre[TM_ERR_MSG], old[TM_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t np = strlen(pre), no = strlen(old), cap = sizeof err->msg - 1;
    if (np > cap) np = cap;
    memcpy(err->msg, pre, np);
    size_t k = np;
    for (const char *s = ": "; *s && k < cap; s++) err->msg[k++] = *s;
    if (no > cap - k) no = cap - k;
    memcpy(err->msg + k, old, no);
    err->msg[k + no] = '\0';
    return err->code;
}

void tm_err_clear(tm_err *err)
{
    if (!err) return;
    err->code = TM_OK;
    err->msg[0] = '\0';
}

const char *tm_status_str(int code)
{
    switch (code) {
    case TM_OK: return "ok";
    case TM_E_IO: return "I/O error";
    case TM_E_FORMAT: return "format error";
    case TM_E_INVALID: return "invalid value";
    case TM_E_UNSUPPORTED: return "unsupported";
    case TM_E_NOMEM: return "out of memory";
    case TM_E_NOTFOUND: return "not found";
    case TM_E_TEMPLATE: return "template error";
    case TM_E_CANCELLED: return "cancelled";
    case TM_E_CHECKSUM: return "checksum mismatch";
    case TM_E_LIMIT: return "limit exceeded";
    default: return "unknown error";
    }
}
