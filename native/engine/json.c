/* json.c - see json.h. */
#include "json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void json_init(kt_json *j) {
    memset(j, 0, sizeof *j);
}

void json_free(kt_json *j) {
    free(j->buf);
    memset(j, 0, sizeof *j);
}

static void put(kt_json *j, const char *s, size_t n) {
    if (j->oom)
        return;
    if (j->len + n + 1 > j->cap) {
        size_t nc = j->cap ? j->cap : 256;
        while (nc < j->len + n + 1)
            nc *= 2;
        char *p = realloc(j->buf, nc);
        if (!p) {
            j->oom = 1;
            return;
        }
        j->buf = p;
        j->cap = nc;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void puts_(kt_json *j, const char *s) {
    put(j, s, strlen(s));
}

/* The length of the well-formed UTF-8 sequence of 2 to 4 bytes at p (no overlong form, no
 * surrogate, at most U+10FFFF), else 0. */
static int utf8_sequence_length(const unsigned char *p) {
    int n;
    unsigned lo = 0x80, hi = 0xbf; /* the allowed range of the second byte */
    if (p[0] >= 0xc2 && p[0] <= 0xdf) n = 2;
    else if (p[0] >= 0xe0 && p[0] <= 0xef) n = 3;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4) n = 4;
    else return 0;
    if (p[0] == 0xe0) lo = 0xa0;
    if (p[0] == 0xed) hi = 0x9f;
    if (p[0] == 0xf0) lo = 0x90;
    if (p[0] == 0xf4) hi = 0x8f;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

static void put_escaped(kt_json *j, const char *s) {
    put(j, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char tmp[8];
        if (*p >= 0x80) {
            int n = utf8_sequence_length(p);
            if (n) {
                put(j, (const char *)p, (size_t)n);
                p += n - 1;
            } else { /* a byte that is not UTF-8 (a path's): U+DC80..U+DCFF, Python's
                      * surrogateescape, so the document stays UTF-8 and os.fsencode gives the
                      * byte back */
                snprintf(tmp, sizeof tmp, "\\u%04x", 0xdc00u + *p);
                puts_(j, tmp);
            }
            continue;
        }
        switch (*p) {
        case '"': puts_(j, "\\\""); break;
        case '\\': puts_(j, "\\\\"); break;
        case '\n': puts_(j, "\\n"); break;
        case '\r': puts_(j, "\\r"); break;
        case '\t': puts_(j, "\\t"); break;
        case '\b': puts_(j, "\\b"); break;
        case '\f': puts_(j, "\\f"); break;
        default:
            if (*p < 0x20) {
                snprintf(tmp, sizeof tmp, "\\u%04x", *p);
                puts_(j, tmp);
            } else {
                put(j, (const char *)p, 1);
            }
        }
    }
    put(j, "\"", 1);
}

/* Separator and key before a value. */
static void lead(kt_json *j, const char *key) {
    if (j->count[j->depth]++ > 0)
        put(j, ", ", 2);
    if (key) {
        put_escaped(j, key);
        put(j, ": ", 2);
    }
}

static void open_(kt_json *j, const char *key, const char *br) {
    lead(j, key);
    puts_(j, br);
    if (j->depth + 1 < KT_JSON_DEPTH)
        j->depth++;
    j->count[j->depth] = 0;
}

static void close_(kt_json *j, const char *br) {
    if (j->depth > 0)
        j->depth--;
    puts_(j, br);
}

void json_obj_begin(kt_json *j, const char *key) { open_(j, key, "{"); }
void json_obj_end(kt_json *j) { close_(j, "}"); }
void json_arr_begin(kt_json *j, const char *key) { open_(j, key, "["); }
void json_arr_end(kt_json *j) { close_(j, "]"); }

void json_str(kt_json *j, const char *key, const char *val) {
    lead(j, key);
    if (val)
        put_escaped(j, val);
    else
        puts_(j, "null");
}

void json_int(kt_json *j, const char *key, int64_t val) {
    char tmp[32];
    lead(j, key);
    snprintf(tmp, sizeof tmp, "%lld", (long long)val);
    puts_(j, tmp);
}

void json_num(kt_json *j, const char *key, double val) {
    char tmp[40];
    lead(j, key);
    if (!isfinite(val)) {
        puts_(j, "null");
        return;
    }
    snprintf(tmp, sizeof tmp, "%.6f", val);
    puts_(j, tmp);
}

void json_bool(kt_json *j, const char *key, int val) {
    lead(j, key);
    puts_(j, val ? "true" : "false");
}

void json_null(kt_json *j, const char *key) {
    lead(j, key);
    puts_(j, "null");
}
