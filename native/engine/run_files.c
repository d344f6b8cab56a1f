/* run_files.c - the numbers and the token list of the command line, the dump files of --dump
 * (see run_files.h). */
#include "run_files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "platform.h"

int kt_parse_whole(const char *s, const char **rest, long long lo, long long hi, long long *out) {
    if (*s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || v < lo || v > hi)
        return -1;
    *rest = end;
    *out = v;
    return 0;
}

int32_t *kt_parse_token_list(const char *text, int *n) {
    size_t capacity = 1;
    for (const char *p = text; *p; p++)
        capacity += *p == ',';
    int32_t *ids = malloc(capacity * sizeof(int32_t));
    if (!ids)
        return NULL;
    *n = 0;
    const char *p = text;
    while (*p) {
        const char *end;
        long long v;
        if (kt_parse_whole(p, &end, 0, INT32_MAX, &v) || (*end != ',' && *end != '\0') ||
            (*end == ',' && end[1] == '\0')) { /* a trailing comma names no token */
            free(ids);
            return NULL;
        }
        ids[(*n)++] = (int32_t)v;
        p = *end == ',' ? end + 1 : end;
    }
    if (*n == 0) {
        free(ids);
        return NULL;
    }
    return ids;
}

int kt_write_file_atomic(const char *dir, const char *name, const void *data, size_t n) {
    char path[4096], tmp[4096];
    int path_len = snprintf(path, sizeof path, "%s/%s", dir, name);
    int tmp_len = snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    if (path_len < 0 || tmp_len < 0 || (size_t)path_len >= sizeof path ||
        (size_t)tmp_len >= sizeof tmp) { /* a cut name would write another file */
        errno = ENAMETOOLONG;
        return -1;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return -1;
    size_t written = n ? fwrite(data, 1, n, f) : 0;
    int bad = (written != n) | (fclose(f) != 0);
    if (bad || kt_rename_replace(tmp, path) != 0) {
        int cause = errno; /* for the caller's message, past remove() */
        remove(tmp);
        errno = cause;
        return -1;
    }
    return 0;
}
