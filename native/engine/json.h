/* json.h - a small JSON writer into a growing string. A NULL key means "inside an array"
 * (or the top level). Strings are escaped; non-finite numbers are written as null. */
#ifndef KITE_JSON_H
#define KITE_JSON_H

#include <stddef.h>
#include <stdint.h>

#define KT_JSON_DEPTH 32

typedef struct kt_json {
    char *buf;
    size_t len, cap;
    int depth;
    int count[KT_JSON_DEPTH]; /* values written at each depth */
    int oom;
} kt_json;

void json_init(kt_json *j);
void json_free(kt_json *j);
void json_obj_begin(kt_json *j, const char *key);
void json_obj_end(kt_json *j);
void json_arr_begin(kt_json *j, const char *key);
void json_arr_end(kt_json *j);
void json_str(kt_json *j, const char *key, const char *val); /* NULL val -> null */
void json_int(kt_json *j, const char *key, int64_t val);
void json_num(kt_json *j, const char *key, double val);
void json_bool(kt_json *j, const char *key, int val);
void json_null(kt_json *j, const char *key);

#endif
