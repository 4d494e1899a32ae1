/* core/status.h: status codes and the error context.
 *
 * Every library function that can fail returns an int status (TM_OK == 0, a
 * negative tm_status otherwise) and, when given a tm_err, writes one line of
 * explanation into it that names the file and the field at fault, e.g.
 *
 *   "model.safetensors: tensor 'lm_head.weight': data offsets [10, 99) run past the end of the file (80 bytes)"
 *
 * There is no global error state: the caller owns the tm_err. The library
 * never calls exit(); programmer errors are assert()s. */
#ifndef TM_CORE_STATUS_H
#define TM_CORE_STATUS_H

#include <stdarg.h>

typedef enum tm_status {
    TM_OK = 0,
    TM_E_IO = -1,          /* open/read/write/mmap failed (errno text in the message) */
    TM_E_FORMAT = -2,      /* malformed file: bad magic, truncated, bad JSON, bad header */
    TM_E_INVALID = -3,     /* a value is out of range or inconsistent (absurd shape, bad arg) */
    TM_E_UNSUPPORTED = -4, /* well-formed but not supported (unknown architecture, dtype) */
    TM_E_NOMEM = -5,       /* allocation failed */
    TM_E_NOTFOUND = -6,    /* a named thing (tensor, file, key) does not exist */
    TM_E_TEMPLATE = -7,    /* chat template raised or failed to parse */
    TM_E_CANCELLED = -8,   /* the operation was cancelled by the caller */
    TM_E_CHECKSUM = -9,    /* a checksum did not match */
    TM_E_LIMIT = -10,      /* a configured limit was exceeded (prompt too long, queue full) */
} tm_status;

#define TM_ERR_MSG 512

typedef struct tm_err {
    int code;              /* the last status set, TM_OK if none */
    char msg[TM_ERR_MSG];  /* one line, no trailing newline */
} tm_err;

/* tm_errf: record `code` and a printf-style message in `err` (which may be
 * NULL) and return `code`, so that callers can write
 *     return tm_errf(err, TM_E_FORMAT, "%s: truncated header", path);        */
int tm_errf(tm_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int tm_verrf(tm_err *err, int code, const char *fmt, va_list ap);

/* tm_err_prefix: prepend "prefix: " to an existing message (adds context as
 * an error travels up, e.g. the file name). Returns err->code. */
int tm_err_prefix(tm_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void tm_err_clear(tm_err *err);

/* tm_status_str: a short constant name for a status code ("format error"). */
const char *tm_status_str(int code);

#endif
