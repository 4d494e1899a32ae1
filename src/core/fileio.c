/* core/fileio.c: see fileio.h. */
#include "core/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int tm_map_open(tm_map *m, const char *path, tm_err *err)
{
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tm_errf(err, TM_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return tm_errf(err, TM_E_IO, "%s: not a regular file", path);
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return tm_errf(err, TM_E_IO, "%s: mmap failed: %s", path, strerror(e));
        }
        m->data = p;
        m->size = (size_t)st.st_size;
    }
    close(fd);
    return TM_OK;
}

void tm_map_close(tm_map *m)
{
    if (m->data) munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

int tm_read_file(const char *path, char **out, size_t *len, size_t max_bytes, tm_err *err)
{
    *out = NULL;
    if (max_bytes == 0) max_bytes = (size_t)1 << 30;
    FILE *f = fopen(path, "rb");
    if (!f) return tm_errf(err, TM_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return tm_errf(err, TM_E_IO, "%s: not a regular file", path);
    }
    if ((size_t)st.st_size > max_bytes) {
        fclose(f);
        return tm_errf(err, TM_E_LIMIT, "%s: file is %lld bytes, more than the %zu accepted",
                       path, (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return tm_errf(err, TM_E_NOMEM, "%s: out of memory reading %zu bytes", path, n);
    }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    if (got != n) {
        free(buf);
        return tm_errf(err, TM_E_IO, "%s: short read (%zu of %zu bytes)", path, got, n);
    }
    buf[n] = '\0';
    *out = buf;
    if (len) *len = n;
    return TM_OK;
}

int tm_path_join(char *buf, size_t n, const char *dir, const char *name)
{
    int k = snprintf(buf, n, "%s/%s", dir, name);
    return (k < 0 || (size_t)k >= n) ? TM_E_INVALID : TM_OK;
}

int tm_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int tm_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int tm_read_dir_files(const char *dir, const char *suffix, size_t max_bytes, tm_dir_file_fn fn, void *ctx, tm_err *err)
{
    enum { MAX_FILES = 256 };
    DIR *d = tm_is_dir(dir) ? opendir(dir) : NULL;
    if (!d) return TM_OK;
    char *names[MAX_FILES];
    int n = 0, rc = TM_OK;
    size_t sl = strlen(suffix);
    struct dirent *e;
    while ((e = readdir(d)) && n < MAX_FILES) {
        size_t len = strlen(e->d_name);
        if (len <= sl || len > 200 || e->d_name[0] == '.' || strcmp(e->d_name + len - sl, suffix)) continue;
        if (!(names[n] = strdup(e->d_name))) {
            rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", dir);
            break;
        }
        n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    for (int i = 0; i < n && rc == TM_OK; i++) {
        char path[4096], stem[256], *text = NULL;
        size_t len = 0;
        snprintf(stem, sizeof stem, "%.*s", (int)(strlen(names[i]) - sl), names[i]);
        if (tm_path_join(path, sizeof path, dir, names[i]) != TM_OK) continue;
        if ((rc = tm_read_file(path, &text, &len, max_bytes, err)) == TM_OK) rc = fn(ctx, stem, text, len, err);
        free(text);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    return rc;
}

int tm_afile_open(tm_afile *a, const char *path, tm_err *err)
{
    memset(a, 0, sizeof *a);
    if (strlen(path) >= sizeof a->path) return tm_errf(err, TM_E_INVALID, "%s: path too long", path);
    strcpy(a->path, path);
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid());
    a->f = fopen(a->tmp, "wb");
    if (!a->f) return tm_errf(err, TM_E_IO, "%s: cannot create: %s", a->tmp, strerror(errno));
    return TM_OK;
}

int tm_afile_commit(tm_afile *a, tm_err *err)
{
    if (!a->f) return tm_errf(err, TM_E_INVALID, "%s: not open", a->path);
    int bad = fflush(a->f) != 0 || ferror(a->f);
    if (!bad) bad = fsync(fileno(a->f)) != 0;
    int e = errno;
    if (fclose(a->f) != 0) bad = 1;
    a->f = NULL;
    if (bad) {
        unlink(a->tmp);
        return tm_errf(err, TM_E_IO, "%s: write failed: %s", a->tmp, strerror(e));
    }
    if (rename(a->tmp, a->path) != 0) {
        e = errno;
        unlink(a->tmp);
        return tm_errf(err, TM_E_IO, "%s: rename failed: %s", a->path, strerror(e));
    }
    return TM_OK;
}

void tm_afile_abort(tm_afile *a)
{
    if (a->f) fclose(a->f);
    a->f = NULL;
    if (a->tmp[0]) unlink(a->tmp);
}
