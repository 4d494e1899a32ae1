/* core/fileio.h: whole-file reads, read-only memory maps, atomic writes.
 *
 *   tm_map m;
 *   if (tm_map_open(&m, "model.safetensors", &err) != TM_OK) ...;
 *   use m.data[0 .. m.size)
 *   tm_map_close(&m);
 *
 * Atomic writes go to "<path>.tmp.<pid>" and are renamed over <path> only by
 * tm_afile_commit(); tm_afile_abort() (or a crash) leaves <path> untouched. */
#ifndef TM_CORE_FILEIO_H
#define TM_CORE_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

typedef struct tm_map {
    const uint8_t *data; /* [size] bytes, read-only; NULL when size == 0 */
    size_t size;
} tm_map;

int tm_map_open(tm_map *m, const char *path, tm_err *err);
void tm_map_close(tm_map *m);

/* tm_read_file: read a whole file into a fresh NUL-terminated buffer (free()
 * it). *len (optional) receives the size without the NUL. max_bytes bounds
 * the size accepted (0 = 1 GiB) so a hostile file cannot exhaust memory. */
int tm_read_file(const char *path, char **out, size_t *len, size_t max_bytes, tm_err *err);

/* tm_path_join: "dir/name" into buf (size n); returns TM_E_INVALID if it does not fit. */
int tm_path_join(char *buf, size_t n, const char *dir, const char *name);
int tm_file_exists(const char *path);
int tm_is_dir(const char *path);

/* tm_read_dir_files: for each file STEM + suffix in dir (in name order; at most 256, each of at most
 * max_bytes, 0 = 1 GiB), fn(ctx, STEM, its text NUL-terminated, its length, err); the first status fn
 * returns that is not TM_OK stops the walk and is returned. A dir that does not exist has no files. */
typedef int (*tm_dir_file_fn)(void *ctx, const char *stem, const char *text, size_t len, tm_err *err);
int tm_read_dir_files(const char *dir, const char *suffix, size_t max_bytes, tm_dir_file_fn fn, void *ctx, tm_err *err);

typedef struct tm_afile {
    FILE *f;            /* write through this */
    char path[4096];    /* final name */
    char tmp[4200];     /* temporary name, same directory */
} tm_afile;

int tm_afile_open(tm_afile *a, const char *path, tm_err *err);
int tm_afile_commit(tm_afile *a, tm_err *err); /* fsync, close, rename */
void tm_afile_abort(tm_afile *a);               /* close and unlink the temporary */

#endif
